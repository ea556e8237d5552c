"""Where a small append's CPU goes (issue 18), in a process of its own on the server's core,
the app called in process (no HTTP, no server): a request that only 404s (the framework's
floor: middleware, routing, the problem answer); a decision POST, whole; the same POST's
write alone (``Writes.run``, in its worker thread: session, statements, service, commit); and
the very statements that write ran, captured from the driver and replayed on the raw driver
(``sqlite3`` / ``psycopg``) with a commit each: the database's own floor, beneath SQLAlchemy,
the service and the framework. Every request is logged as the server logs it (a JSON line on
stderr, which the caller reads past). The statements are captured from a real request, never
written out here, so the floor follows the code.

    python -m tests.bench.floor DATABASE_URL KEY REQUESTS

prints one JSON line: microseconds of CPU per request for each.

Beside them, when valgrind is installed, the decision POST's instructions, counted by
callgrind: ``python -m tests.bench.floor --instructions DATABASE_URL KEY COUNT`` under
``valgrind --tool=callgrind --instr-atstart=no`` switches the count on after its warm-up, sends
COUNT POSTs and switches it off; the difference between COUNT and twice COUNT, over COUNT, is a
POST's, start-up cancelled out, SQLite's checkpoint thread stopped meanwhile. Unlike CPU time,
it repeats to about 0.5% on a machine whose speed moves between runs (this project's VMs: 30%
between runs of the same code, 2026-11-25); SQLite's count less steadily (two counts of one
code 5% apart on 2026-11-27, for a cause not yet found: README, "Measured and not kept").
"""

import asyncio
import gc
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
from sqlalchemy import Engine, event
from sqlalchemy.engine import make_url

from app.core.config import Settings
from app.core.logs import configure_logging
from app.main import create_app
from app.storage import route
from tests.bench import documents
from tests.bench.servers import ROOT, BenchDatabase, Cores
from tests.helpers import http_scope

REQUESTS = 3000
WARM_UP = 200
# Under callgrind a POST runs some 50 times slower: fewer of them, the same warm-up.
COUNTED = 200
_COLLECTED = re.compile(r"Collected : (\d+)")
PROJECT = "floor"
DECISIONS = f"/v1/projects/{PROJECT}/memory/decisions"
NOT_FOUND = "/v1/nothing-here"
# The decision body's id is ``dec-{n}``: the request captured is sent with this marker as its
# number, and each replay puts a number of the same length in its place wherever the driver's
# parameters hold it (the id, the search text, the stored document).
MARKER = "cap00000"

Statement = tuple[str, Any]


