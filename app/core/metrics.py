"""Prometheus metrics: requests by route and status, latency, requests in flight, and where
requests queue: for a worker thread, for a database connection, for an archive export's turn
(read when scraped)."""

from collections.abc import Callable, Iterator, Mapping
from weakref import WeakKeyDictionary

from anyio import CapacityLimiter
from fastapi.routing import iter_route_contexts
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy.pool import QueuePool
from starlette.applications import Starlette
from starlette.types import Scope

from app.core.db import Database, ObservedQueuePool
from app.core.limits import Turns

# By app, then by the route's id (routes define __eq__ and cannot be hashed); the app keeps
# its routes, so an id stays valid as long as its entry does.
_templates: "WeakKeyDictionary[Starlette, dict[int, str]]" = WeakKeyDictionary()


def route_template(scope: Scope) -> str:
    """The route's template, not the path: one series per route, not one per project name.

    ``scope["route"]`` is the route as declared, whose ``path`` lacks the prefixes of the
    routers it was included through; the full template comes from FastAPI's route contexts
    (what the OpenAPI document is built from), read once per app.
    """
    route = scope.get("route")
    if route is None:
        return "unmatched"
    app = scope["app"]
    if app not in _templates:
        _templates[app] = {
            id(context.original_route): context.path_format
            for context in iter_route_contexts(app.routes)
            if context.path_format
        }
    return _templates[app].get(id(route)) or getattr(route, "path", None) or "unmatched"


class PoolCollector(Collector):
    """Each engine's pool as it is at scrape time.

    ``database`` returns the app's database, whose pools are reported by name (None before the
    app has started: nothing to report).
    SQLAlchemy counts the connections a pool has not opened yet as negative overflow; the
    overflow reported here is only the connections open beyond ``pool_size``.
    """

    def __init__(self, database: Callable[[], Database | None]) -> None:
        self.database = database

    def collect(self) -> Iterator[Metric]:
        families = {
            "size": GaugeMetricFamily(
                "context_store_db_pool_size", "Connections the pool keeps.", labels=["pool"]
            ),
            "checked_out": GaugeMetricFamily(
                "context_store_db_pool_checked_out",
                "Connections in use by a request or a command.",
                labels=["pool"],
            ),
            "checked_in": GaugeMetricFamily(
                "context_store_db_pool_checked_in",
                "Open connections idle in the pool.",
                labels=["pool"],
            ),
            "overflow": GaugeMetricFamily(
                "context_store_db_pool_overflow",
                "Connections open beyond the pool's size.",
                labels=["pool"],
            ),
            "waiting": GaugeMetricFamily(
                "context_store_db_pool_waiting",
                "Threads waiting for a connection of the pool.",
                labels=["pool"],
            ),
        }
        database = self.database()
        engines = database.engines() if database is not None else {}
        for name, engine in engines.items():
            pool = engine.pool
            if not isinstance(pool, QueuePool):
                continue
            families["size"].add_metric([name], pool.size())
            families["checked_out"].add_metric([name], pool.checkedout())
            families["checked_in"].add_metric([name], pool.checkedin())
            families["overflow"].add_metric([name], max(pool.overflow(), 0))
            if isinstance(pool, ObservedQueuePool):
                families["waiting"].add_metric([name], pool.waiting)
        yield from families.values()


