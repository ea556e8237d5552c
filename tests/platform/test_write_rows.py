"""A write's rows read on its connection before it has an ORM session (``WriteSession``): they
behave as rows the session loaded. Each test runs a change through the write mechanism every
route uses (``Writes.run``), on a run made over HTTP, and reads the outcome back over HTTP."""

import secrets

import httpx
from fastapi import Response

from app.core.conditional import etag_of
from app.runs.repository import RunRepository
from app.storage.route import Writes
from app.storage.writes import Write
from tests.platform.servers import running

BACKUP = b'{"set": "aside"}\n'


def _write(app, tenant: str, project: str, change) -> Response:
    return Writes(app.state.database, tenant, app.state.project_deleter).run(project, change)


def _run(client, project: str) -> str:
    started = client.post(f"/v1/projects/{project}/runs/r1/iterations", json={"bead_id": "b1"})
    assert started.status_code == 200
    return f"/v1/projects/{project}/runs/r1"


def test_a_change_by_attribute_is_stored_though_no_session_was_made(app, client, tenant, project):
    """The row is read on the connection and changed by attribute only: the write makes the
    session at its end to store the change, rather than lose it."""
    run = _run(client, project)
    made: list[bool] = []

    def change(write: Write) -> Response:
        row = write.locked(RunRepository(write.sessions), "r1")
        assert row is not None
        row.backup, row.backup_etag = BACKUP, etag_of(BACKUP)
        made.append(write.sessions.made)
        return Response(status_code=204)

    assert _write(app, tenant, project, change).status_code == 204
    assert made == [False]
    backup = client.get(f"{run}/state/backup")
    assert (backup.status_code, backup.content) == (200, BACKUP)


def test_a_row_read_twice_is_one_row(app, client, tenant, project):
    """As a session's identity map: the second read gives the first row, with its change."""
    _run(client, project)

    def change(write: Write) -> Response:
        repository = RunRepository(write.sessions)
        first = write.locked(repository, "r1")
        assert first is not None
        first.backup = BACKUP
        second = write.locked(repository, "r1")
        assert second is first
        assert second.backup == BACKUP
        assert write.session.get(type(first), first.id) is first  # the session holds it
        return Response(status_code=204)

    assert _write(app, tenant, project, change).status_code == 204


def test_a_row_read_before_the_session_is_deleted_through_it(app, client, tenant, project):
    run = _run(client, project)

    def change(write: Write) -> Response:
        repository = RunRepository(write.sessions)
        row = write.existing(repository, "r1", missing=AssertionError("no run"))
        repository.delete(row)
        return Response(status_code=204)

    assert _write(app, tenant, project, change).status_code == 204
    assert client.get(f"{run}/state").status_code == 404


def test_a_failed_change_stores_nothing_read_or_changed(app, client, tenant, project):
    """A change that raises after changing a row read on the connection: rolled back, as with
    the session's rows (the change by attribute is never written)."""
    run = _run(client, project)
    state = client.get(f"{run}/state").content

    class Refused(Exception):
        pass

    def change(write: Write) -> Response:
        row = write.locked(RunRepository(write.sessions), "r1")
        assert row is not None
        row.backup, row.backup_etag = BACKUP, etag_of(BACKUP)
        write.session.flush()  # written into the transaction, which then rolls back
        raise Refused

    try:
        _write(app, tenant, project, change)
    except Refused:
        pass
    else:
        raise AssertionError("the change's error was lost")
    assert client.get(f"{run}/state/backup").status_code == 404
    assert client.get(f"{run}/state").content == state


def test_a_fresh_servers_first_requests_are_appends(database_url, tmp_path):
    """A server whose first requests read a row on the connection, before anything else in
    its process used the ORM (auth off: no key is looked up): the rows are made by the ORM's
    mapping all the same, which is completed on the ORM's first use and which a detached row
    needs complete. The feature and the run are made by another server before."""
    project = f"fresh-{secrets.token_hex(4)}"
    base = f"/v1/projects/{project}"
    handover = {"from_agent": "a", "to_agent": "b", "task_completed": "t", "message": "m"}
    auth_off = {"AUTH": "off"}
    with running(database_url, tmp_path / "first.log", auth_off) as first:
        made = httpx.post(f"{first.url}{base}/features", json={"feature_id": "f1"})
        started = httpx.post(f"{first.url}{base}/runs/r1/iterations", json={"bead_id": "b1"})
    assert (made.status_code, started.status_code) == (201, 200)
    with running(database_url, tmp_path / "fresh.log", auth_off) as fresh:
        handed = httpx.post(f"{fresh.url}{base}/features/f1/handovers", json=handover)
        started = httpx.post(f"{fresh.url}{base}/runs/r1/iterations", json={"bead_id": "b2"})
    assert (handed.status_code, started.status_code) == (201, 200)