class AsgiCaller:
    """Requests sent to the ASGI app directly, as the bench's key."""

    def __init__(self, app: Any, key: str) -> None:
        self.app = app
        self.headers = [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/json"),
            (b"authorization", f"Bearer {key}".encode()),
        ]

    async def post(self, path: str, body: bytes) -> int:
        messages = [{"type": "http.request", "body": body, "more_body": False}]
        statuses: list[int] = []

        async def receive() -> dict[str, Any]:
            return messages.pop(0) if messages else {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        headers = [*self.headers, (b"content-length", str(len(body)).encode())]
        scope = http_scope("POST", path, headers)
        await self.app(scope, receive, send)
        return statuses[0]


def _decision(number: str) -> bytes:
    return documents.decision_body().replace("{n}", number).encode()


async def _cpu_per_request(send: Callable[[int], Any], count: int, status: int) -> float:
    """Microseconds of this process's CPU per request (every thread: the worker's too); every
    request must have answered ``status``, or another answer was measured."""
    answered = []
    started = time.process_time()
    for number in range(count):
        answered.append(await send(number))
    spent = (time.process_time() - started) / count * 1e6
    assert set(answered) == {status}, f"expected {status} only, got {set(answered)}"
    return spent


@contextmanager
def _write_cpu() -> Iterator[list[float]]:
    """The CPU time of each ``Writes.run``, in the thread that runs it."""
    spent: list[float] = []
    original = route.Writes.run

    def timed(self: route.Writes, *args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return original(self, *args, **kwargs)
        finally:
            spent.append(time.thread_time() - started)

    route.Writes.run = timed  # type: ignore[method-assign]  # measured here only, restored below
    try:
        yield spent
    finally:
        route.Writes.run = original  # type: ignore[method-assign]


@contextmanager
def _captured(engine: Engine) -> Iterator[list[Statement]]:
    """The statements and parameters the driver is given while the block runs."""
    statements: list[Statement] = []

    def capture(_c: Any, _cursor: Any, statement: str, parameters: Any, *_args: Any) -> None:
        statements.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", capture)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", capture)


def _numbered(value: Any, number: str) -> Any:
    if isinstance(value, str):
        return value.replace(MARKER, number)
    if isinstance(value, bytes | memoryview):
        return bytes(value).replace(MARKER.encode(), number.encode())
    return value


def _parameters(parameters: Any, number: str) -> Any:
    if isinstance(parameters, dict):
        return {name: _numbered(value, number) for name, value in parameters.items()}
    return tuple(_numbered(value, number) for value in parameters)


def _replay(url: str, statements: list[Statement], count: int) -> float:
    """Microseconds of CPU per replay of ``statements`` and a commit, on the raw driver."""
    address = make_url(url)
    if address.get_backend_name() == "sqlite":
        # Autocommit mode, and BEGIN IMMEDIATE sent first, as the app's writer sends it (its
        # dialect's begin, which no statement listener sees).
        connection: Any = sqlite3.connect(address.database or "", isolation_level=None)
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON"):
            connection.execute(f"PRAGMA {pragma}")
        begin: Callable[[], Any] = lambda: connection.execute("BEGIN IMMEDIATE")  # noqa: E731
        commit: Callable[[], Any] = lambda: connection.execute("COMMIT")  # noqa: E731
    else:
        dsn = address.set(drivername="postgresql").render_as_string(hide_password=False)
        connection = psycopg.connect(dsn)
        begin = lambda: None  # noqa: E731  # psycopg begins with the first statement
        commit = connection.commit
    try:

        def once(index: int) -> None:
            number = f"rp{index:06d}"
            begin()
            cursor = connection.cursor()
            for statement, parameters in statements:
                cursor.execute(statement, _parameters(parameters, number))
                if cursor.description is not None:
                    cursor.fetchall()
            commit()

        for index in range(WARM_UP):
            once(index)
        started = time.process_time()
        for index in range(WARM_UP, WARM_UP + count):
            once(index)
        return (time.process_time() - started) / count * 1e6
    finally:
        connection.close()


@asynccontextmanager
async def _warm_app(url: str, key: str, run: str) -> AsyncIterator[tuple[Any, AsgiCaller]]:
    """The app, started, after ``WARM_UP`` decision POSTs and 404s: what is measured next
    finds its caches filled and its database file grown. ``run`` makes the warm-up's ids its
    own: the processes measuring one database each send theirs."""
    # Logged as ``serve`` logs, a JSON line on stderr for every request: the line cost a
    # decision POST 64,000-143,000 instructions (2026-11-26), which a floor without it missed.
    configure_logging()
    app = create_app(Settings(database_url=url))
    caller = AsgiCaller(app, key)
    async with app.router.lifespan_context(app):
        for number in range(WARM_UP):
            await caller.post(DECISIONS, _decision(f"w{run}{number}"))
            await caller.post(NOT_FOUND, b"{}")
        yield app, caller


async def _measure(url: str, key: str, count: int) -> dict[str, float]:
    async with _warm_app(url, key, "") as (app, caller):
        not_found = await _cpu_per_request(lambda _n: caller.post(NOT_FOUND, b"{}"), count, 404)
        with _write_cpu() as writes:
            append = await _cpu_per_request(
                lambda n: caller.post(DECISIONS, _decision(str(n))), count, 201
            )
        engine: Engine = app.state.database.writer
        with _captured(engine) as statements:
            status = await caller.post(DECISIONS, _decision(MARKER))
        assert status == 201, f"the captured decision POST answered {status}"
    return {
        "not_found_us": round(not_found),
        "append_us": round(append),
        "write_us": round(sum(writes) / len(writes) * 1e6),
        "statements": len(statements),
        "driver_us": round(_replay(url, statements, count)),
    }


async def _counted_posts(url: str, key: str, count: int) -> None:
    """``count`` decision POSTs with callgrind counting, after a warm-up it does not count;
    every one must have answered 201, or another answer was counted."""
    # Ids of this run's own: the floor's measure and the other count have sent theirs to the
    # same project (a repeated id is a 409, cheaper than the append counted here).
    run = f"i{count}-"
    async with _warm_app(url, key, run) as (app, caller):
        # SQLite's checkpoint thread stopped: callgrind counts every thread, and the thread's
        # checkpoints fall where its polls do, which under valgrind is a different number of
        # POSTs each run (the same code's count moved by 7%, 2026-11-26; PostgreSQL's, with no
        # such thread, by 0.4%). Within 600 POSTs the writer's own backstop never checkpoints.
        checkpoints = app.state.database.checkpoints
        if checkpoints is not None:
            checkpoints.stop()
        gc.collect()
        gc.freeze()  # as ``serve`` does: no full collection walks the built app mid-count
        answered = []
        _count_instructions("on")
        for number in range(count):
            answered.append(await caller.post(DECISIONS, _decision(f"{run}{number}")))
        _count_instructions("off")
    assert set(answered) == {201}, f"expected 201 only, got {set(answered)}"


def _count_instructions(switch: str) -> None:
    command = ["callgrind_control", "-i", switch, str(os.getpid())]
    subprocess.run(command, check=True, capture_output=True)


def _instructions(url: str, key: str, cores: Cores) -> int | None:
    """Instructions per decision POST, in process (None without valgrind)."""
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        return None
    collected = []
    for count in (COUNTED, 2 * COUNTED):
        command = [*cores.server_prefix(), "valgrind", "--tool=callgrind", "--instr-atstart=no"]
        command += ["--callgrind-out-file=/dev/null", sys.executable, "-m", "tests.bench.floor"]
        command += ["--instructions", url, key, str(count)]
        # The same hash seed in both runs: dict and set layouts, and so the work, repeat.
        environment = {**os.environ, "PYTHONHASHSEED": "0"}
        output = subprocess.run(
            command, cwd=ROOT, capture_output=True, text=True, check=True, env=environment
        )
        found = _COLLECTED.search(output.stderr)
        assert found is not None, f"callgrind counted nothing: {output.stderr[-500:]}"
        collected.append(int(found.group(1)))
    return (collected[1] - collected[0]) // COUNTED


def run(backend: str, database: BenchDatabase, cores: Cores) -> dict[str, Any]:
    """This module in a process of its own on the server's core, on the run's database."""
    command = [*cores.server_prefix(), sys.executable, "-m", "tests.bench.floor"]
    command += [database.url, database.key, str(REQUESTS)]
    output = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    figures = json.loads(output.stdout.strip().splitlines()[-1])
    instructions = _instructions(database.url, database.key, cores)
    return {"backend": backend, **figures, "instructions": instructions}


if __name__ == "__main__":
    if sys.argv[1] == "--instructions":
        asyncio.run(_counted_posts(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    else:
        figures = asyncio.run(_measure(sys.argv[1], sys.argv[2], int(sys.argv[3])))
        print(json.dumps(figures))
