"""A project's delete answers once the project is hidden, and the app's one deleter deletes its
rows after, a write at a time, a project after another (the README's gaps: a project of 1,000
failures of 100 KB held SQLite's one writer, and every other tenant's write, for the whole
delete; and a delete that answered after its last row outlasted a client's timeout, 107,000
decisions in 121 s, the client's retry a 404). From the delete's write the project is gone for
its tenant; its rows then go in batches, each a write of its own, and other writes run between
them.

Deterministic, never timed: the delete's batches are made small, and a listener on the
writer's statements, at the delete's first DELETE, sends another write and waits until it has
either committed or is queued behind the running batch (SQLite: one queue for every write).
The statements' order then says whether it committed before the delete's last batch. The
deleter is held, or stopped, at a batch where a test needs the rows still there.
"""

import asyncio
import contextlib
import itertools
import logging
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Hashable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, inspect, text

from app.core.migrations import upgrade
from app.main import create_app
from app.projects import service
from app.projects.repository import DELETING_TENANT
from app.projects.resources import PROJECT_RESOURCES
from tests.conftest import Backend, client_for, create_key, make_settings
from tests.helpers import (
    DELETER_WAIT_SECONDS,
    assert_problem,
    hold_first_call,
    tar_gz,
    wait_for_the_deleter,
    workspace_files,
)
from tests.platform.world import populate

# In the other write's body, so that its statements are known among the writer's.
MARKER = "between-the-batches-5c1d"
# How long the listener lets the other write take to commit or queue: a bound on a wait that
# a working delete ends at once, not a measure of anything (the old delete, which held the
# writer, ran into it and then let the other write commit after its own).
QUEUE_WAIT_SECONDS = 10
# How long a delete's answer may take while the deleter is held: a bound that a delete which
# answers once its project is hidden ends at once (one that answered after its last batch ran
# into it, held).
ANSWER_WAIT_SECONDS = 10


def _fill(client: TestClient, project: str) -> None:
    """Rows in every table a project holds: one of everything, and a workspace imported."""
    populate(client, project)
    archive = tar_gz(workspace_files())
    imported = client.post(
        f"/v1/projects/{project}/archive",
        content=archive,
        headers={"Content-Type": "application/gzip"},
    )
    assert imported.status_code == 200, imported.text
    ended = client.post(
        f"/v1/projects/{project}/runs/run-1/iterations/end",
        json={"bead_id": "bd-1", "outcome": "completed", "session_id": "session-1"},
    )
    assert ended.status_code == 200, ended.text
    for number in range(12):
        decision = {"id": f"dec-{number}", "timestamp": number, "decision": f"chose {number}"}
        assert (
            client.post(f"/v1/projects/{project}/memory/decisions", json=decision).status_code
            == 201
        )


def _project_id(engine: Engine, tenant: str, name: str) -> int | None:
    with engine.connect() as connection:
        return connection.execute(
            text("SELECT id FROM projects WHERE tenant = :t AND name = :n"),
            {"t": tenant, "n": name},
        ).scalar()


def held_rows(engine: Engine, project_id: int) -> dict[str, int]:
    """The project's rows in every table of the database that holds some: each table with a
    ``project_id``, each table with a foreign key to one of those, and (SQLite) the
    full-text index's entries in the project's range of keys (migration 0018)."""
    schema = inspect(engine)
    tables = schema.get_table_names()
    direct = {t for t in tables if "project_id" in {c["name"] for c in schema.get_columns(t)}}
    queries = {t: f"SELECT COUNT(*) FROM {t} WHERE project_id = :p" for t in direct}
    for table in set(tables) - direct - {"projects"}:
        for key in schema.get_foreign_keys(table):
            if key["referred_table"] in direct:
                (column,) = key["constrained_columns"]
                (parent_column,) = key["referred_columns"]
                parent = key["referred_table"]
                queries[table] = (
                    f"SELECT COUNT(*) FROM {table} WHERE {column} IN "
                    f"(SELECT {parent_column} FROM {parent} WHERE project_id = :p)"
                )
    if engine.dialect.name == "sqlite":
        queries["memory_items_fts"] = (
            "SELECT COUNT(*) FROM memory_items_fts WHERE rowid BETWEEN (:p << 32) "
            "AND ((:p + 1) << 32) - 1"
        )
    with engine.connect() as connection:
        return {
            table: connection.execute(text(query), {"p": project_id}).scalar_one()
            for table, query in sorted(queries.items())
        }


