"""Load generators: a closed-loop pass for the most a server can do, and an open-loop pass at
a fixed rate for the latency a client sees.

Closed loop (``wrk`` when installed, an httpx asyncio driver otherwise): a fixed number of
connections, each sending its next request when the previous answer arrives; gives req/s.
Closed-loop latencies hide queueing (a slow answer delays the requests behind it instead of
making them wait), so p50/p99 come from the open loop: requests are sent on a fixed schedule
whatever the answers do, and each latency counts from when its request was due.

The open loop is only as punctual as the generator: how late it sent each request is measured
and reported beside the latencies, and its own garbage collector, the one stall it had, is paused
during a pass. It writes its requests and reads the answers on asyncio's streams, not through
httpx: at 500-640 requests a second httpx took the generator's whole core, and once a few
requests had queued its pool's work grew until the generator sent late and read answers late,
seconds late, while the server idled at 10-50% of its core (2026-11-27: the server's and the
generator's CPU sampled every 100 ms through such passes). A stream costs a request a small
part of that.
"""

import asyncio
import gc
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson

WRK_SCRIPT = Path(__file__).with_name("wrk.lua")
# The open loop's connections opened before a pass, as many as the closed loop's.
OPEN_LOOP_CONNECTIONS = 32
# An answer not read whole within this is an error (httpx's timeout in the open loop before).
OPEN_LOOP_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class Call:
    """One kind of request; ``{n}`` in the body becomes a value unique to each request."""

    method: str
    paths: tuple[str, ...]
    body: str
    key: str

    def path_for(self, number: int) -> str:
        """Requests go round the paths (several features or runs share the load)."""
        return self.paths[number % len(self.paths)]

    def body_for(self, unique: str) -> bytes:
        return self.body.replace("{n}", unique).encode()

    def headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept-encoding": "identity"}
        if self.key:
            headers["authorization"] = f"Bearer {self.key}"
        return headers


@dataclass(frozen=True)
class Throughput:
    rps: float
    requests: int
    errors: int
    tool: str


@dataclass(frozen=True)
class Latency:
    rate: float
    p50_ms: float
    p99_ms: float
    # The generator's own lateness: the most any request left after it was due (what this
    # process, not the server, added to the latencies).
    sent_late_max_ms: float
    requests: int
    errors: int


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def closed_loop(base_url: str, call: Call, seconds: float, connections: int = 32) -> Throughput:
    if shutil.which("wrk"):
        return _wrk(base_url, call, seconds, connections)
    return asyncio.run(_httpx_closed_loop(base_url, call, seconds, connections))


def _wrk(base_url: str, call: Call, seconds: float, connections: int) -> Throughput:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as body_file:
        body_file.write(call.body)
    env = {
        **os.environ,
        "WRK_METHOD": call.method,
        "WRK_KEY": call.key,
        "WRK_RUN": secrets.token_hex(4),
        "WRK_BODY_FILE": body_file.name,
        "WRK_PATHS": " ".join(call.paths),
    }
    command = ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--timeout", "10s"]
    command += ["-s", str(WRK_SCRIPT), base_url + call.paths[0]]
    try:
        output = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    finally:
        os.unlink(body_file.name)
    line = next(ln for ln in output.stdout.splitlines() if ln.startswith("BENCH_JSON "))
    result = orjson.loads(line.removeprefix("BENCH_JSON "))
    seconds_taken = result["duration_us"] / 1e6
    return Throughput(
        rps=result["requests"] / seconds_taken,
        requests=result["requests"],
        errors=result["status_errors"] + result["socket_errors"],
        tool="wrk",
    )


def limits(connections: int) -> httpx.Limits:
    # An idle connection is dropped well before uvicorn's keep-alive timeout (5 s, httpx's own
    # default too): reusing one the server is closing at that moment is a spurious error.
    return httpx.Limits(
        max_connections=connections, max_keepalive_connections=connections, keepalive_expiry=1
    )


