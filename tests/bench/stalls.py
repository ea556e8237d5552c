"""What one large call costs everybody else: ``/healthz`` asked every 10 ms by another client
while a large save goes in and out through each door, the REST routes and MCP's tools. The
REST route with the same save is the ceiling: a tool call costs the same parse, redaction
and write, and what it adds on top (the SDK's JSON-RPC, the tool's own encoding, the answer's
check for secrets) should keep the event loop no longer.

A call into C holds the interpreter's lock wherever it runs, so every large request holds the
loop for a while; the figure is how long the other client waited at most.
"""

import multiprocessing
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson

from tests.bench import documents
from tests.bench.servers import Server

SAVE_BYTES = 32 * 1024 * 1024
REPEATS = 3
PROBE_EVERY_SECONDS = 0.01
PROJECT = "bench-stalls"
MCP_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2025-06-18",
}


def _ask(url: str, stop: Any, waits: Any) -> None:
    """The probe's process: ``/healthz`` one request at a time, every 10 ms, until ``stop``;
    then its waits, or why it failed, go to ``waits``."""
    found: list[float] = []
    try:
        with httpx.Client(base_url=url, timeout=60) as client:
            while not stop.is_set():
                started = time.perf_counter()
                client.get("/healthz").raise_for_status()
                found.append(time.perf_counter() - started)
                stop.wait(PROBE_EVERY_SECONDS)
    except Exception as exc:  # reported to the part, which fails with it
        waits.put(repr(exc))
        return
    waits.put(found)


class _Probe:
    """Another client, in a process of its own: the bench's own work (receiving a large
    answer, parsing it) holds this process's interpreter lock, which a thread here would
    have counted as the server's stall."""

    def __init__(self, url: str) -> None:
        context = multiprocessing.get_context("spawn")
        self._stop = context.Event()
        self._waits: Any = context.Queue()
        self._process = context.Process(target=_ask, args=(url, self._stop, self._waits))
        self.waits: list[float] = []

    def __enter__(self) -> "_Probe":
        self._process.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        found = self._waits.get(timeout=120)
        self._process.join()
        if isinstance(found, str) or not found:
            raise RuntimeError(f"the probe failed: {found or 'no request answered'}")
        self.waits = found


def _tool_call(name: str, arguments: dict[str, Any]) -> bytes:
    call = {"name": name, "arguments": arguments}
    return orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})


def _answered_whole(response: httpx.Response) -> None:
    response.raise_for_status()
    if response.request.url.path == "/mcp":
        result = orjson.loads(response.content)["result"]
        assert not result.get("isError"), result["content"][0]["text"][:500]


def _measured(server: Server, call: Callable[[], httpx.Response]) -> dict[str, float]:
    """The median over ``REPEATS`` calls of the call's own time and of the longest the other
    client waited during it; the probe runs from half a second before each call to half a
    second after."""
    spans, longest, typical = [], [], []
    for _ in range(REPEATS):
        with _Probe(server.url) as probe:
            time.sleep(0.5)
            started = time.perf_counter()
            response = call()
            spans.append(time.perf_counter() - started)
            time.sleep(0.5)
        _answered_whole(response)  # after the probe: its parse is the bench's, not the server's
        longest.append(max(probe.waits))
        typical.append(statistics.median(probe.waits))
    return {
        "call_ms": round(statistics.median(spans) * 1e3),
        "longest_wait_ms": round(statistics.median(longest) * 1e3),
        "probe_p50_ms": round(statistics.median(typical) * 1e3, 1),
    }


def run(backend: str, server: Server, key: str, workdir: Path) -> list[dict[str, Any]]:
    path = workdir / f"stalls-save-{SAVE_BYTES}.json"
    if not path.exists():
        path.write_bytes(documents.mdan_save(SAVE_BYTES))
    raw = path.read_bytes()
    save = orjson.loads(raw)
    saves = f"/v1/projects/{PROJECT}/saves"
    with httpx.Client(
        base_url=server.url, headers={"authorization": f"Bearer {key}"}, timeout=300
    ) as client:

        def mcp(body: bytes) -> Callable[[], httpx.Response]:
            return lambda: client.post("/mcp", content=body, headers=MCP_HEADERS)

        doors: list[tuple[str, str, Callable[[], httpx.Response]]] = [
            (
                "import",
                "REST POST .../saves",
                lambda: client.post(
                    saves, content=raw, headers={"content-type": "application/json"}
                ),
            ),
            (
                "import",
                "MCP save_mdan_save",
                mcp(_tool_call("save_mdan_save", {"project": PROJECT, "save": save})),
            ),
            (
                "export",
                "REST GET .../saves/latest",
                lambda: client.get(f"{saves}/latest", headers={"accept-encoding": "identity"}),
            ),
            (
                "export",
                "MCP latest_mdan_save",
                mcp(_tool_call("latest_mdan_save", {"project": PROJECT})),
            ),
        ]
        measured = [(way, door, _measured(server, call)) for way, door, call in doors]
    rest = {way: figures for way, door, figures in measured if door.startswith("REST")}
    return [
        {
            "backend": backend,
            "save_mb": SAVE_BYTES // (1024 * 1024),
            "way": way,
            "door": door,
            **figures,
            "rest_longest_wait_ms": rest[way]["longest_wait_ms"],
            "ratio": round(figures["longest_wait_ms"] / max(1, rest[way]["longest_wait_ms"]), 2),
        }
        for way, door, figures in measured
    ]
