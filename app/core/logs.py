"""Structured logs: one JSON object per line on stderr, and one line per request.

The formatter is a few lines of our own rather than python-json-logger: it needs only
orjson's ``dumps`` of the record's fields (``json.dumps`` took 8.5 µs of a request line's 45,
orjson 0.6; 2.1% of a decision POST's instructions with the line, 2026-11-26), and owning it
keeps the field names (``ts``, ``level``, ``logger``, ``message``, then whatever the call
passed in ``extra``) fixed in one place.

Each request gets an id: the client's ``X-Request-ID`` when it is a sane token, else a new one.
It is echoed in the response and carried by every line logged while the request runs. The
request line holds the route template, never the path or query string (which may carry
secrets or names), and never a body or a header other than the id. The same pass, timed once,
feeds the request metrics (app/core/metrics.py).
"""

import asyncio
import json
import logging
import logging.config
import re
import sys
import time
import uuid
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

import orjson
from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.errors import ServiceUnavailable, problem_response
from app.core.metrics import Metrics, route_template
from app.redaction import redact_value

REQUEST_ID_HEADER = "X-Request-ID"
# Letters, digits and a few separators, as UUIDs, ULIDs and trace ids are: nothing that could
# forge a log line or smuggle a header.
SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")

request_id: ContextVar[str | None] = ContextVar("request_id", default=None)
# Set in a request's task once it was cancelled and answered 503 (``RequestRecordMiddleware``).
_answered_cancelled: ContextVar[bool] = ContextVar("answered_cancelled", default=False)
_UNCAUGHT = "Exception in ASGI application"

access_log = logging.getLogger("context_store.access")

# What every LogRecord has; anything else on a record came from ``extra`` and is logged.
_RECORD_ATTRIBUTES = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
# uvicorn passes a coloured copy of its messages for terminals.
_DROPPED = frozenset({"color_message"})


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            # Any secret a message quotes (a path, a driver's message) never reaches the log.
            "message": redact_value(record.getMessage()),
        }
        current = request_id.get()
        if current is not None:
            entry["request_id"] = current
        for key, value in vars(record).items():
            if key not in _RECORD_ATTRIBUTES and key not in _DROPPED:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        try:
            return orjson.dumps(entry, default=str, option=_AS_JSON_WROTE_THEM).decode()
        except orjson.JSONEncodeError:
            # What orjson refuses and ``json`` writes: an integer past 64 bits, a lone
            # surrogate, nesting past 255 levels.
            return json.dumps(entry, default=str, ensure_ascii=False)


# A dataclass or a time in ``extra`` logged as its ``str``, as ``json.dumps(default=str)`` did:
# orjson's own rendering of a dataclass would also show the fields its ``repr`` hides (a
# secret among them).
_AS_JSON_WROTE_THEM = (
    orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
)


