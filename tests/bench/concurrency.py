"""Run state under concurrent iteration starts: throughput, and proof that none was lost."""

import asyncio
import time
from typing import Any

import httpx
import orjson

from tests.bench.load import limits
from tests.bench.servers import Server

CONCURRENCY = 64
ROUNDS = 10
BEADS = 8


async def _storm(server: Server, key: str, run: str) -> dict[str, Any]:
    path = f"/v1/projects/bench-storm/runs/{run}"
    headers = {"authorization": f"Bearer {key}"}
    iterations: list[int] = []
    failures: dict[int, int] = {}
    async with httpx.AsyncClient(
        base_url=server.url, headers=headers, limits=limits(CONCURRENCY), timeout=120
    ) as client:

        async def start(number: int) -> None:
            body = {"bead_id": f"bead-{number % BEADS}"}
            try:
                response = await client.post(f"{path}/iterations", json=body)
            except httpx.TransportError:
                # Whether it was applied is unknown: the check below allows for it.
                failures[0] = failures.get(0, 0) + 1
                return
            if response.status_code == 200:
                iterations.append(response.json()["state"]["iteration"])
            else:
                failures[response.status_code] = failures.get(response.status_code, 0) + 1

        started = time.perf_counter()
        for round_number in range(ROUNDS):
            numbers = range(round_number * CONCURRENCY, (round_number + 1) * CONCURRENCY)
            await asyncio.gather(*(start(number) for number in numbers))
        elapsed = time.perf_counter() - started
        state = orjson.loads((await client.get(f"{path}/state")).content)
    attempts = sum(entry["attempts"] for entry in state["history"].values())
    succeeded = len(iterations)
    unknown = failures.get(0, 0)
    # Every acknowledged start is in the state exactly once (and a start whose answer never
    # arrived at most once): distinct iterations, attempts adding up to the iteration count.
    lost = max(0, succeeded - state["iteration"])
    intact = (
        len(set(iterations)) == succeeded
        and succeeded <= state["iteration"] <= succeeded + unknown
        and attempts == state["iteration"]
        and (unknown > 0 or sorted(iterations) == list(range(1, succeeded + 1)))
    )
    return {
        "starts": CONCURRENCY * ROUNDS,
        "concurrency": CONCURRENCY,
        "succeeded": succeeded,
        "failed": failures,
        "starts_per_s": round(succeeded / elapsed),
        "lost_updates": lost,
        "consistent": intact and lost == 0,
    }


def run(backend: str, server: Server, key: str) -> dict[str, Any]:
    result = asyncio.run(_storm(server, key, "storm"))
    return {"backend": backend, **result, "met": result["consistent"] and not result["failed"]}
