"""Small appends against the framework ceiling: req/s (closed loop) and p50/p99 at a fixed rate
(open loop), each next to the ceiling measured right before it in the same run; and the server's
CPU time per request against the ceiling's, the ratio a busy machine disturbs least."""

from typing import Any

import httpx

from tests.bench import documents
from tests.bench.load import Call, Throughput, closed_loop, open_loop
from tests.bench.servers import Server, cpu_seconds

PROJECT = "bench"
# Several features and runs share the load, as many agents would: one feature's context is
# rewritten by each of its handovers, so a single feature would measure a growing document.
FEATURES = tuple(f"f{number:03d}" for number in range(100))
RUNS = tuple(f"run{number:02d}" for number in range(16))
# A cap on what the open-loop client's one core is asked: on asyncio streams it kept its
# schedule to within 10 ms at up to 652 requests a second (2026-11-27).
MAX_OPEN_LOOP_RATE = 800.0
TARGET_RATIO = 0.6


def calls(key: str) -> dict[str, Call]:
    base = f"/v1/projects/{PROJECT}"
    return {
        "decision POST": Call(
            "POST", (f"{base}/memory/decisions",), documents.decision_body(), key
        ),
        "handover POST": Call(
            "POST",
            tuple(f"{base}/features/{feature}/handovers" for feature in FEATURES),
            documents.handover_body(),
            key,
        ),
        "iteration start": Call(
            "POST",
            tuple(f"{base}/runs/{run}/iterations" for run in RUNS),
            documents.iteration_body("bead-1"),
            key,
        ),
    }


def prepare(server: Server, key: str) -> None:
    """The features the handovers go to."""
    headers = {"authorization": f"Bearer {key}"}
    with httpx.Client(base_url=server.url, headers=headers, timeout=30) as client:
        for feature in FEATURES:
            response = client.post(f"/v1/projects/{PROJECT}/features", json={"feature_id": feature})
            response.raise_for_status()


def _with_cpu(server: Server, call: Call, seconds: float) -> tuple[Throughput, float]:
    """A closed-loop pass, and the server's CPU seconds per request during it; returns once
    the server has finished what the pass left in flight."""
    before = cpu_seconds(server.pid)
    result = closed_loop(server.url, call, seconds)
    cpu = (cpu_seconds(server.pid) - before) / max(1, result.requests)
    server.wait_until_idle()
    return result, cpu


def run(
    backend: str, server: Server, ceiling: Server, key: str, seconds: float
) -> list[dict[str, Any]]:
    prepare(server, key)
    ceiling_call = Call("POST", ("/ceiling",), "{}", "")
    rows = []
    for name, call in calls(key).items():
        closed_loop(server.url, call, 1)  # warm-up: connections, caches, the planner
        server.wait_until_idle()
        top, top_cpu = _with_cpu(ceiling, ceiling_call, seconds)
        measured, cpu = _with_cpu(server, call, seconds)
        rate = min(MAX_OPEN_LOOP_RATE, round(measured.rps * 0.5))
        top_latency = open_loop(ceiling.url, ceiling_call, rate, seconds)
        latency = open_loop(server.url, call, rate, seconds)
        rows.append(
            {
                "backend": backend,
                "endpoint": name,
                "rps": round(measured.rps),
                "ceiling_rps": round(top.rps),
                "ratio": round(measured.rps / top.rps, 3),
                "target": TARGET_RATIO,
                "met": measured.rps / top.rps >= TARGET_RATIO,
                "rate": rate,
                "p50_ms": round(latency.p50_ms, 2),
                "p99_ms": round(latency.p99_ms, 2),
                "ceiling_p50_ms": round(top_latency.p50_ms, 2),
                "ceiling_p99_ms": round(top_latency.p99_ms, 2),
                "sent_late_max_ms": round(
                    max(latency.sent_late_max_ms, top_latency.sent_late_max_ms), 2
                ),
                "cpu_ms": round(cpu * 1000, 3),
                "ceiling_cpu_ms": round(top_cpu * 1000, 3),
                "cpu_ratio": round(top_cpu / cpu, 3),
                "errors": measured.errors + latency.errors,
                "tool": measured.tool,
            }
        )
    return rows
