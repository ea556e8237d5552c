"""One transaction per request, committed before the response; concurrent writers lose nothing."""

import sqlite3
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event
from sqlalchemy.exc import OperationalError
from sqlmodel import Session

from app.core.db import create_database
from app.core.migrations import upgrade
from app.main import create_app
from tests.conftest import client_for, create_key, make_settings
from tests.helpers import assert_problem, import_save, seed_save
from tests.platform.servers import create_key_in


def test_a_commit_that_fails_is_the_response(app, client, project, monkeypatch):
    """Were the commit after the response, the client would see 201 for nothing stored. The
    driver's commit fails (the dialect's ``do_commit``, which every commit reaches, whether an
    ORM session's or a write's connection's)."""
    import_save(client, project, seed_save())

    def failing_commit(_dialect: object, _dbapi_connection: object) -> None:
        raise OperationalError("COMMIT", {}, Exception("database is locked"))

    dialect = type(app.state.database.writer.dialect)
    monkeypatch.setattr(dialect, "do_commit", failing_commit)
    assert_problem(import_save(client, project, seed_save()), 503)
    monkeypatch.undo()
    assert len(client.get(f"/v1/projects/{project}/saves").json()["items"]) == 1


def test_small_appends_make_no_orm_session(client, project):
    """A decision's, a handover's and an iteration start's append run their statements on the
    write's connection, the feature's and the run's row read there too: no ORM session
    begins (the write's session is made on first use only). A context's PUT stores its row
    through the ORM: its session begins, which shows the listener sees a write's session."""
    client.post(f"/v1/projects/{project}/features", json={"feature_id": "f1"})
    client.post(f"/v1/projects/{project}/runs/r1/iterations", json={"bead_id": "b1"})
    context = client.get(f"/v1/projects/{project}/features/f1/context").content
    appends = [
        ("memory/decisions", {"id": "dec-001", "decision": "keep going", "timestamp": 1}),
        (
            "features/f1/handovers",
            {"from_agent": "a", "to_agent": "b", "task_completed": "t", "message": "m"},
        ),
        ("runs/r1/iterations", {"bead_id": "b1"}),  # an entry replaced
        ("runs/r1/iterations", {"bead_id": "b2"}),  # an entry added
    ]
    begun: list[Session] = []

    def record(session: Session, _transaction: object, _connection: object) -> None:
        begun.append(session)

    event.listen(Session, "after_begin", record)
    try:
        statuses = [
            client.post(f"/v1/projects/{project}/{path}", json=body).status_code
            for path, body in appends
        ]
        appended = len(begun)
        put = client.put(
            f"/v1/projects/{project}/features/f1/context",
            content=context,
            headers={"content-type": "application/json"},
        )
    finally:
        event.remove(Session, "after_begin", record)
    assert statuses == [201, 201, 200, 200]
    assert put.status_code == 200
    assert appended == 0
    assert len(begun) > appended


def test_a_memory_item_is_appended_in_one_statement_after_the_projects_lock(client, project):
    """The item's INSERT reads its position, the features completed and the file's style as it
    writes, and writes nothing when the id is taken: no SELECT before it (a round trip to
    PostgreSQL). What it read is what a list of the items shows."""
    path = f"/v1/projects/{project}/memory/decisions"
    assert client.post(path, json={"id": "dec-001", "decision": "first"}).status_code == 201
    sent: list[str] = []

    def record(_c: object, _cursor: object, statement: str, *_args: object) -> None:
        sent.append(" ".join(statement.split()[:3]))  # "INSERT INTO <table>"

    # The app's engine now: another test may have run the app's lifespan again, and made new
    # engines, since the session's ``engine`` fixture was taken.
    engine = client.app.state.database.writer
    event.listen(engine, "before_cursor_execute", record)
    try:
        second = client.post(path, json={"id": "dec-002", "decision": "second"})
        written = len(sent)
        taken = client.post(path, json={"id": "dec-002", "decision": "again"})
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert second.status_code == 201, second.text
    assert_problem(taken, 409)
    project_lock = "INSERT INTO projects"
    assert sent[:written] == [project_lock, "INSERT INTO memory_items"]
    assert sent[written:] == [project_lock, "INSERT INTO memory_items"]
    exported = client.get(f"/v1/projects/{project}/memory/files/key-decisions.json")
    assert [item["id"] for item in exported.json()] == ["dec-001", "dec-002"]  # positions


def _clients(app, tenant: str, count: int):
    key = create_key(app, tenant)
    return [client_for(app, key) for _ in range(count)]


def test_concurrent_resumes_lose_no_count(app, client, tenant, project):
    save_id = import_save(client, project, seed_save()).json()["id"]
    url = f"/v1/projects/{project}/saves/{save_id}/resume"
    clients = _clients(app, tenant, 8)
    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(lambda i: clients[i % 8].post(url).status_code, range(24)))
    assert statuses == [200] * 24
    assert client.get(f"/v1/projects/{project}/saves").json()["items"][0]["resume_count"] == 24