def _client(connections: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(limits=limits(connections), timeout=30)


async def _httpx_closed_loop(
    base_url: str, call: Call, seconds: float, connections: int
) -> Throughput:
    run = secrets.token_hex(4)
    counts = {"done": 0, "errors": 0}
    headers = call.headers()
    async with _client(connections) as client:
        deadline = time.perf_counter() + seconds

        async def worker(number: int) -> None:
            sent = 0
            while time.perf_counter() < deadline:
                sent += 1
                body = call.body_for(f"{run}-{number}-{sent}")
                response = await client.request(
                    call.method, base_url + call.path_for(sent), content=body, headers=headers
                )
                counts["done"] += 1
                counts["errors"] += response.status_code >= 400

        started = time.perf_counter()
        await asyncio.gather(*(worker(n) for n in range(connections)))
        elapsed = time.perf_counter() - started
    return Throughput(counts["done"] / elapsed, counts["done"], counts["errors"], "httpx")


def open_loop(base_url: str, call: Call, rate: float, seconds: float) -> Latency:
    # This process holds the app's modules (about 200,000 objects, for the databases and keys
    # it sets up), and a full collection of them took 75-163 ms: the event loop sent nothing
    # meanwhile, then a burst, and the open loop counted the delay as the server's (the p99 of
    # 50-115 ms seen on the bare ceiling). A pass makes little cyclic garbage: collected before
    # it and not during it, the schedule holds.
    gc.collect()
    gc.disable()
    try:
        return asyncio.run(_open_loop(base_url, call, rate, seconds))
    finally:
        gc.enable()


class _Connections:
    """Keep-alive HTTP/1.1 connections to one server, each carrying one request at a time:
    ``OPEN_LOOP_CONNECTIONS`` opened before a pass, another opened whenever a request is due
    and none is free (as a client with a pool would, without a limit of its own)."""

    def __init__(self, base_url: str) -> None:
        address = httpx.URL(base_url)
        self.host, self.port = address.host, address.port or 80
        self.authority = f"{self.host}:{self.port}".encode()
        # In turn (the longest idle first), so that none idles past the server's keep-alive.
        self.idle: deque[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = deque()

    async def open(self, count: int) -> None:
        for _ in range(count):
            self.idle.append(await asyncio.open_connection(self.host, self.port))

    async def request(self, method: str, path: str, headers: bytes, body: bytes) -> int:
        """The answer's status, once its whole body has been read."""
        reader, writer = await self._free()
        keep = False
        try:
            head = b"%s %s HTTP/1.1\r\nhost: %s\r\ncontent-length: %d\r\n" % (
                method.encode(),
                path.encode(),
                self.authority,
                len(body),
            )
            writer.write(head + headers + b"\r\n" + body)
            status, keep = await _read_response(reader, method)
            return status
        finally:
            if keep:
                self.idle.append((reader, writer))
            else:
                writer.close()

    async def _free(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """An idle connection the server has not closed meanwhile, or a new one."""
        while self.idle:
            reader, writer = self.idle.popleft()
            if not reader.at_eof() and not writer.is_closing():
                return reader, writer
            writer.close()
        return await asyncio.open_connection(self.host, self.port)

    def close(self) -> None:
        for _reader, writer in self.idle:
            writer.close()


async def _read_response(reader: asyncio.StreamReader, method: str) -> tuple[int, bool]:
    """(status, whether the connection may carry another request) of one HTTP/1.1 answer
    (RFC 9112 6.3: no body after HEAD, a 1xx, 204 or 304; chunked before Content-Length)."""
    status = 100
    while 100 <= status < 200:
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
    fields = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip().lower()
    keep = fields.get("connection") != "close"
    if method == "HEAD" or status in (204, 304):
        return status, keep
    if fields.get("transfer-encoding", "").endswith("chunked"):
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            await reader.readexactly(size + 2)
        while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, then the end
            pass
    elif "content-length" in fields:
        await reader.readexactly(int(fields["content-length"]))
    else:
        await reader.read()
        return status, False
    return status, keep


async def _open_loop(base_url: str, call: Call, rate: float, seconds: float) -> Latency:
    run = secrets.token_hex(4)
    headers = b"".join(f"{name}: {value}\r\n".encode() for name, value in call.headers().items())
    latencies: list[float] = []
    sent_late: list[float] = []
    errors = 0
    total = max(1, int(rate * seconds))
    connections = _Connections(base_url)
    await connections.open(OPEN_LOOP_CONNECTIONS)
    try:
        loop = asyncio.get_running_loop()
        start = loop.time() + 0.05

        async def one(number: int, due: float) -> None:
            nonlocal errors
            sent_late.append(loop.time() - due)
            exchange = connections.request(
                call.method, call.path_for(number), headers, call.body_for(f"{run}-{number}")
            )
            try:
                status = await asyncio.wait_for(exchange, OPEN_LOOP_TIMEOUT_SECONDS)
                errors += status >= 400
            except (
                OSError,  # TimeoutError among them
                asyncio.IncompleteReadError,
                asyncio.LimitOverrunError,
                ValueError,
                IndexError,
            ):
                errors += 1
            latencies.append(loop.time() - due)

        tasks = []
        for number in range(total):
            due = start + number / rate
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(number, due)))
        await asyncio.gather(*tasks)
    finally:
        connections.close()
    return Latency(
        rate=rate,
        p50_ms=percentile(latencies, 0.50) * 1000,
        p99_ms=percentile(latencies, 0.99) * 1000,
        sent_late_max_ms=max(sent_late) * 1000,
        requests=total,
        errors=errors,
    )
