"""An Idempotency-Key's answer: what is stored under the key is bounded, and the write turn
reads only what decides a claim, never the stored answer.

A hostile client (2026-11-27) resumed a 30 MB save under fresh keys: each 2-byte request
stored the whole 34 MB answer, and SQLite's database grew by a GB in 15 s; each replay, and a
key reused on another route, read the whole record inside the write turn (every tenant's one
writer on SQLite), and a replay was sent with no export turn."""

import re
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import event, text

from app.storage import route
from tests.conftest import client_for, create_key
from tests.helpers import assert_problem, import_save, one_turn_without_wait, seed_save

# The body limit the tests lower to once the save is written: its resume's answer is over it.
LIMIT = 2000

# A statement that fetches the stored answer (not its length alone).
READS_THE_ANSWER = re.compile(r"(?<!length\()\bidempotency_keys\.body\b", re.IGNORECASE)


def _resume(client, project: str, save_id: int, key: str):
    return client.post(
        f"/v1/projects/{project}/saves/{save_id}/resume", headers={"Idempotency-Key": key}
    )


def _stored_bytes(engine, tenant: str, key: str) -> int:
    with engine.connect() as connection:
        size = connection.execute(
            text("SELECT length(body) FROM idempotency_keys WHERE tenant = :t AND key = :k"),
            {"t": tenant, "k": key},
        ).scalar_one()
    assert isinstance(size, int)
    return size


@pytest.fixture
def saved(app, project, monkeypatch) -> Iterator[tuple[Any, str, int]]:
    """A tenant's client and the id of its save, the body limit then lowered below the save."""
    tenant = "t-idem-" + project
    client = client_for(app, create_key(app, tenant, "read", "write"))
    imported = import_save(client, project, seed_save())
    assert imported.status_code == 201, imported.text
    monkeypatch.setattr(app.state.settings, "max_body_bytes", LIMIT)
    yield client, tenant, imported.json()["id"]


def test_a_large_answer_is_stored_within_the_bound_and_replayed_byte_for_byte(
    app, engine, project, saved
):
    client, tenant, save_id = saved
    first = _resume(client, project, save_id, "resume-1")
    assert first.status_code == 200, first.text
    assert len(first.content) > LIMIT
    assert _stored_bytes(engine, tenant, "resume-1") <= LIMIT

    replayed = _resume(client, project, save_id, "resume-1")
    assert replayed.status_code == 200
    assert replayed.headers["Idempotent-Replayed"] == "true"
    assert replayed.content == first.content
    assert replayed.headers["etag"] == first.headers["etag"]
    assert (
        client.get(f"/v1/projects/{project}/saves/{save_id}").json()["metadata"]["resume_count"]
        == first.json()["resume_count"]
    )


def test_a_replay_whose_save_changed_since_says_so(app, project, saved):
    """The answer is rebuilt from the save it names; once the save has changed (resumed
    again under another key) the first answer is gone: a 409 that says so, never another
    answer, and never a second effect."""
    client, _, save_id = saved
    first = _resume(client, project, save_id, "resume-a")
    assert _resume(client, project, save_id, "resume-b").status_code == 200
    problem = assert_problem(_resume(client, project, save_id, "resume-a"), 409)
    assert "changed" in problem["detail"]
    assert (
        client.get(f"/v1/projects/{project}/saves/{save_id}").json()["metadata"]["resume_count"]
        == first.json()["resume_count"] + 1
    )


@pytest.fixture
def statements_in_writes(app, monkeypatch) -> Iterator[list[str]]:
    """The statements run in the app's writes (``Writes.run``: in a write turn, or in a worker
    thread holding the writer's connection or the project's lock), on either engine."""
    database = app.state.database
    in_write = threading.local()
    seen: list[str] = []
    original = route.Writes.run

    def run(self: route.Writes, *args: Any, **kwargs: Any) -> Any:
        in_write.on = True
        try:
            return original(self, *args, **kwargs)
        finally:
            in_write.on = False

    def record(conn, cursor, statement, parameters, context, executemany) -> None:
        if getattr(in_write, "on", False):
            seen.append(statement)

    monkeypatch.setattr(route.Writes, "run", run)
    engines = {id(engine): engine for engine in (database.writer, database.reader)}.values()
    for engine in engines:
        event.listen(engine, "before_cursor_execute", record)
    yield seen
    for engine in engines:
        event.remove(engine, "before_cursor_execute", record)


def test_the_claim_in_the_write_never_reads_the_stored_answer(project, saved, statements_in_writes):
    """Neither a replay nor a key reused on another route (the same 422 as ever) fetches the
    stored answer in the write: a replay reads it after the write."""
    client, _, save_id = saved
    first = _resume(client, project, save_id, "resume-1")
    assert first.status_code == 200
    decision = client.post(
        f"/v1/projects/{project}/memory/decisions",
        json={"decision": "small"},
        headers={"Idempotency-Key": "decision-1"},
    )
    assert decision.status_code == 201
    statements_in_writes.clear()

    assert _resume(client, project, save_id, "resume-1").content == first.content
    small = client.post(
        f"/v1/projects/{project}/memory/decisions",
        json={"decision": "small"},
        headers={"Idempotency-Key": "decision-1"},
    )
    assert small.status_code == 201 and small.content == decision.content
    reused = client.post(
        f"/v1/projects/{project}/memory/decisions",
        json={"decision": "other"},
        headers={"Idempotency-Key": "resume-1"},
    )
    problem = assert_problem(reused, 422)
    assert problem["errors"] == [
        {"path": "header.idempotency-key", "message": "reused with a different request"}
    ]
    claims = [s for s in statements_in_writes if "idempotency_keys" in s]
    assert len(claims) >= 3  # each request's claim ran in its write
    assert [s for s in claims if READS_THE_ANSWER.search(s)] == []


def test_a_large_replay_is_sent_in_an_export_turn(app, project, saved, monkeypatch):
    """A replay over the body limit waits for an export turn like any large download (a 429
    when none comes); a small one needs none."""
    client, _, save_id = saved
    first = _resume(client, project, save_id, "resume-1")
    decision = client.post(
        f"/v1/projects/{project}/memory/decisions",
        json={"decision": "small"},
        headers={"Idempotency-Key": "decision-1"},
    )
    turns = app.state.archive_exports
    one_turn_without_wait(turns, monkeypatch)
    monkeypatch.setattr(turns, "per_tenant", 0)
    refused = _resume(client, project, save_id, "resume-1")
    assert_problem(refused, 429)
    small = client.post(
        f"/v1/projects/{project}/memory/decisions",
        json={"decision": "small"},
        headers={"Idempotency-Key": "decision-1"},
    )
    assert small.status_code == 201 and small.content == decision.content
    monkeypatch.setattr(turns, "per_tenant", 1)
    assert _resume(client, project, save_id, "resume-1").content == first.content
