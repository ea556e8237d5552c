"""Context pack and restore-by-rebuild as the stored items grow (1k, 100k, 1M): latency must
stay flat. Items are seeded straight into the tables with SQLAlchemy Core (the API would take
far longer than the benchmark's budget), then ANALYZEd. The query plans of what both routes
run are captured in-process and checked for full scans of the large tables, and for sorts."""

import json
import re
import statistics
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import httpx

with warnings.catch_warnings():
    # Starlette nudges TestClient users towards httpx2; the project standardises on httpx.
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine, event, insert, select, text

from app.agents.models import AgentMemoryItem, AgentMemoryTurn, turn_key
from app.core.conditional import etag_of
from app.formats import project_memory
from app.formats.agent_memory import render_line
from app.main import create_app
from app.memory.models import MemoryItem
from app.projects.models import Project
from tests.bench import documents
from tests.bench.servers import TENANT, BenchDatabase, Server, cpu_seconds

PROJECT = "bench-scale"
AGENT = "agent-1"
FEATURE = "feature-007"
BATCH = 20_000
LARGE_TABLES = ("memory_items", "agent_memory_items", "agent_memory_turns")
FULL_SCAN = {
    "sqlite": re.compile(r"\bSCAN (" + "|".join(LARGE_TABLES) + r")\b(?! USING)"),
    "postgresql": re.compile(r"Seq Scan on (" + "|".join(LARGE_TABLES) + r")\b"),
}
# A read that sorts what it found grows with it too, however it found it (a feature's
# failures did, before migration 0014). SQLite names no table for its sort: every sort in these
# routes' plans is counted (a whole ORDER BY or its right part, a GROUP BY, a DISTINCT; on
# PostgreSQL a Sort node, incremental ones too), and the plans printed name the statement.
SORT = {
    "sqlite": re.compile(r"USE TEMP B-TREE FOR"),
    "postgresql": re.compile(r"\bSort\b"),
}
# Shares of the items: decisions and failures (the pack), the agent's three memory files.
PROJECT_SHARES = {"decision": 0.9, "failure": 0.1}
AGENT_SHARES = {"raw_trace": 0.8, "episodic": 0.1, "semantic": 0.1}
REPEATS = 9
FLAT_LIMIT = 2.0


