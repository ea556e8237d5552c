"""Growth series (issue 20): the server's CPU time per append, block by block, as what the
append goes into grows. An append should cost the same at any size: flat means the last block
at most 1.2x the first.

- decisions POSTed without an ``id`` into a project holding 0 ... ``items`` decisions (seeded
  straight into the table, as the scaling part does);
- handovers POSTed into one feature whose ``context.json`` holds 0 ... ``notes`` notes;
- iteration starts, each of a new bead, on one run whose ``state.json`` holds 0 ... ``notes``
  beads (both seeded with one PUT of the document).

Each level is a project, a feature or a run of its own, seeded to that size, then given one
block of appends, one at a time from the load core; CPU is the pinned server's, from /proc.
"""

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import httpx
from sqlalchemy import create_engine

from tests.bench import documents
from tests.bench.scaling import Seeder, project_id
from tests.bench.servers import BenchDatabase, Server, cpu_seconds

FLAT_LIMIT = 1.2
TIMESTAMP = "2024-01-15T10:00:00+00:00"


def levels(top: int, count: int) -> list[int]:
    """``count`` sizes from empty to ``top``, evenly spaced."""
    return [round(top * step / (count - 1)) for step in range(count)]


def _decision_without_id() -> dict[str, Any]:
    decision: dict[str, Any] = json.loads(documents.decision_body())
    del decision["id"]
    return decision


def _block(
    client: httpx.Client, server: Server, size: int, send: Callable[[int], httpx.Response]
) -> dict[str, Any]:
    """``size`` appends one after another: the server's CPU ms per append, wall p50."""
    walls = []
    cpu = cpu_seconds(server.pid)
    for number in range(size):
        started = time.perf_counter()
        response = send(number)
        walls.append(time.perf_counter() - started)
        response.raise_for_status()
    return {
        "cpu_ms": round((cpu_seconds(server.pid) - cpu) / size * 1000, 2),
        "p50_ms": round(statistics.median(walls) * 1000, 2),
    }


def _decisions(
    client: httpx.Client, server: Server, database: BenchDatabase, held: int, block: int
) -> dict[str, Any]:
    project = f"growth-decisions-{held}"
    memory = f"/v1/projects/{project}/memory"
    # The project, by a write of another kind (the seeded decisions take positions from 0).
    constraint = documents.memory_item_document("constraint", 0)
    client.post(f"{memory}/constraints", json=constraint).raise_for_status()
    engine = create_engine(database.url)
    try:
        Seeder(engine, project_id(engine, project)).grow_items_to("decision", held)
    finally:
        engine.dispose()
    body = _decision_without_id()
    return _block(client, server, block, lambda _n: client.post(f"{memory}/decisions", json=body))


def _handovers(
    client: httpx.Client, server: Server, template: dict[str, Any], held: int, block: int
) -> dict[str, Any]:
    feature = f"/v1/projects/growth-handovers/features/f{held}"
    note = json.loads(documents.handover_body()) | {"timestamp": TIMESTAMP}
    context = template | {"feature_id": f"f{held}", "handover_notes": {"history": [note] * held}}
    client.put(f"{feature}/context", json=context).raise_for_status()
    body = documents.handover_body()
    headers = {"content-type": "application/json"}
    return _block(
        client,
        server,
        block,
        lambda _n: client.post(f"{feature}/handovers", content=body, headers=headers),
    )


def _iteration_starts(
    client: httpx.Client, server: Server, held: int, block: int
) -> dict[str, Any]:
    run = f"/v1/projects/growth-runs/runs/r{held}"
    at = "2024-01-15T10:00:00Z"
    beads = {
        f"bead-{number}": {
            "id": f"bead-{number}",
            "status": "completed",
            "attempts": 1,
            "last_attempt": at,
        }
        for number in range(held)
    }
    state = {
        "version": 2,
        "status": "",
        "iteration": held,
        "current_bead": "",
        "history": beads,
        "total_cost": 0,
        "total_turns": 0,
        "updated_at": at,
        "stalled_at": "0001-01-01T00:00:00Z",
    }
    client.put(f"{run}/state", json=state).raise_for_status()
    return _block(
        client,
        server,
        block,
        lambda n: client.post(f"{run}/iterations", json={"bead_id": f"bead-{held + n}"}),
    )


def _feature_template(client: httpx.Client) -> dict[str, Any]:
    """A context as the service makes it, to seed the features from."""
    features = "/v1/projects/growth-handovers/features"
    client.post(features, json={"feature_id": "template"}).raise_for_status()
    template: dict[str, Any] = client.get(f"{features}/template/context").json()
    return template


def run(
    backend: str,
    server: Server,
    database: BenchDatabase,
    *,
    items: int,
    notes: int,
    count: int,
    block: int,
) -> list[dict[str, Any]]:
    headers = {"authorization": f"Bearer {database.key}"}
    rows: list[dict[str, Any]] = []
    with httpx.Client(base_url=server.url, headers=headers, timeout=600) as client:
        template = _feature_template(client)
        series: dict[str, tuple[int, Callable[[int], dict[str, Any]]]] = {
            "decision POST without id": (
                items,
                lambda held: _decisions(client, server, database, held, block),
            ),
            "handover POST, one feature": (
                notes,
                lambda held: _handovers(client, server, template, held, block),
            ),
            "iteration start, one run": (
                notes,
                lambda held: _iteration_starts(client, server, held, block),
            ),
        }
        for name, (top, measure) in series.items():
            first: dict[str, Any] | None = None
            for held in levels(top, count):
                started = time.perf_counter()
                measured = measure(held)
                first = first or measured
                ratio = measured["cpu_ms"] / max(first["cpu_ms"], 0.01)
                rows.append(
                    {
                        "backend": backend,
                        "series": name,
                        "held": held,
                        "block": block,
                        **measured,
                        "ratio": round(ratio, 2),
                        "seconds": round(time.perf_counter() - started, 1),
                    }
                )
            rows[-1]["met"] = rows[-1]["ratio"] <= FLAT_LIMIT
            print(f"[{backend}] growth: {name} last/first {rows[-1]['ratio']}", flush=True)
    return rows