@contextmanager
def at_first_delete(engine: Engine, action: Callable[[], None]) -> Iterator[list[str]]:
    """The writer's statements while the block runs, as "delete" (a DELETE) and "other" (a
    statement of the other write, by its marker); ``action`` runs once, at the first DELETE,
    before it. ``engine``: the app's writer as it is now (``app.state.database.writer``), not
    the session's ``engine`` fixture: a test that enters the session app's lifespan again
    gives it a database of its own."""
    seen: list[str] = []
    done = threading.Event()

    def listen(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if MARKER in repr(parameters):
            seen.append("other")
        elif statement.lstrip().upper().startswith("DELETE"):
            if not done.is_set():
                done.set()
                action()
            seen.append("delete")

    event.listen(engine, "before_cursor_execute", listen)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", listen)
    # Not in ``finally``: a failure in the block is the one to report.
    assert done.is_set(), "the delete ran no DELETE"


@asynccontextmanager
async def on_this_loop(app: FastAPI, client: TestClient) -> AsyncIterator[httpx.AsyncClient]:
    """``client``'s tenant, its requests served on the running event loop, as a server serves
    every request on one (a TestClient runs each on a loop of its own, and SQLite's write
    turns keep each loop's writes in a queue of their own)."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://testserver", headers=client.headers
    ) as served:
        yield served


def send_and_wait_until_queued(
    app: FastAPI, loop: asyncio.AbstractEventLoop, send: Coroutine[Any, Any, httpx.Response]
) -> "Future[httpx.Response]":
    """``send`` on ``loop``, from another thread; returns once its write has committed, or is
    queued for its turn behind the write running (SQLite's one queue), whichever is first."""
    sent = asyncio.run_coroutine_threadsafe(send, loop)
    turns = app.state.database.write_turns
    deadline = time.monotonic() + QUEUE_WAIT_SECONDS
    while not sent.done() and turns.waiting == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    return sent


async def _decision(client: httpx.AsyncClient, project: str) -> httpx.Response:
    body = {"id": "dec-between", "timestamp": 1, "decision": MARKER}
    return await client.post(f"/v1/projects/{project}/memory/decisions", json=body)


def committed_before_the_last_batch(seen: list[str]) -> bool:
    """Whether the other write's statements came before the delete's last DELETE."""
    last_delete = len(seen) - 1 - seen[::-1].index("delete")
    return "other" in seen and seen.index("other") < last_delete


def test_another_tenants_write_commits_between_the_batches(
    app, client, other_client, engine, project, monkeypatch
):
    monkeypatch.setattr(service, "DELETE_BATCH_ROWS", 3)
    monkeypatch.setattr(service, "DELETE_WRITE_SECONDS", 0)
    _fill(client, project)
    sent: list[Future[httpx.Response]] = []

    async def delete() -> None:
        loop = asyncio.get_running_loop()
        async with on_this_loop(app, client) as owner, on_this_loop(app, other_client) as other:

            def other_tenant_writes() -> None:
                sent.append(send_and_wait_until_queued(app, loop, _decision(other, "victim")))

            with at_first_delete(app.state.database.writer, other_tenant_writes) as seen:
                assert (await owner.delete(f"/v1/projects/{project}")).status_code == 204
                await asyncio.to_thread(wait_for_the_deleter, app)
            assert (await asyncio.wrap_future(sent[0])).status_code == 201
        # The other tenant's write committed before the delete's last batch, not after it.
        assert committed_before_the_last_batch(seen), seen

    asyncio.run(delete())
    assert_problem(client.get(f"/v1/projects/{project}"), 404)


def test_the_project_is_gone_from_the_first_batch_and_its_name_starts_afresh(
    app, client, engine, tenant, project, monkeypatch
):
    monkeypatch.setattr(service, "DELETE_BATCH_ROWS", 3)
    monkeypatch.setattr(service, "DELETE_WRITE_SECONDS", 0)
    _fill(client, project)
    kept = project + "-kept"
    client.post(f"/v1/projects/{kept}/memory/decisions", json={"decision": "stays"})
    old_id = _project_id(engine, tenant, project)
    assert old_id is not None
    reads: dict[str, int] = {}
    sent: list[Future[httpx.Response]] = []

    async def delete() -> None:
        loop = asyncio.get_running_loop()
        async with on_this_loop(app, client) as owner:

            def read(path: str) -> httpx.Response:
                return asyncio.run_coroutine_threadsafe(owner.get(path), loop).result()

            def during_the_delete() -> None:
                reads["project"] = read(f"/v1/projects/{project}").status_code
                reads["decisions"] = read(f"/v1/projects/{project}/memory/decisions").status_code
                listed = read("/v1/projects").json()["items"]
                reads["listed"] = sum(item["name"] == project for item in listed)
                # The same name written meanwhile: a new project, which waits for no batch.
                sent.append(send_and_wait_until_queued(app, loop, _decision(owner, project)))

            with at_first_delete(app.state.database.writer, during_the_delete) as seen:
                assert (await owner.delete(f"/v1/projects/{project}")).status_code == 204
                await asyncio.to_thread(wait_for_the_deleter, app)
            assert (await asyncio.wrap_future(sent[0])).status_code == 201
        assert committed_before_the_last_batch(seen), seen

    asyncio.run(delete())
    assert reads == {"project": 404, "decisions": 404, "listed": 0}
    # The name holds the one decision written during the delete, none of the old project's.
    fresh = client.get(f"/v1/projects/{project}").json()
    assert fresh["counts"] == dict.fromkeys(PROJECT_RESOURCES, 0) | {"memory_items": 1}
    decisions = client.get(f"/v1/projects/{project}/memory/decisions").json()["items"]
    assert [item["id"] for item in decisions] == ["dec-between"]
    assert _project_id(engine, tenant, project) != old_id
    assert client.get(f"/v1/projects/{kept}").json()["counts"]["memory_items"] == 1


def test_nothing_of_a_deleted_project_is_left_in_any_table(
    app, client, engine, tenant, project, monkeypatch
):
    monkeypatch.setattr(service, "DELETE_BATCH_ROWS", 4)
    monkeypatch.setattr(service, "DELETE_WRITE_SECONDS", 0)
    _fill(client, project)
    project_id = _project_id(engine, tenant, project)
    assert project_id is not None
    before = held_rows(engine, project_id)
    # Every table that holds a project's rows holds some of this one's.
    assert [table for table, rows in before.items() if rows == 0] == []
    assert client.delete(f"/v1/projects/{project}").status_code == 204
    wait_for_the_deleter(app)
    assert held_rows(engine, project_id) == dict.fromkeys(before, 0)
    with engine.connect() as connection:
        assert (
            connection.execute(
                text("SELECT COUNT(*) FROM projects WHERE id = :p"), {"p": project_id}
            ).scalar_one()
            == 0
        )
    assert_problem(client.delete(f"/v1/projects/{project}"), 404)


def test_a_stale_if_match_stops_the_delete_before_it_hides_anything(client, project, monkeypatch):
    monkeypatch.setattr(service, "DELETE_BATCH_ROWS", 2)
    monkeypatch.setattr(service, "DELETE_WRITE_SECONDS", 0)
    _fill(client, project)
    before = client.get(f"/v1/projects/{project}")
    assert_problem(client.delete(f"/v1/projects/{project}", headers={"If-Match": '"x"'}), 412)
    again = client.get(f"/v1/projects/{project}")
    assert again.json() == before.json()
    assert again.headers["etag"] == before.headers["etag"]
    deleted = client.delete(f"/v1/projects/{project}", headers={"If-Match": before.headers["etag"]})
    assert deleted.status_code == 204


@pytest.mark.parametrize("if_match", [False, True])
def test_the_hiding_write_counts_the_resources_only_for_an_if_match(client, project, if_match):
    """The project's ETag is of its resources' counts, a statement a table: the write that
    hides the project, every tenant's one writer on SQLite, works it out only to check an
    If-Match (it took 0.1-0.27 s of the write for 20,000 items)."""
    populate(client, project)
    headers = (
        {"If-Match": client.get(f"/v1/projects/{project}").headers["ETag"]} if if_match else {}
    )
    counted: list[str] = []

    def record(_c: object, _cursor: object, statement: str, *_args: object) -> None:
        if "count(" in statement.lower():
            counted.append(statement)

    event.listen(Engine, "before_cursor_execute", record)
    try:
        assert client.delete(f"/v1/projects/{project}", headers=headers).status_code == 204
    finally:
        event.remove(Engine, "before_cursor_execute", record)
    assert len(counted) == (len(PROJECT_RESOURCES) if if_match else 0), counted


def test_the_delete_answers_before_its_rows_are_deleted(
    app, client, engine, tenant, project, monkeypatch
):
    """The 204 comes once the project is hidden, not once its last row is gone: a large
    project's delete answered after 121 s, past a client's timeout, whose retry then got a
    404. Here the deleter is held at its first statement, and the delete answers all the
    same, every row still there."""
    monkeypatch.setattr(service, "DELETE_BATCH_ROWS", 3)
    monkeypatch.setattr(service, "DELETE_WRITE_SECONDS", 0)
    _fill(client, project)
    project_id = _project_id(engine, tenant, project)
    assert project_id is not None
    # The reader: on SQLite the held batch has begun its write on the writer's connection.
    reader = app.state.database.reader
    before = held_rows(reader, project_id)
    entered, release = hold_first_call(monkeypatch, service, "delete_project_rows")
    with ThreadPoolExecutor(1) as requests:
        try:
            sent = requests.submit(client.delete, f"/v1/projects/{project}")
            assert sent.result(timeout=ANSWER_WAIT_SECONDS).status_code == 204
            assert entered.wait(DELETER_WAIT_SECONDS), "the deleter never began"
            assert held_rows(reader, project_id) == before
            assert_problem(client.get(f"/v1/projects/{project}"), 404)
            assert project not in [p["name"] for p in client.get("/v1/projects").json()["items"]]
        finally:
            release.set()
    wait_for_the_deleter(app)
    assert held_rows(engine, project_id) == dict.fromkeys(before, 0)
    assert _project_id(engine, DELETING_TENANT, str(project_id)) is None


def test_a_delete_cancelled_during_its_write_still_has_its_rows_deleted(
    app, client, engine, tenant, project, monkeypatch
):
    """A request cancelled while its hiding write runs (the server stopping) is not waited
    for, and the write commits all the same: the deleter is woken by the write once it has
    committed, not by the request after it, which is gone."""
    _fill(client, project)
    project_id = _project_id(engine, tenant, project)
    assert project_id is not None
    entered, release = hold_first_call(monkeypatch, service, "_hide")
    hidden = threading.Event()
    held_hide = service._hide

    def hide(*args: Any) -> None:
        try:
            held_hide(*args)
        finally:
            hidden.set()

    monkeypatch.setattr(service, "_hide", hide)

    async def cancelled() -> None:
        async with on_this_loop(app, client) as owner:
            sent = asyncio.ensure_future(owner.delete(f"/v1/projects/{project}"))
            try:
                assert await asyncio.to_thread(entered.wait, DELETER_WAIT_SECONDS)
                sent.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sent
            finally:
                release.set()

    asyncio.run(cancelled())
    assert hidden.wait(DELETER_WAIT_SECONDS), "the hiding write never ended"
    assert _project_id(engine, tenant, project) is None
    wait_for_the_deleter(app)
    assert sum(held_rows(engine, project_id).values()) == 0
    assert _project_id(engine, DELETING_TENANT, str(project_id)) is None


def one_project_at_a_time(batches: list[int]) -> bool:
    """Whether the projects' batches, in the order they ran, never return to a project once
    another's have begun."""
    runs = [project for project, _ in itertools.groupby(batches)]
    return len(runs) == len(set(runs))


def test_deleted_projects_are_deleted_one_at_a_time(app, client, engine, tenant, monkeypatch):
    """Three deletes sent at once: the deleter deletes the hidden projects a project after
    another, so that a tenant that sends many deletes puts one delete's batches at a time in
    front of the other tenants' writes. (Each request deleted its own project's rows before,
    and their batches took turns.)"""
    monkeypatch.setattr(service, "DELETE_BATCH_ROWS", 1)
    monkeypatch.setattr(service, "DELETE_BATCH_ROWS_MOST", 1)
    monkeypatch.setattr(service, "DELETE_WRITE_SECONDS", 0)
    projects = ["proj-" + secrets.token_hex(4) for _ in range(3)]
    for project in projects:
        _fill(client, project)
    ids = {_project_id(engine, tenant, project) for project in projects}
    batches: list[int] = []
    delete_project_rows = service.delete_project_rows

    def recorded(connection: Any, project_id: int, rows: int, table: int) -> int:
        batches.append(project_id)
        return delete_project_rows(connection, project_id, rows, table)

    monkeypatch.setattr(service, "delete_project_rows", recorded)

    async def delete() -> None:
        async with on_this_loop(app, client) as owner:
            sent = [owner.delete(f"/v1/projects/{project}") for project in projects]
            answers = await asyncio.gather(*sent)
        assert [answer.status_code for answer in answers] == [204] * len(projects)

    asyncio.run(delete())
    # As the deletes answer (the requests' own batches had all run by then), and at the end.
    assert one_project_at_a_time(batches), batches
    wait_for_the_deleter(app)
    assert one_project_at_a_time(batches), batches
    assert set(batches) == ids
    for project_id in ids:
        assert _project_id(engine, DELETING_TENANT, str(project_id)) is None


@pytest.mark.parametrize("tried_again", ["after a pause", "at the next delete"])
def test_a_failed_batch_is_logged_and_its_delete_tried_again(
    app, client, engine, tenant, project, monkeypatch, caplog, tried_again
):
    """A batch that fails (the database lost, a write that waited too long for its turn)
    neither ends the deleter nor loses the hidden project: it is logged, and the deleter
    tries again after a pause, or at the next delete if sooner."""
    monkeypatch.setattr(service, "DELETE_BATCH_ROWS", 3)
    monkeypatch.setattr(service, "DELETE_WRITE_SECONDS", 0)
    pause = 0 if tried_again == "after a pause" else 3600
    monkeypatch.setattr(service, "DELETE_RETRY_SECONDS", pause)
    _fill(client, project)
    project_id = _project_id(engine, tenant, project)
    assert project_id is not None
    delete_project_rows = service.delete_project_rows
    calls: list[int] = []
    failed = threading.Event()

    def fails_once(connection: Any, project_id: int, rows: int, table: int) -> int:
        calls.append(rows)
        if len(calls) == 3:
            failed.set()
            raise RuntimeError("the database is lost here")
        return delete_project_rows(connection, project_id, rows, table)

    monkeypatch.setattr(service, "delete_project_rows", fails_once)
    caplog.set_level(logging.WARNING, logger=service.__name__)
    try:
        assert client.delete(f"/v1/projects/{project}").status_code == 204
        assert failed.wait(DELETER_WAIT_SECONDS)
        if tried_again == "at the next delete":
            other = project + "-next"
            written = client.post(f"/v1/projects/{other}/memory/decisions", json={"decision": "x"})
            assert written.status_code == 201
            assert client.delete(f"/v1/projects/{other}").status_code == 204
        wait_for_the_deleter(app)
    finally:
        # A failure above leaves no deleter waiting out its pause into the next test.
        app.state.project_deleter.wake()
    assert len(calls) > 3
    assert _project_id(engine, DELETING_TENANT, str(project_id)) is None
    assert sum(held_rows(engine, project_id).values()) == 0
    logged = [r for r in caplog.records if r.name == service.__name__]
    assert [r.levelno for r in logged] == [logging.WARNING], logged
    assert "failed" in logged[0].getMessage()


def test_a_delete_stopped_midway_is_finished_at_the_next_start(backend: Backend, monkeypatch):
    """The app's end cancels its deleter between two batches: the project stays hidden (gone
    for its tenant, its name free), and the next start deletes the rest."""
    url = backend.new_database_url()
    upgrade(url)
    tenant, project = "t-" + secrets.token_hex(6), "proj-" + secrets.token_hex(4)
    monkeypatch.setattr(service, "DELETE_BATCH_ROWS", 3)
    monkeypatch.setattr(service, "DELETE_WRITE_SECONDS", 0)
    first = create_app(make_settings(url))
    stopped = threading.Event()
    with TestClient(first):
        client = client_for(first, create_key(first, tenant))
        _fill(client, project)
        engine = first.state.database.writer
        project_id = _project_id(engine, tenant, project)
        assert project_id is not None
        turns = first.state.database.write_turns
        run = turns.run
        batches = 0

        async def stops_at_the_third_batch(turn: Hashable, call: Callable[[], Any]) -> Any:
            nonlocal batches
            # A hidden project's batches run in its own turn (service._delete_rows).
            if isinstance(turn, tuple) and turn[0] == DELETING_TENANT:
                batches += 1
                if batches == 3:
                    stopped.set()
                    # Until the app's end cancels the deleter (bounded, should a delete ever
                    # wait for its batches again).
                    await asyncio.sleep(DELETER_WAIT_SECONDS)
            return await run(turn, call)

        monkeypatch.setattr(turns, "run", stops_at_the_third_batch)
        assert client.delete(f"/v1/projects/{project}").status_code == 204
        assert stopped.wait(DELETER_WAIT_SECONDS), "the deleter never reached its third batch"
        left = held_rows(engine, project_id)
        assert sum(left.values()) > 0
        assert_problem(client.get(f"/v1/projects/{project}"), 404)
        assert client.get("/v1/projects").json()["items"] == []
        assert_problem(client.delete(f"/v1/projects/{project}"), 404)
        assert (
            client.post(
                f"/v1/projects/{project}/memory/decisions", json={"decision": "new"}
            ).status_code
            == 201
        )
        counts = client.get(f"/v1/projects/{project}").json()["counts"]
        assert counts == dict.fromkeys(PROJECT_RESOURCES, 0) | {"memory_items": 1}
    assert batches == 3
    # The next start.
    second = create_app(make_settings(url))
    with TestClient(second):
        wait_for_the_deleter(second)
        assert held_rows(second.state.database.writer, project_id) == dict.fromkeys(left, 0)
        client = client_for(second, create_key(second, tenant))
        assert client.get(f"/v1/projects/{project}").json()["counts"]["memory_items"] == 1


def _lock_waiters(engine: Engine) -> int:
    """The database's sessions waiting for a lock another holds (PostgreSQL)."""
    with engine.connect() as connection:
        return connection.execute(
            text(
                "SELECT COUNT(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE NOT l.granted AND a.datname = current_database()"
            )
        ).scalar_one()


@pytest.mark.postgresql
def test_two_processes_deleters_take_turns_on_one_project(own_postgres_url, monkeypatch, caplog):
    """Two replicas' deleters on one hidden project (each looks for hidden projects at its
    start): the second's write waits for the first's, holding the project's row, rather than
    delete beside it (where a statement that found its rows deleted by the other took the
    table for empty, and the project's row then took the rest in one long statement); both
    end without an error, and nothing of the project is left."""
    monkeypatch.setattr(service, "DELETE_BATCH_ROWS", 3)
    monkeypatch.setattr(service, "DELETE_WRITE_SECONDS", 0)
    caplog.set_level(logging.WARNING, logger=service.__name__)
    tenant, project = "t-" + secrets.token_hex(6), "proj-" + secrets.token_hex(4)
    first, second = (create_app(make_settings(own_postgres_url)) for _ in range(2))
    with TestClient(first), TestClient(second):
        wait_for_the_deleter(first)
        wait_for_the_deleter(second)
        client = client_for(first, create_key(first, tenant))
        _fill(client, project)
        engine = first.state.database.writer
        project_id = _project_id(engine, tenant, project)
        assert project_id is not None
        before = held_rows(engine, project_id)
        # The first deleter's first write is held once it holds the project's row.
        entered, release = hold_first_call(monkeypatch, service, "delete_project_rows")
        try:
            assert client.delete(f"/v1/projects/{project}").status_code == 204
            assert entered.wait(DELETER_WAIT_SECONDS), "the first deleter never began"
            second.state.project_deleter.wake()
            deadline = time.monotonic() + DELETER_WAIT_SECONDS
            while _lock_waiters(engine) == 0:
                assert time.monotonic() < deadline, "the second deleter never waited"
                time.sleep(0.01)
            assert held_rows(engine, project_id) == before
        finally:
            release.set()
        wait_for_the_deleter(first)
        wait_for_the_deleter(second)
        assert held_rows(engine, project_id) == dict.fromkeys(before, 0)
        assert _project_id(engine, DELETING_TENANT, str(project_id)) is None
    assert [r for r in caplog.records if r.name == service.__name__] == []


def test_a_delete_takes_small_rows_many_a_statement_and_never_looks_back(
    app, client, engine, tenant, project, monkeypatch
):
    """Small rows go many at a time (a statement that took under a quarter of a write's time
    is followed by one of twice the rows), and a statement starts at the table the last one
    left rows in: one row a statement, every table tried again before each, took 2.0 s for a
    project of 10,000 small decisions (2026-11-27). With a write's time made long, 300 of them
    go in nine statements, and every other table in one or two."""
    monkeypatch.setattr(service, "DELETE_WRITE_SECONDS", 60)
    decisions = [{"id": f"d{n}", "decision": f"small {n}"} for n in range(300)]
    written = client.put(
        f"/v1/projects/{project}/memory/files/key-decisions.json",
        json=decisions,
    )
    assert written.status_code == 200, written.text
    project_id = _project_id(engine, tenant, project)
    deletes: list[str] = []

    def record(_c, _cursor, statement, *_args) -> None:
        if statement.lstrip().upper().startswith("DELETE"):
            deletes.append(statement)

    writer = app.state.database.writer
    event.listen(writer, "before_cursor_execute", record)
    try:
        assert client.delete(f"/v1/projects/{project}").status_code == 204
        wait_for_the_deleter(app)
    finally:
        event.remove(writer, "before_cursor_execute", record)
    of_items = [statement for statement in deletes if "DELETE FROM memory_items " in statement]
    assert len(of_items) == 9 + 1, len(of_items)  # 1+2+...+256 rows, then one finding none
    assert len(deletes) <= len(held_rows(engine, project_id)) + len(of_items) + 1, len(deletes)