class Seeder:
    """Adds rows up to a total, remembering how many of each kind are in already."""

    def __init__(self, engine: Engine, project_id: int) -> None:
        self.engine = engine
        self.project_id = project_id
        self.seeded: dict[str, int] = {}
        self.turns: set[str] = set()

    def grow_to(self, total: int) -> None:
        for kind, share in PROJECT_SHARES.items():
            self._insert(MemoryItem.__table__, kind, int(total * share), self._memory_item)
        for kind, share in AGENT_SHARES.items():
            self._insert(AgentMemoryItem.__table__, kind, int(total * share), self._agent_item)
        self.analyze()

    def grow_items_to(self, kind: str, total: int) -> None:
        """Project memory items of one kind only (the growth series' appends)."""
        self._insert(MemoryItem.__table__, kind, total, self._memory_item)
        self.analyze()

    def analyze(self) -> None:
        with self.engine.begin() as connection:
            connection.execute(text("ANALYZE"))

    def _insert(self, table: Any, kind: str, target: int, row: Any) -> None:
        start = self.seeded.get(kind, 0)
        for first in range(start, target, BATCH):
            numbers = range(first, min(first + BATCH, target))
            with self.engine.begin() as connection:
                rows = [row(kind, n) for n in numbers]
                if kind == "raw_trace":
                    self._insert_traces(connection, rows)
                else:
                    connection.execute(insert(table), rows)
        self.seeded[kind] = max(start, target)

    def _insert_traces(self, connection: Any, rows: list[dict[str, Any]]) -> None:
        """Raw traces, and the turns they begin, as MemoryRepository.add registers them."""
        items = AgentMemoryItem.__table__
        inserted = connection.execute(
            insert(items).returning(items.c.id, items.c.turn_key, sort_by_parameter_order=True),
            rows,
        )
        turns = []
        for item_id, key in inserted:
            if key not in self.turns:
                self.turns.add(key)
                turns.append(
                    {
                        "project_id": self.project_id,
                        "agent": AGENT,
                        "turn_key": key,
                        "first_item_id": item_id,
                    }
                )
        if turns:
            connection.execute(insert(AgentMemoryTurn.__table__), turns)

    def _memory_item(self, kind: str, number: int) -> dict[str, Any]:
        document = documents.memory_item_document(kind, number)
        columns = project_memory.item_columns(document, project_memory.ItemKind(kind))
        content = json.dumps(document).encode("ascii")
        return {
            "project_id": self.project_id,
            "kind": kind,
            "item_id": columns.item_id,
            # The number of its id (dec-0000007: 7), as the service indexes it.
            "id_number": number,
            "position": number,
            "feature_id": columns.feature_id,
            "category": columns.category,
            "severity": columns.severity,
            "timestamp": columns.timestamp,
            "expires_at": columns.expires_at,
            "resolved": columns.resolved,
            "features_mark": 0,
            "search_text": columns.search_text,
            "content": content,
            "etag": etag_of(content),
            "updated_at": datetime.now(UTC),
        }

    def _agent_item(self, kind: str, number: int) -> dict[str, Any]:
        item = {
            "raw_trace": documents.raw_trace,
            "episodic": documents.episodic,
            "semantic": documents.semantic,
        }[kind](number)
        return {
            "project_id": self.project_id,
            "agent": AGENT,
            "kind": kind,
            "turn_id": item.get("turn_id"),
            "turn_key": turn_key(item["turn_id"]) if kind == "raw_trace" else None,
            "line": render_line(item),
            "created_at": datetime.now(UTC),
        }


def _prepare(client: httpx.Client) -> None:
    """What the API itself should hold: the summary, a few constraints, the agent."""
    memory = f"/v1/projects/{PROJECT}/memory"
    summary = {"content": "# Project Summary\n\n" + "Work so far. " * 50, "tokenCount": 200}
    client.put(f"{memory}/running-summary", json=summary).raise_for_status()
    for number in range(5):
        document = documents.memory_item_document("constraint", number)
        client.post(f"{memory}/constraints", json=document).raise_for_status()


def project_id(engine: Engine, project: str = PROJECT) -> int:
    with engine.connect() as connection:
        statement = select(Project.id).where(Project.tenant == TENANT, Project.name == project)
        project_id: int = connection.execute(statement).scalar_one()
        return project_id


PACK = f"/v1/projects/{PROJECT}/memory/context?feature_id={FEATURE}&max_tokens=2000"
SNAPSHOT = f"/v1/projects/{PROJECT}/agents/{AGENT}/working-context-snapshot"
RESTORE = f"/v1/projects/{PROJECT}/agents/{AGENT}/restore"
RESTORE_BODY = {"system_prompt": "You are a careful engineer."}


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


def _measure(client: httpx.Client, pid: int) -> tuple[float, float, float, float]:
    """Median wall ms of the pack and of a rebuilding restore, and the server's CPU ms per
    request of each (which what else the machine runs moves far less)."""
    packs, restores = [], []
    client.get(PACK).raise_for_status()  # warm-up
    cpu = cpu_seconds(pid)
    for _ in range(REPEATS):
        started = time.perf_counter()
        client.get(PACK).raise_for_status()
        packs.append(time.perf_counter() - started)
    pack_cpu = (cpu_seconds(pid) - cpu) / REPEATS
    cpu = cpu_seconds(pid)
    for _ in range(REPEATS):
        client.delete(SNAPSHOT)  # no cache: the restore rebuilds from memory
        started = time.perf_counter()
        response = client.post(RESTORE, json=RESTORE_BODY)
        restores.append(time.perf_counter() - started)
        response.raise_for_status()
        assert response.json()["source"] == "rebuild"
    # The deletes are in it too: they cost the same at every size.
    restore_cpu = (cpu_seconds(pid) - cpu) / REPEATS
    return (
        _median_ms(packs),
        _median_ms(restores),
        round(pack_cpu * 1000, 2),
        round(restore_cpu * 1000, 2),
    )


