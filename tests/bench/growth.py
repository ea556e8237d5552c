"""Growth series (issue 20): the server's CPU time per append, block by block, as what the
append goes into grows. An append should cost the same at any size: flat means the last block
at most 1.2x the first.

- decisions POSTed without an ``id`` into a project holding 0 ... ``items`` decisions (seeded
  straight into the table, as the scaling part does);
- handovers POSTed into one feature whose ``context.json`` holds 0 ... ``notes`` notes;
- iteration starts, each of a new bead, on one run whose ``state.json`` holds 0 ... ``notes``
  beads (both seeded with one PUT of the document).

Each level is a project, a feature or a run of its own, seeded to that size; then each level
is given its block of appends, one at a time from the load core, in ``ROUNDS`` parts with the
levels taken in turn; CPU is the pinned server's, from /proc. In turn, because this project's
VMs change speed by a quarter within a minute: a level's whole block sent after another's
measured the machine's drift as growth (a series 1.74x at one run, 1.08x at the next, on the
same code, 2026-11-26); in parts taken in turn, every level sees the same drift.
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
ROUNDS = 5

Send = Callable[[int], httpx.Response]
TIMESTAMP = "2024-01-15T10:00:00+00:00"


def levels(top: int, count: int) -> list[int]:
    """``count`` sizes from empty to ``top``, evenly spaced."""
    return [round(top * step / (count - 1)) for step in range(count)]


def _decision_without_id() -> dict[str, Any]:
    decision: dict[str, Any] = json.loads(documents.decision_body())
    del decision["id"]
    return decision


def _in_turn(server: Server, senders: dict[int, Send], block: int) -> dict[int, dict[str, Any]]:
    """Each level's ``block`` appends (``send(number)``, numbers from 0), one after another, in
    ``ROUNDS`` parts with the levels in turn: the server's CPU ms per append and the wall p50,
    by level."""
    part = block // ROUNDS
    cpu = dict.fromkeys(senders, 0.0)
    walls: dict[int, list[float]] = {held: [] for held in senders}
    for round_number in range(ROUNDS):
        for held, send in senders.items():
            before = cpu_seconds(server.pid)
            for number in range(round_number * part, (round_number + 1) * part):
                started = time.perf_counter()
                response = send(number)
                walls[held].append(time.perf_counter() - started)
                response.raise_for_status()
            cpu[held] += cpu_seconds(server.pid) - before
    return {
        held: {
            "cpu_ms": round(cpu[held] / (part * ROUNDS) * 1000, 2),
            "p50_ms": round(statistics.median(walls[held]) * 1000, 2),
        }
        for held in senders
    }


def _decisions(client: httpx.Client, database: BenchDatabase, held: int) -> Send:
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
    return lambda _n: client.post(f"{memory}/decisions", json=body)


def _handovers(client: httpx.Client, template: dict[str, Any], held: int) -> Send:
    feature = f"/v1/projects/growth-handovers/features/f{held}"
    note = json.loads(documents.handover_body()) | {"timestamp": TIMESTAMP}
    context = template | {"feature_id": f"f{held}", "handover_notes": {"history": [note] * held}}
    client.put(f"{feature}/context", json=context).raise_for_status()
    body = documents.handover_body()
    headers = {"content-type": "application/json"}
    return lambda _n: client.post(f"{feature}/handovers", content=body, headers=headers)


def _iteration_starts(client: httpx.Client, held: int) -> Send:
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
    return lambda n: client.post(f"{run}/iterations", json={"bead_id": f"bead-{held + n}"})


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
        series: dict[str, tuple[int, Callable[[int], Send]]] = {
            "decision POST without id": (items, lambda held: _decisions(client, database, held)),
            "handover POST, one feature": (
                notes,
                lambda held: _handovers(client, template, held),
            ),
            "iteration start, one run": (notes, lambda held: _iteration_starts(client, held)),
        }
        for name, (top, prepare) in series.items():
            senders: dict[int, Send] = {}
            seeding: dict[int, float] = {}
            for held in levels(top, count):
                started = time.perf_counter()
                senders[held] = prepare(held)
                seeding[held] = time.perf_counter() - started
            server.wait_until_idle()  # the seeds' leftovers (a checkpoint) are not measured
            measured = _in_turn(server, senders, block)
            first = measured[min(measured)]
            for held, figures in measured.items():
                ratio = figures["cpu_ms"] / max(first["cpu_ms"], 0.01)
                rows.append(
                    {
                        "backend": backend,
                        "series": name,
                        "held": held,
                        "block": block,
                        **figures,
                        "ratio": round(ratio, 2),
                        "seconds": round(seeding[held], 1),
                    }
                )
            rows[-1]["met"] = rows[-1]["ratio"] <= FLAT_LIMIT
            print(f"[{backend}] growth: {name} last/first {rows[-1]['ratio']}", flush=True)
    return rows
