"""Where a write route runs (app/storage/route.py, app/core/write_turns.py), through HTTP
against the real app: a small write in its turn (SQLite's write thread; on PostgreSQL its
project's, in a worker thread), every other write in a worker thread; the turns' metrics, the
time limit of a wait for one, an error a write cannot pass back, and the write thread's end when
the database is disposed."""

import asyncio
import contextlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.core import db, write_turns
from app.core.migrations import upgrade
from app.main import create_app
from app.memory import service as memory_service
from app.saves import service as saves_service
from app.storage.route import SMALL_WRITE_BYTES
from tests.conftest import client_for, create_key, end_server_processes, make_settings
from tests.helpers import import_save, seed_save

WRITE_THREAD = "context-store-write"


def _decision(number: int, rationale: str = "Measured") -> dict[str, Any]:
    return {"id": f"dec-{number}", "decision": "Keep it", "rationale": rationale}


def _post_decision(client: TestClient, project: str, number: int, key: str | None = None) -> int:
    """The status of a decision's append, with ``key`` when given (else the client's)."""
    path = f"/v1/projects/{project}/memory/decisions"
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    return client.post(path, json=_decision(number), headers=headers).status_code


@pytest.fixture
def threads_seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[str]]]:
    """The name of the thread each decision append and each save's store ran in."""
    seen: dict[str, list[str]] = {"decision": [], "save": []}

    def spy(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            seen[name].append(threading.current_thread().name)
            return original(*args, **kwargs)

        return recorded

    monkeypatch.setattr(memory_service, "create_item", spy("decision", memory_service.create_item))
    monkeypatch.setattr(saves_service, "store_save", spy("save", saves_service.store_save))
    yield seen


def test_small_writes_run_in_their_turn_and_the_rest_in_worker_threads(
    client, project, threads_seen
):
    sqlite = client.app.state.database.write_turns.one_writer
    path = f"/v1/projects/{project}/memory/decisions"
    assert client.post(path, json=_decision(1)).status_code == 201
    # A body over the limit is parsed and redacted in a worker thread, outside the queue.
    large = _decision(2, rationale="x" * SMALL_WRITE_BYTES)
    assert client.post(path, json=large).status_code == 201
    assert import_save(client, project, seed_save()).status_code == 201
    in_write_thread = [name.startswith(WRITE_THREAD) for name in threads_seen["decision"]]
    assert in_write_thread == [sqlite, False]
    assert [name.startswith(WRITE_THREAD) for name in threads_seen["save"]] == [False]
    metrics = TestClient(client.app).get("/metrics").text
    assert "context_store_write_thread_busy" in metrics


def _sqlite_app(tmp_path: Path, **settings: Any) -> FastAPI:
    url = f"sqlite:///{tmp_path / 'writes.db'}"
    upgrade(url)
    return create_app(make_settings(url, **settings))


def _gauge(scraper: TestClient, name: str) -> float:
    text = scraper.get("/metrics").text
    found = re.search(rf"^{name} ([0-9.]+)$", text, re.MULTILINE)
    assert found is not None, f"{name} missing from the metrics"
    return float(found.group(1))


@pytest.fixture
def held_writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """Decision appends wait, inside their write, until the event is set."""
    release = threading.Event()
    original = memory_service.create_item

    def held(*args: Any, **kwargs: Any) -> Any:
        assert release.wait(30), "the test never released the write"
        return original(*args, **kwargs)

    monkeypatch.setattr(memory_service, "create_item", held)
    yield release
    release.set()


def _send(
    client: TestClient, key: str, project: str, number: int, into: list[int]
) -> threading.Thread:
    """A thread that posts a decision with ``key`` and adds its status to ``into``: through an
    entered client, so that every request runs on its one event loop, as under a server."""
    sender = threading.Thread(
        target=lambda: into.append(_post_decision(client, project, number, key))
    )
    sender.start()
    return sender


def _wait_for(scraper: TestClient, busy: int, waiting: int) -> None:
    deadline = time.monotonic() + 30
    while (
        _gauge(scraper, "context_store_write_thread_busy"),
        _gauge(scraper, "context_store_write_thread_waiting"),
    ) != (busy, waiting):
        assert time.monotonic() < deadline, f"never {busy} writes running and {waiting} waiting"
        time.sleep(0.02)


def _record_each_write(
    monkeypatch: pytest.MonkeyPatch, record: Callable[[Any, bytes], Any]
) -> None:
    """``record`` called with each decision append's write and body, as the write runs."""
    append = memory_service.create_item

    def recorded(write: Any, kind: Any, raw: bytes) -> Any:
        record(write, raw)
        return append(write, kind, raw)

    monkeypatch.setattr(memory_service, "create_item", recorded)


def _send_in_order(
    scraper: TestClient, key: str, project: str, numbers: list[int], into: list[int]
) -> list[threading.Thread]:
    """Decisions sent one at a time into ``project``, the first held in its write
    (``held_writes``), each next counted in the queue before the one after it is sent: the
    order they run in."""
    senders = [_send(scraper, key, project, numbers[0], into)]
    _wait_for(scraper, busy=1, waiting=0)
    for queued, number in enumerate(numbers[1:], start=1):
        senders.append(_send(scraper, key, project, number, into))
        _wait_for(scraper, busy=1, waiting=queued)
    return senders


def test_a_write_waits_for_its_projects_writes_on_postgresql_and_for_all_on_sqlite(
    database_url, tenant, held_writes
):
    """SQLite's writes all take turns (one writer); PostgreSQL's only within a project (each
    write holds its project's lock): a write to another project runs beside them."""
    app = create_app(make_settings(database_url))
    with TestClient(app) as scraper:
        key = create_key(app, tenant)
        answers: list[int] = []
        senders = [_send(scraper, key, "busy", n, answers) for n in (1, 2, 3)]
        senders.append(_send(scraper, key, "other", 4, answers))
        try:
            if app.state.database.write_turns.one_writer:
                _wait_for(scraper, busy=1, waiting=3)
            else:
                _wait_for(scraper, busy=2, waiting=2)
        finally:
            held_writes.set()
            for sender in senders:
                sender.join()
        assert answers == [201] * 4
        _wait_for(scraper, busy=0, waiting=0)


def test_writes_that_waited_for_their_turn_past_the_pool_timeout_are_refused(
    database_url, tenant, held_writes
):
    """On both databases: behind a write that takes longer than ``db_pool_timeout_seconds``,
    the writes of its project are refused with a 503 when their turn comes."""
    app = create_app(make_settings(database_url, db_pool_timeout_seconds=2.0))
    with TestClient(app) as scraper:
        key = create_key(app, tenant)
        answers: list[int] = []
        first = _send(scraper, key, "slow", 1, answers)
        _wait_for(scraper, busy=1, waiting=0)
        queued = [_send(scraper, key, "slow", n, answers) for n in (2, 3, 4)]
        _wait_for(scraper, busy=1, waiting=3)
        time.sleep(2.3)
        held_writes.set()
        for sender in (first, *queued):
            sender.join()
        assert sorted(answers) == [201, 503, 503, 503]


def test_a_turn_runs_its_writes_in_their_order_and_hands_its_thread_on(
    database_url, tenant, held_writes, monkeypatch
):
    """After ``TURN_WRITES`` writes a turn asks for a thread again, and loses none of its
    writes or their order."""
    monkeypatch.setattr(write_turns, "TURN_WRITES", 2)
    asked: list[int] = []
    ask_for_thread = write_turns.WriteTurns._ask_for_thread

    def counted(self: write_turns.WriteTurns, *args: Any) -> None:
        asked.append(len(asked))
        ask_for_thread(self, *args)

    monkeypatch.setattr(write_turns.WriteTurns, "_ask_for_thread", counted)
    written: list[bytes] = []
    _record_each_write(monkeypatch, lambda _write, raw: written.append(raw))
    app = create_app(make_settings(database_url))
    with TestClient(app) as scraper:
        key = create_key(app, tenant)
        answers: list[int] = []
        senders = _send_in_order(scraper, key, "ordered", list(range(1, 8)), answers)
        held_writes.set()
        for sender in senders:
            sender.join()
    assert answers == [201] * 7
    assert [json.loads(raw)["id"] for raw in written] == [f"dec-{n}" for n in range(1, 8)]
    # Writes 1-2, 3-4, 5-6, then 7: four threads asked for.
    assert len(asked) == 4


def test_a_turn_no_thread_took_fails_its_writes_and_the_next_write_starts_anew(
    database_url, tenant, monkeypatch
):
    """A thread that fails before it takes its turn (an executor shut down meanwhile, a thread
    that cannot start): its writes answer 500 rather than wait for ever, and the project's
    next write gets a turn of its own."""
    take_turn = write_turns.WriteTurns._take_turn
    failures = [RuntimeError("no thread")]

    def failing_once(self: write_turns.WriteTurns, *args: Any) -> None:
        if failures:
            raise failures.pop()
        take_turn(self, *args)

    monkeypatch.setattr(write_turns.WriteTurns, "_take_turn", failing_once)
    app = create_app(make_settings(database_url))
    with TestClient(app, raise_server_exceptions=False) as scraper:
        key = create_key(app, tenant)
        answers: list[int] = []
        for number in (1, 2):
            _send(scraper, key, "retried", number, answers).join(30)
        assert answers == [500, 201]
        _wait_for(scraper, busy=0, waiting=0)


def test_sqlite_writes_queued_behind_a_held_writer_are_refused_within_the_pool_timeout(tmp_path):
    """A write waits for the write thread at most ``db_pool_timeout_seconds``, then 503, as it
    would for the writer's connection: writes queued behind a held writer are refused together,
    not one pool timeout after another."""
    timeout = 1.0
    app = _sqlite_app(tmp_path, db_pool_timeout_seconds=timeout)
    with TestClient(app):
        client = client_for(app, create_key(app, "t-held-writer"))
        answers: list[int] = []
        senders = [
            threading.Thread(target=lambda n=n: answers.append(_post_decision(client, "h", n)))
            for n in range(4)
        ]
        turns = app.state.database.write_turns
        with app.state.database.writer.connect():  # the writer's one connection, held
            for sender in senders:
                sender.start()
            # Timed from when all four are in the turn: on a loaded machine the senders' requests
            # reached it up to a second apart (4.3 s in all, a CI run of 2026-11-27).
            deadline = time.monotonic() + 30
            while turns.busy + turns.waiting < len(senders) and not answers:
                assert time.monotonic() < deadline, "the writes never reached their turn"
                time.sleep(0.005)
            started = time.monotonic()
            for sender in senders:
                sender.join()
            took = time.monotonic() - started
    assert answers == [503] * 4
    # The first waits at most a timeout for the connection; one queued meanwhile may then wait
    # as long again; later ones are refused as their turn comes. One after another: 3-4 s.
    assert took < 3 * timeout, f"the queued writes took {took:.1f} s to be refused"


def test_a_write_that_raises_stop_iteration_answers_500(app, project, monkeypatch):
    """asyncio cannot pass StopIteration from a thread to the request: it would never end."""

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise StopIteration

    monkeypatch.setattr(memory_service, "create_item", broken)
    client = client_for(app, create_key(app, "t-stop"), raise_server_exceptions=False)
    answers: list[int] = []
    sender = threading.Thread(target=lambda: answers.append(_post_decision(client, project, 1)))
    sender.start()
    sender.join(30)
    assert not sender.is_alive(), "the request never ended"
    assert answers == [500]


def test_sqlite_dispose_waits_for_the_running_write(tmp_path, held_writes):
    app = _sqlite_app(tmp_path)
    with TestClient(app):
        client = client_for(app, create_key(app, "t-dispose"))
        answers: list[int] = []
        sender = threading.Thread(target=lambda: answers.append(_post_decision(client, "d", 1)))
        sender.start()
        database = app.state.database
        deadline = time.monotonic() + 30
        while database.write_turns.busy != 1:
            assert time.monotonic() < deadline, "the write never started"
            time.sleep(0.01)
        disposer = threading.Thread(target=database.dispose)
        disposer.start()
        disposer.join(0.5)
        assert disposer.is_alive(), "the database was disposed under a running write"
        held_writes.set()
        disposer.join(30)
        sender.join(30)
        assert answers == [201]


def test_a_database_disposed_and_used_again_still_writes(app, client, project):
    """As its engines do: the app's lifespan may end and start again over one database."""
    app.state.database.dispose()
    assert _post_decision(client, project, 3) == 201


def test_a_turns_writes_share_one_connection_and_one_that_fails_gives_it_back(
    database_url, tenant, held_writes, monkeypatch
):
    """A turn checks the writer's connection out at its first write and keeps it for the
    next ones; a write that raises (a 409 here) returns it to the pool, and the turn's next
    write checks out another; the turn returns its connection when it ends."""
    connections: list[object] = []
    _record_each_write(
        monkeypatch, lambda write, _raw: connections.append(write.sessions.connection)
    )
    app = create_app(make_settings(database_url))
    with TestClient(app) as scraper:
        key = create_key(app, tenant)
        answers: list[int] = []
        # The third repeats the second's id.
        senders = _send_in_order(scraper, key, "shared", [1, 2, 2, 3, 4], answers)
        held_writes.set()
        for sender in senders:
            sender.join()
        assert sorted(answers) == [201, 201, 201, 201, 409]
        first, second, failed, after_failure, last = connections
        assert first is second is failed
        assert after_failure is last and after_failure is not first
        # The turn over, its connection is back in the pool, and the next write's turn
        # checks one out anew.
        pool = app.state.database.writer.pool
        deadline = time.monotonic() + 30
        # The last write's answer may arrive before its turn has returned the connection.
        while pool.checkedout():
            assert time.monotonic() < deadline, "the turn never returned its connection"
            time.sleep(0.01)
        assert _post_decision(client_for(app, key), "shared", 5) == 201
        assert connections[-1] is not last


def test_a_turns_end_that_fails_is_logged_and_the_turn_returns_its_connection(database_url, caplog):
    """What runs at a turn's end (SQLite's WAL rewind) is housekeeping: whatever it raises is
    logged, the turn's connection goes back to the pool, and the turn ends as it would."""
    upgrade(database_url, configure_logging=False)
    database = db.create_database(make_settings(database_url))
    ended: list[object] = []

    def fail(connection: object) -> None:
        ended.append(connection)
        raise RuntimeError("the end of the turn failed")

    connections = db.WriterConnections(database.writer, at_turn_end=fail)
    try:
        with (
            caplog.at_level(logging.ERROR, logger="app.core.db"),
            connections.turn(),
            connections.transaction() as connection,
        ):
            assert connection.execute(text("SELECT 1")).scalar_one() == 1
        assert len(ended) == 1
        assert database.writer.pool.checkedout() == 0
        logged = [record.getMessage() for record in caplog.records if record.name == "app.core.db"]
        assert logged == ["a write turn's end failed"]
    finally:
        database.dispose()


@pytest.mark.postgresql
def test_a_turns_connection_lost_costs_its_write_one_retryable_answer_and_no_more(
    own_postgres_url, held_writes, monkeypatch
):
    """PostgreSQL's server process of the turn's connection ends (an administrator's
    pg_terminate_backend) while a write holds it: that write is a 503 to retry, and the next
    write of the same turn checks out a live connection rather than the dead one."""
    url = own_postgres_url
    monkeypatch.setattr(db, "PING_AFTER_IDLE_SECONDS", 3600.0)  # no checkout is pinged
    app = create_app(make_settings(url))
    with TestClient(app) as scraper:
        key = create_key(app, "t-lost")
        answers: list[int] = []
        senders = _send_in_order(scraper, key, "lost", [1, 2], answers)
        assert end_server_processes(url), "the turn's connection had no server process to end"
        held_writes.set()
        for sender in senders:
            sender.join()
        assert sorted(answers) == [201, 503]
        listed = client_for(app, key).get("/v1/projects/lost/memory/decisions").json()["items"]
        assert [item["id"] for item in listed] == ["dec-2"]


@pytest.mark.postgresql
def test_a_turns_connection_is_replaced_once_another_write_found_the_server_gone(
    own_postgres_url, held_writes, monkeypatch
):
    """The server's processes end between two writes of a turn, and a write to another project
    finds it (a 503, which makes the pool replace its older connections): the turn's next
    write does not run on the connection it held, dead since, but on a new one."""
    url = own_postgres_url
    monkeypatch.setattr(db, "PING_AFTER_IDLE_SECONDS", 3600.0)  # no checkout is pinged
    # The turn's second write waits before it starts until ``resume`` is set.
    waits, resume = threading.Event(), threading.Event()
    write = write_turns.WriteTurns._write
    calls: list[int] = []

    def paused(self: write_turns.WriteTurns, *args: Any) -> None:
        calls.append(len(calls))
        if len(calls) == 2:
            waits.set()
            assert resume.wait(30), "the test never resumed the turn"
        write(self, *args)

    monkeypatch.setattr(write_turns.WriteTurns, "_write", paused)
    app = create_app(make_settings(url))
    with TestClient(app) as scraper:
        key = create_key(app, "t-replaced")
        # Connections idle in the pool, for the other project's write to take one, dead.
        engine = app.state.database.writer
        for connection in [engine.connect() for _ in range(3)]:
            connection.close()
        answers: list[int] = []
        senders = _send_in_order(scraper, key, "held", [1, 2], answers)
        try:
            held_writes.set()
            assert waits.wait(30), "the turn's second write never came"
            end_server_processes(url)
            client = client_for(app, key)
            found_gone = client.post("/v1/projects/other/features", json={"feature_id": "f"})
            assert found_gone.status_code == 503
        finally:
            resume.set()
            for sender in senders:
                sender.join()
        assert answers == [201, 201]


def test_tenants_take_turns_in_sqlites_one_queue():
    """In the one turn of every write (SQLite), each tenant waiting has a write in turn: a
    tenant with five writes queued delays another's by one, not five (in one queue for all,
    256 connections of one tenant made another's decision wait 259-325 ms, 2026-11-27)."""
    turns = write_turns.WriteTurns(30, one_writer=True, turn_scope=contextlib.nullcontext)
    first_runs = threading.Event()
    go_on = threading.Event()
    ran: list[str] = []

    def write(name: str) -> Callable[[], None]:
        def run() -> None:
            if name == "first":
                first_runs.set()
                assert go_on.wait(10)
            ran.append(name)

        return run

    async def scenario() -> None:
        first = asyncio.ensure_future(turns.run(("busy", "p"), write("first")))
        await asyncio.to_thread(first_runs.wait, 10)
        queued = [turns.run(("busy", "p"), write(f"busy-{n}")) for n in range(5)]
        queued.append(turns.run(("quiet", "q"), write("quiet")))
        pending = [asyncio.ensure_future(each) for each in queued]
        while turns.waiting < len(pending):
            await asyncio.sleep(0.001)
        go_on.set()
        await asyncio.gather(first, *pending)

    try:
        asyncio.run(scenario())
    finally:
        turns.shutdown()
    assert ran == ["first", "busy-0", "quiet", "busy-1", "busy-2", "busy-3", "busy-4"]