def test_concurrent_retries_with_one_key_store_once(app, client, tenant, project):
    clients = _clients(app, tenant, 8)
    headers = {"Idempotency-Key": "same-for-all"}
    with ThreadPoolExecutor(max_workers=8) as pool:
        responses = list(
            pool.map(lambda c: import_save(c, project, seed_save(), headers=headers), clients)
        )
    assert {r.status_code for r in responses} == {201}
    assert len({r.content for r in responses}) == 1
    assert len(client.get(f"/v1/projects/{project}/saves").json()["items"]) == 1


def _newest_completed_save() -> dict:
    """A save that completes every phase, newer than any other: its import prunes the rest."""
    done = seed_save()
    done["timestamp"] = "2030-01-01T00:00:00Z"
    done["phases"]["status"] = dict.fromkeys(done["phases"]["status"], "complete")
    return done


@pytest.mark.parametrize("round_", range(4))
def test_a_completing_import_racing_a_resume_never_fails_the_server(
    app, client, tenant, project, round_
):
    """Both take the project's lock first, so neither waits on the other in reverse order."""
    save_id = import_save(client, project, seed_save()).json()["id"]
    done = _newest_completed_save()
    resumer, importer = _clients(app, tenant, 2)
    with ThreadPoolExecutor(max_workers=2) as pool:
        resumed = pool.submit(
            lambda: resumer.post(f"/v1/projects/{project}/saves/{save_id}/resume")
        )
        imported = pool.submit(lambda: import_save(importer, project, done))
    assert resumed.result().status_code in (200, 404)
    assert imported.result().status_code == 201
    assert imported.result().json()["pruned"] == 1


@pytest.mark.parametrize("round_", range(4))
def test_a_completing_import_racing_a_prune_never_fails_the_server(
    app, client, tenant, project, round_
):
    """The prune takes the project's lock first, as the import's automatic prune does: were it
    to delete saves first, each would hold what the other waits for (a PostgreSQL deadlock)."""
    for day in range(1, 4):
        document = seed_save()
        document["timestamp"] = f"2024-01-0{day}T00:00:00Z"
        import_save(client, project, document)
    done = _newest_completed_save()
    pruner, importer = _clients(app, tenant, 2)
    with ThreadPoolExecutor(max_workers=2) as pool:
        pruned = pool.submit(
            lambda: pruner.post(f"/v1/projects/{project}/saves:prune", json={"keep_latest": 1})
        )
        imported = pool.submit(lambda: import_save(importer, project, done))
    assert pruned.result().status_code == 200, pruned.result().text
    assert imported.result().status_code == 201, imported.result().text
    assert pruned.result().json()["deleted"] + imported.result().json()["pruned"] == 3
    assert len(client.get(f"/v1/projects/{project}/saves").json()["items"]) == 1


def test_a_write_waiting_out_another_process_s_sqlite_lock_is_a_503_and_stores_nothing(
    tmp_path,
):
    """Another process holds SQLite's write lock past the busy timeout: the write's first
    statement (``BEGIN IMMEDIATE``, the dialect's begin, on the driver) fails as SQLAlchemy's
    error would, a 503 to retry; once the lock is released the same write succeeds. SQLite's
    alone: PostgreSQL has no database-wide write lock (its lost connections:
    test_idle_connections.py)."""
    url = f"sqlite:///{tmp_path / 'locked.db'}"
    upgrade(url)
    key = create_key_in(url, "locked")
    app = create_app(make_settings(url, sqlite_busy_timeout_ms=50))
    decision = {"id": "dec-001", "decision": "d", "timestamp": 1}
    path = "/v1/projects/locked/memory/decisions"
    with TestClient(app), client_for(app, key) as client:
        holder = sqlite3.connect(tmp_path / "locked.db", isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            answer = client.post(path, json=decision)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        problem = assert_problem(answer, 503)
        assert "busy" in problem["detail"]
        assert answer.headers["Retry-After"]
        assert_problem(client.get("/v1/projects/locked"), 404)  # not even the project
        assert client.post(path, json=decision).status_code == 201


def test_sqlite_transactions_begin_as_each_engine_needs(tmp_path):
    """SQLite's engines send their own BEGIN (the dialect's begin, no listener): the writer's
    takes the write lock at once, before any statement writes (another process cannot take
    it meanwhile); a reader's reads one snapshot, whatever commits between its statements."""
    url = f"sqlite:///{tmp_path / 'begin.db'}"
    upgrade(url)
    database = create_database(make_settings(url))
    other = sqlite3.connect(tmp_path / "begin.db", isolation_level=None, timeout=0)
    count = "SELECT count(*) FROM projects"
    try:
        with database.write_connection() as connection:
            connection.exec_driver_sql(count)  # a read only: a deferred BEGIN takes no lock
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("BEGIN IMMEDIATE")
        with database.read_session() as session:
            before = session.connection().exec_driver_sql(count).scalar()
            other.execute(
                "INSERT INTO projects (tenant, name, created_at, last_write_at)"
                " VALUES ('t', 'p', '2026-01-01', '2026-01-01')"
            )
            assert session.connection().exec_driver_sql(count).scalar() == before
        with database.read_session() as session:
            assert session.connection().exec_driver_sql(count).scalar() == before + 1
    finally:
        other.close()
        database.dispose()
