"""A feature's delete and a run's take the shape of a project's: the delete's one write hides
the feature's context (or the run's state) in a project no tenant sees, and the app's one
deleter deletes its rows after the answer, a short write at a time (the README's gap: a
feature of 3,000 handovers of 100 KB, deleted in one write, held SQLite's one writer, and
every other tenant's write, 1.66 s, growing with the handovers, which a feature does not cap;
a run's delete and its beads likewise).

Deterministic, never timed, as the project's delete's tests (``test_project_delete.py``, whose
listener and clients these use): the batches are made small, and another tenant's write, sent
at the delete's first DELETE, must commit before its last one. Each held row must go by a
DELETE of its own table, none by a cascade from its context's or state's row (that cascade is
the one long write).
"""

import asyncio
import io
import json
import secrets
import tarfile
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event, text

from app.core.migrations import upgrade
from app.main import create_app
from app.projects import service
from app.projects.repository import DELETING_TENANT
from tests.conftest import Backend, client_for, create_key, make_settings
from tests.helpers import (
    DELETER_WAIT_SECONDS,
    assert_problem,
    golden_bytes,
    hold_first_call,
    python_indent2,
    wait_for_the_deleter,
)
from tests.projects.test_project_delete import (
    ANSWER_WAIT_SECONDS,
)

# Rows enough for many batches (``small_batches``).
HELD = 20


@dataclass(frozen=True)
class Kind:
    """A feature or a run: where it is, and the table of its rows that hang from it."""

    name: str
    # The rows its delete leaves to the deleter, and the table of the row they hang from.
    held_table: str
    parent_table: str

    def url(self, project: str, key: str) -> str:
        if self.name == "feature":
            return f"/v1/projects/{project}/features/{key}/context"
        return f"/v1/projects/{project}/runs/{key}/state"

    def delete_url(self, project: str, key: str) -> str:
        if self.name == "feature":
            return self.url(project, key)
        return f"/v1/projects/{project}/runs/{key}"

    def list_url(self, project: str) -> str:
        return f"/v1/projects/{project}/{self.name}s"

    def document(self, key: str, rows: int, word: str = "held") -> bytes:
        if self.name == "feature":
            template = golden_bytes("sdd-context-template.json").decode()
            stamp = "2025-10-16T07:00:00Z"
            context = json.loads(
                template.replace("{{feature_name}}", key).replace("{{timestamp}}", stamp)
            )
            note = json.loads(golden_bytes("sdd-handover-note-example.json"))
            context["handover_notes"]["history"] = [
                {**note, "message": f"{word} {number}"} for number in range(rows)
            ]
            return python_indent2(context)
        state = json.loads(golden_bytes("atari-state-seed-example.json"))
        state["history"] = {
            f"bd-{number:03}": {
                "id": f"bd-{number:03}",
                "status": word,
                "attempts": 1,
                "last_attempt": "2024-01-15T10:30:00Z",
            }
            for number in range(rows)
        }
        return json.dumps(state).encode()

    def put(self, client: TestClient, project: str, key: str, rows: int, **headers: str):
        return client.put(
            self.url(project, key),
            content=self.document(key, rows),
            headers={"Content-Type": "application/json", **headers},
        )

    def rows(self, client: TestClient, project: str, key: str) -> list[Any]:
        """The entries of its history, as its GET answers them."""
        document = client.get(self.url(project, key)).json()
        if self.name == "feature":
            return list(document["handover_notes"]["history"])
        return list(document["history"].values())

    def fill(self, client: TestClient, project: str, key: str) -> None:
        """One with ``HELD`` rows hanging from it (and, a run, a counted session)."""
        assert self.put(client, project, key, HELD).status_code == 201
        if self.name == "feature":
            workflow = client.put(
                f"/v1/projects/{project}/features/{key}/workflow",
                json={"tasks": []},
            )
            assert workflow.status_code == 201, workflow.text
        else:
            ended = client.post(
                f"/v1/projects/{project}/runs/{key}/iterations/end",
                json={"bead_id": "bd-000", "outcome": "completed", "session_id": "session-1"},
            )
            assert ended.status_code == 200, ended.text


KINDS = [
    Kind("feature", held_table="feature_handovers", parent_table="feature_contexts"),
    Kind("run", held_table="run_beads", parent_table="run_states"),
]


@pytest.fixture(params=KINDS, ids=[kind.name for kind in KINDS])
def kind(request: pytest.FixtureRequest) -> Kind:
    return request.param


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """A row a statement, a statement a write: more than ``HELD`` writes a delete."""
    monkeypatch.setattr(service, "DELETE_BATCH_ROWS", 1)
    monkeypatch.setattr(service, "DELETE_BATCH_ROWS_MOST", 1)
    monkeypatch.setattr(service, "DELETE_WRITE_SECONDS", 0)


def _row_id(engine: Engine, kind: Kind, project: str, tenant: str, key: str) -> int | None:
    column = "feature_id" if kind.name == "feature" else "run"
    with engine.connect() as connection:
        return connection.execute(
            text(
                f"SELECT r.id FROM {kind.parent_table} r JOIN projects p ON p.id = r.project_id "
                f"WHERE p.tenant = :t AND p.name = :n AND r.{column} = :k"
            ),
            {"t": tenant, "n": project, "k": key},
        ).scalar()