@contextmanager
def _recorded_selects(engines: set[Engine]) -> Iterator[list[tuple[str, Any]]]:
    statements: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith(("SELECT", "WITH")):
            statements.append((statement, parameters))

    for engine in engines:
        event.listen(engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        for engine in engines:
            event.remove(engine, "before_cursor_execute", record)


def _explain(connection: Any, backend: str, statement: str, parameters: Any) -> dict[str, Any]:
    prefix = "EXPLAIN QUERY PLAN " if backend == "sqlite" else "EXPLAIN "
    rows = connection.exec_driver_sql(prefix + statement, parameters).all()
    plan = "\n".join(" ".join(str(value) for value in row) for row in rows)
    return {
        "statement": " ".join(statement.split()),
        "plan": plan,
        "full_scan": bool(FULL_SCAN[backend].search(plan)),
        "sort": bool(SORT[backend].search(plan)),
    }


def query_plans(database: BenchDatabase) -> list[dict[str, Any]]:
    """EXPLAIN (QUERY PLAN) of every SELECT the pack and a rebuilding restore run, with the
    parameters they ran with, from a copy of the app in this process."""
    app = create_app(database.settings())
    with TestClient(app, headers={"authorization": f"Bearer {database.key}"}) as client:
        db = app.state.database
        with _recorded_selects({db.reader, db.writer}) as statements:
            client.delete(SNAPSHOT)
            client.get(PACK).raise_for_status()
            client.post(RESTORE, json=RESTORE_BODY).raise_for_status()
        unique: dict[str, Any] = {}
        for statement, parameters in statements:
            unique.setdefault(statement, parameters)
        with db.reader.connect() as connection:
            return [
                _explain(connection, database.backend, statement, parameters)
                for statement, parameters in unique.items()
            ]


def run(
    backend: str, server: Server, database: BenchDatabase, sizes: list[int]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    headers = {"authorization": f"Bearer {database.key}"}
    engine = create_engine(database.url)
    rows: list[dict[str, Any]] = []
    try:
        with httpx.Client(base_url=server.url, headers=headers, timeout=300) as client:
            _prepare(client)
            seeder = Seeder(engine, project_id(engine))
            for size in sizes:
                started = time.perf_counter()
                seeder.grow_to(size)
                seeded_s = time.perf_counter() - started
                pack_ms, restore_ms, pack_cpu, restore_cpu = _measure(client, server.pid)
                rows.append(
                    {
                        "backend": backend,
                        "items": size,
                        "seed_s": round(seeded_s, 1),
                        "pack_ms": pack_ms,
                        "restore_ms": restore_ms,
                        "pack_cpu_ms": pack_cpu,
                        "restore_cpu_ms": restore_cpu,
                    }
                )
        plans = query_plans(database)
    finally:
        engine.dispose()
    base = rows[0]
    for row in rows:
        row["pack_ratio"] = round(row["pack_ms"] / base["pack_ms"], 2)
        row["restore_ratio"] = round(row["restore_ms"] / base["restore_ms"], 2)
        row["pack_cpu_ratio"] = round(row["pack_cpu_ms"] / max(base["pack_cpu_ms"], 0.01), 2)
        row["restore_cpu_ratio"] = round(
            row["restore_cpu_ms"] / max(base["restore_cpu_ms"], 0.01), 2
        )
        row["met"] = row["pack_ratio"] <= FLAT_LIMIT and row["restore_ratio"] <= FLAT_LIMIT
        # The plans are captured once, at the largest size: their counts are that row's.
        largest = row is rows[-1]
        row["full_scans"] = sum(plan["full_scan"] for plan in plans) if largest else None
        row["sorts"] = sum(plan["sort"] for plan in plans) if largest else None
    return rows, plans