def logging_config(level: str = "INFO") -> dict[str, Any]:
    """A ``dictConfig`` that sends every logger (uvicorn's, alembic's, ours) through the JSON
    formatter on stderr. uvicorn's access log is left without a handler: ours replaces it."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "filters": {
            "abandoned": {"()": "app.core.sending.AbandonedResponseFilter"},
            "cancelled": {"()": "app.core.logs.CancelledRequestFilter"},
        },
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"handlers": ["stderr"], "level": level},
        "loggers": {
            "uvicorn": {"handlers": [], "propagate": True},
            "uvicorn.error": {
                "handlers": [],
                "propagate": True,
                "filters": ["abandoned", "cancelled"],
            },
            "uvicorn.access": {"handlers": [], "propagate": False},
            "alembic": {"handlers": [], "propagate": True},
            # /mcp: each tool's in-process request has its own line already (the request
            # log), and the MCP SDK says at INFO that every stateless request's session ends.
            "httpx": {"level": "WARNING"},
            "mcp": {"level": "WARNING"},
        },
    }


def configure_logging(level: str = "INFO") -> None:
    logging.config.dictConfig(logging_config(level))
    gather_only_what_lines_show()


def gather_only_what_lines_show() -> None:
    """What no line shows (``JsonFormatter`` writes none of it), not gathered for each record:
    the caller's frame, found by walking the stack, the thread's and process's names and ids,
    and on Python 3.12 (the container's) the asyncio task's name (the logging HOWTO's
    "Optimization"). Process-wide switches, which no logging configuration touches: every
    command that logs sets them, ``configure_logging``'s callers and ``serve``, whose logging
    uvicorn configures."""
    logging._srcfile = None  # the documented switch
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    if sys.version_info >= (3, 12):
        logging.logAsyncioTasks = False


def _request_id_from(scope: Scope) -> str:
    for name, value in scope["headers"]:
        if name == b"x-request-id":
            candidate: str = value.decode("latin-1")
            # One that holds a secret (a key pasted into the wrong header) is neither echoed
            # nor logged: the request gets an id of its own, as for one that is not sane.
            if SANE_REQUEST_ID.fullmatch(candidate) and redact_value(candidate) == candidate:
                return candidate
            break
    return uuid.uuid4().hex


class RequestRecordMiddleware:
    """One pass per request for all that is recorded of it: gives it its id, times it once,
    and when it ends logs its line and counts it in the metrics."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        method = scope["method"]
        current = _request_id_from(scope)
        token = request_id.set(current)
        status = 500
        answered = False

        async def send_with_request_id(message: Message) -> None:
            nonlocal status, answered
            if message["type"] == "http.response.start":
                status = message["status"]
                answered = True
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = current
            await send(message)

        in_progress = self.metrics.in_progress_of(method)
        in_progress.inc()
        try:
            await self.app(scope, receive, send_with_request_id)
        except asyncio.CancelledError:
            # uvicorn cancels the requests still running when the shutdown's grace period
            # ends, and answers each that has no answer yet 500, with a traceback: it is told
            # to come back instead (a retry with its Idempotency-Key is safe), and the
            # cancellation goes on. Only when this request's own task is being cancelled: a
            # CancelledError from a future cancelled elsewhere is a failure like any other.
            task = asyncio.current_task()
            if not answered and task is not None and task.cancelling():
                await _answer_cancelled(scope, receive, send_with_request_id)
            raise
        finally:
            in_progress.dec()
            seconds = time.perf_counter() - started
            route = route_template(scope)
            self.metrics.observe_request(method, route, status, seconds)
            _log(scope, method, route, status, seconds)
            request_id.reset(token)


async def _answer_cancelled(scope: Scope, receive: Receive, send: Send) -> None:
    """A 503 for a request whose task is being cancelled. It closes the connection, so that a
    request pipelined behind it never starts on a server that has shut down; a client gone
    meanwhile leaves the cancellation as it was."""
    unavailable = ServiceUnavailable(
        "The server stopped before it answered this request; retry it."
    )
    response = problem_response(unavailable)
    response.headers["Connection"] = "close"
    try:
        await response(scope, receive, send)
    except Exception:  # the client gone: the cancellation is what the task ends with
        return
    _answered_cancelled.set(True)


def _log(scope: Scope, method: str, route: str, status: int, seconds: float) -> None:
    fields: dict[str, Any] = {
        "method": method,
        "route": route,
        "status": status,
        "duration_ms": round(seconds * 1000, 3),
    }
    # Set by the authentication dependency once the key is known.
    tenant = scope.get("state", {}).get("tenant")
    if tenant is not None:
        fields["tenant"] = tenant
    level = logging.ERROR if status >= 500 else logging.INFO
    access_log.log(level, "%s %s %d", method, route, status, extra=fields)


class CancelledRequestFilter(logging.Filter):
    """Drops uvicorn's traceback of the cancellation of a request that was answered 503 for
    it (``RequestRecordMiddleware``; its request line says so): the server did not fail."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            _answered_cancelled.get()
            and record.getMessage().startswith(_UNCAUGHT)
            and record.exc_info is not None
            and isinstance(record.exc_info[1], asyncio.CancelledError)
        )