class QueueCollector(Collector):
    """The worker threads (anyio's limiter), SQLite's write thread (none of either before the
    app has started) and the turns of long work (archive exports, imports under the bulk
    limit): how many are in use, and how many requests wait for one."""

    def __init__(
        self,
        threads: Callable[[], CapacityLimiter | None],
        database: Callable[[], Database | None],
        turns: Mapping[str, Turns],
    ) -> None:
        self.threads = threads
        self.database = database
        self.turns = turns

    def collect(self) -> Iterator[Metric]:
        if (limiter := self.threads()) is not None:
            statistics = limiter.statistics()
            yield GaugeMetricFamily(
                "context_store_worker_threads_limit",
                "Worker threads that may run route code and database calls at once.",
                value=statistics.total_tokens,
            )
            yield GaugeMetricFamily(
                "context_store_worker_threads_busy",
                "Worker threads in use.",
                value=statistics.borrowed_tokens,
            )
            yield GaugeMetricFamily(
                "context_store_worker_threads_waiting",
                "Requests waiting for a worker thread.",
                value=statistics.tasks_waiting,
            )
        database = self.database()
        if database is not None:
            yield GaugeMetricFamily(
                "context_store_write_thread_busy",
                "Threads running small writes: SQLite's one, or one per project on PostgreSQL.",
                value=database.write_turns.busy,
            )
            yield GaugeMetricFamily(
                "context_store_write_thread_waiting",
                "Small writes waiting for their turn (SQLite's writer, or their project's).",
                value=database.write_turns.waiting,
            )
        for name, turns in self.turns.items():
            yield GaugeMetricFamily(
                f"context_store_{name}_running",
                f"{turns.what.capitalize()} running now (holding a turn).",
                value=turns.total,
            )
            yield GaugeMetricFamily(
                f"context_store_{name}_waiting",
                f"{turns.what.capitalize()} waiting for a turn.",
                value=turns.waiting,
            )


# The methods the routes answer, each a series of its own; any other a client sends (the HTTP
# parser takes some forty, WebDAV's and others) is counted as "other": a hostile client sending
# every one to every route grew /metrics to 3.9 MB (2026-11-27).
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def _method_label(method: str) -> str:
    return method if method in _METHODS else "other"


class Metrics:
    """One registry per app, so that several apps in one process (tests) stay apart."""

    def __init__(
        self,
        database: Callable[[], Database | None],
        threads: Callable[[], CapacityLimiter | None],
        turns: Mapping[str, Turns],
    ) -> None:
        """``turns``: the turns of long work, by the name their metrics go under."""
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "context_store_http_requests",
            "HTTP requests handled, by route template and status code.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "context_store_http_request_duration_seconds",
            "Time from request start to the end of the response, by route template.",
            ["method", "route"],
            registry=self.registry,
        )
        # By method only: the route is known only once routing has run.
        self.in_progress = Gauge(
            "context_store_http_requests_in_progress",
            "HTTP requests being handled now.",
            ["method"],
            registry=self.registry,
        )
        self.connection_wait = Histogram(
            "context_store_db_pool_wait_seconds",
            "Time a thread waited for a connection of the pool (opening one included).",
            ["pool"],
            buckets=(0.001, 0.005, 0.025, 0.1, 0.5, 1, 2.5, 5, 10, 30),
            registry=self.registry,
        )
        self.wal_checkpoints = Counter(
            "context_store_sqlite_wal_checkpoints",
            "WAL checkpoints (SQLite): the checkpoint thread's, and the writer's between two"
            " write turns, which let its next write rewind the WAL.",
            registry=self.registry,
        )
        self.registry.register(PoolCollector(database))
        self.registry.register(QueueCollector(threads, database, turns))
        # Each request's series, by their labels: ``labels()`` checks its arguments and takes a
        # lock at every call, and the series are few (methods, routes, statuses).
        self._in_progress: dict[str, Gauge] = {}
        self._ended: dict[tuple[str, str, int], tuple[Counter, Histogram]] = {}

    def observe_database(self, database: Database) -> None:
        """Record each pool's waits, by its name, and the WAL checkpoints (SQLite)."""
        for name, engine in database.engines().items():
            if isinstance(engine.pool, ObservedQueuePool):
                engine.pool.on_wait = self.connection_wait.labels(name).observe
        if database.checkpoints is not None:
            database.checkpoints.on_checkpoint = self.wal_checkpoints.inc

    def in_progress_of(self, method: str) -> Gauge:
        """The gauge of the requests of this method being handled now."""
        method = _method_label(method)
        gauge = self._in_progress.get(method)
        if gauge is None:
            gauge = self._in_progress.setdefault(method, self.in_progress.labels(method))
        return gauge

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count a request that ended, by its route's template (app/core/logs.py times it)."""
        method = _method_label(method)
        series = self._ended.get((method, route, status))
        if series is None:
            series = self._ended.setdefault(
                (method, route, status),
                (
                    self.requests.labels(method, route, str(status)),
                    self.latency.labels(method, route),
                ),
            )
        requests, latency = series
        requests.inc()
        latency.observe(seconds)

    def exposition(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