def _held(engine: Engine, kind: Kind, row_id: int) -> int:
    column = "context_id" if kind.name == "feature" else "run_state_id"
    with engine.connect() as connection:
        return connection.execute(
            text(f"SELECT COUNT(*) FROM {kind.held_table} WHERE {column} = :r"), {"r": row_id}
        ).scalar_one()


def _parent_left(engine: Engine, kind: Kind, row_id: int) -> int:
    with engine.connect() as connection:
        return connection.execute(
            text(f"SELECT COUNT(*) FROM {kind.parent_table} WHERE id = :r"), {"r": row_id}
        ).scalar_one()


def _hidden_projects(engine: Engine) -> int:
    with engine.connect() as connection:
        return connection.execute(
            text("SELECT COUNT(*) FROM projects WHERE tenant = :t"), {"t": DELETING_TENANT}
        ).scalar_one()


@contextmanager
def deleted_by_their_own_table(engine: Engine, table: str) -> Iterator[list[int]]:
    """The rows each ``DELETE FROM table`` of the writer deleted, while the block runs: rows of
    ``table`` deleted otherwise went by a cascade, in the statement that deleted their parent."""
    deleted: list[int] = []

    def record(_conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith(f"DELETE FROM {table.upper()} "):
            deleted.append(cursor.rowcount)

    event.listen(engine, "after_cursor_execute", record)
    try:
        yield deleted
    finally:
        event.remove(engine, "after_cursor_execute", record)


def test_its_rows_go_a_batch_a_write_by_their_own_table(
    app, client, tenant, project, kind, small_batches
):
    """The delete's rows go in writes of their own, each by a DELETE of its own table: none
    goes with its context's or state's row, in the one statement that held the writer for the
    whole delete. (That other tenants' writes run between the deleter's writes is the
    project delete's test: ``test_another_tenants_write_commits_between_the_batches``. Here
    the deleter runs on the session app's loop and the requests on the test's, whose write
    turns queue apart, so their order would be the threads' and not the turns'.)"""
    kind.fill(client, project, "doomed")
    writer = app.state.database.writer
    row_id = _row_id(writer, kind, project, tenant, "doomed")
    assert row_id is not None
    assert _held(writer, kind, row_id) >= HELD
    with deleted_by_their_own_table(writer, kind.held_table) as deleted:
        assert client.delete(kind.delete_url(project, "doomed")).status_code == 204
        wait_for_the_deleter(app)
    # Every held row by a statement of its own table, a batch at a time.
    assert sum(deleted) >= HELD, deleted
    assert max(deleted) == 1, deleted
    assert _held(writer, kind, row_id) == 0
    assert _parent_left(writer, kind, row_id) == 0
    assert_problem(client.get(kind.url(project, "doomed")), 404)


def _exported_names(client: TestClient, project: str) -> list[str]:
    exported = client.get(f"/v1/projects/{project}/archive")
    assert exported.status_code == 200, exported.text
    with tarfile.open(fileobj=io.BytesIO(exported.content), mode="r:gz") as archive:
        return archive.getnames()


def test_it_is_gone_at_the_answer_and_its_name_starts_afresh(
    app, client, tenant, project, kind, small_batches, monkeypatch
):
    """The 204 comes once the feature (or run) is hidden, its rows still there for the deleter
    (held here at its first statement): from then on it is gone from its GET, its list, the
    project's counts, the handovers and the archive, and a new one of the same name is made at
    once, with nothing of the old one's, and stays whole once the old one's rows are gone. (The
    deleter is held as it looks for hidden projects, outside any write: SQLite's writes
    would wait for a held batch.)"""
    kind.fill(client, project, "doomed")
    kind.fill(client, project, "kept")
    writer = app.state.database.writer
    # The reader: on SQLite the held batch has begun its write on the writer's connection.
    reader = app.state.database.reader
    row_id = _row_id(writer, kind, project, tenant, "doomed")
    assert row_id is not None
    counts_before = client.get(f"/v1/projects/{project}").json()["counts"]
    names_before = _exported_names(client, project)
    entered, release = hold_first_call(monkeypatch, service, "_being_deleted")
    with ThreadPoolExecutor(1) as requests:
        try:
            sent = requests.submit(client.delete, kind.delete_url(project, "doomed"))
            assert sent.result(timeout=ANSWER_WAIT_SECONDS).status_code == 204
            assert entered.wait(DELETER_WAIT_SECONDS), "the deleter never began"
            assert _held(reader, kind, row_id) >= HELD
            assert_problem(client.get(kind.url(project, "doomed")), 404)
            assert_problem(client.delete(kind.delete_url(project, "doomed")), 404)
            listed = client.get(kind.list_url(project)).json()["items"]
            key = "feature_id" if kind.name == "feature" else "run"
            assert [item[key] for item in listed] == ["kept"]
            counts = client.get(f"/v1/projects/{project}").json()["counts"]
            expected = {f"{kind.name}s": counts_before[f"{kind.name}s"] - 1}
            if kind.name == "feature":
                expected["handovers"] = counts_before["handovers"] - HELD
                handovers = client.get(f"/v1/projects/{project}/handovers?limit=200").json()
                assert {item["feature_id"] for item in handovers["items"]} == {"kept"}
            assert counts == counts_before | expected
            names = _exported_names(client, project)
            assert [name for name in names if "doomed" in name] == []
            assert len(names) < len(names_before)
            # The same name, made anew at once: one row, not the old one's.
            fresh = kind.put(client, project, "doomed", 1)
            assert fresh.status_code == 201, fresh.text
        finally:
            release.set()
    wait_for_the_deleter(app)
    assert _held(writer, kind, row_id) == 0
    assert _parent_left(writer, kind, row_id) == 0
    assert _hidden_projects(writer) == 0
    assert len(kind.rows(client, project, "doomed")) == 1
    listed = client.get(kind.list_url(project)).json()["items"]
    assert len(listed) == 2


def test_a_stale_if_match_stops_the_delete_before_it_hides_anything(
    app, client, project, kind, small_batches
):
    kind.fill(client, project, "doomed")
    before = client.get(kind.url(project, "doomed"))
    stale = client.delete(kind.delete_url(project, "doomed"), headers={"If-Match": '"x"'})
    assert_problem(stale, 412)
    again = client.get(kind.url(project, "doomed"))
    assert again.content == before.content
    assert _hidden_projects(app.state.database.writer) == 0
    deleted = client.delete(
        kind.delete_url(project, "doomed"), headers={"If-Match": before.headers["etag"]}
    )
    assert deleted.status_code == 204
    assert_problem(client.get(kind.url(project, "doomed")), 404)


def test_a_project_deleted_while_its_feature_or_run_is_hidden_leaves_nothing(
    app, client, tenant, project, kind, small_batches, monkeypatch
):
    """The project's delete comes while the deleter is held before the hidden feature's (or
    run's) first batch (as it looks for hidden projects): a handover still points at the
    project (its ``project_id``), and goes a batch at a time all the same, none with the
    project's row or its context's."""
    kind.fill(client, project, "doomed")
    writer = app.state.database.writer
    row_id = _row_id(writer, kind, project, tenant, "doomed")
    assert row_id is not None
    entered, release = hold_first_call(monkeypatch, service, "_being_deleted")
    with deleted_by_their_own_table(writer, kind.held_table) as deleted:
        with ThreadPoolExecutor(1) as requests:
            try:
                sent = requests.submit(client.delete, kind.delete_url(project, "doomed"))
                assert sent.result(timeout=ANSWER_WAIT_SECONDS).status_code == 204
                assert entered.wait(DELETER_WAIT_SECONDS), "the deleter never began"
                assert client.delete(f"/v1/projects/{project}").status_code == 204
            finally:
                release.set()
        wait_for_the_deleter(app)
    assert sum(deleted) >= HELD, deleted
    assert max(deleted) == 1, deleted
    assert _held(writer, kind, row_id) == 0
    assert _hidden_projects(writer) == 0


def test_a_delete_stopped_midway_is_finished_at_the_next_start(
    backend: Backend, kind: Kind, small_batches, monkeypatch
):
    """The app ends with the feature (or run) hidden and its rows not yet deleted: gone for
    its tenant, its name free, and the next start deletes them."""
    url = backend.new_database_url()
    upgrade(url)
    tenant, project = "t-" + secrets.token_hex(6), "proj-" + secrets.token_hex(4)
    first = create_app(make_settings(url))
    with TestClient(first):
        client = client_for(first, create_key(first, tenant))
        kind.fill(client, project, "doomed")
        writer = first.state.database.writer
        row_id = _row_id(writer, kind, project, tenant, "doomed")
        assert row_id is not None
        began = threading.Event()

        async def until_the_end(_database: Any, _hidden: int) -> None:
            began.set()
            # Until the app's end cancels the deleter, nothing deleted.
            await asyncio.sleep(DELETER_WAIT_SECONDS)

        deleter_rows = service._delete_rows
        monkeypatch.setattr(service, "_delete_rows", until_the_end)
        assert client.delete(kind.delete_url(project, "doomed")).status_code == 204
        assert_problem(client.get(kind.url(project, "doomed")), 404)
        assert kind.put(client, project, "doomed", 1).status_code == 201
        assert began.wait(DELETER_WAIT_SECONDS), "the deleter never began"
        assert _held(writer, kind, row_id) >= HELD
    monkeypatch.setattr(service, "_delete_rows", deleter_rows)
    second = create_app(make_settings(url))
    with TestClient(second):
        wait_for_the_deleter(second)
        writer = second.state.database.writer
        assert _held(writer, kind, row_id) == 0
        assert _parent_left(writer, kind, row_id) == 0
        assert _hidden_projects(writer) == 0
        client = client_for(second, create_key(second, tenant))
        assert len(kind.rows(client, project, "doomed")) == 1
