"""One linear migration history that builds exactly the models' schema on both databases."""

import hashlib
import json
from datetime import UTC, datetime

import pytest
from alembic import command
from alembic.script import ScriptDirectory
from fastapi.testclient import TestClient
from sqlalchemy import Connection, create_engine, insert, inspect, text
from sqlalchemy.exc import IntegrityError

from app.agents.models import AgentMemoryItem
from app.core.conditional import etag_of
from app.core.db import utcnow
from app.core.migrations import alembic_config, downgrade, upgrade
from app.formats import atari_state, feature_context
from app.formats.agent_memory import render_line
from app.main import create_app
from app.projects.models import Project
from tests.conftest import client_for, create_key, make_settings
from tests.helpers import import_save, raw_trace, recent_turns, seed_save, tar_gz


def test_there_is_a_single_head():
    heads = ScriptDirectory.from_config(alembic_config()).get_heads()
    assert len(heads) == 1, f"several migration heads: {heads}"


def test_the_models_match_the_migrations(database_url):
    # Raises when autogenerate would find anything to add, drop or alter.
    command.check(alembic_config(database_url))


def _project_row(connection: Connection, tenant: str, now: datetime, name: str = "p") -> int:
    """A project's row put in by SQL, as a migration's test needs one at an older schema."""
    project_id: int = connection.execute(
        text(
            "INSERT INTO projects (tenant, name, created_at, last_write_at) "
            "VALUES (:tenant, :name, :now, :now) RETURNING id"
        ),
        {"tenant": tenant, "name": name, "now": now},
    ).scalar_one()
    return project_id


def test_downgrade_to_base_with_data_and_upgrade_again(backend, tenant):
    url = backend.new_database_url()
    upgrade(url)
    app = create_app(make_settings(url))
    with TestClient(app):
        client = client_for(app, create_key(app, tenant))
        assert import_save(client, "p", seed_save()).status_code == 201
        traces = [raw_trace("a", 1), raw_trace("b", 1)]
        response = client.post("/v1/projects/p/agents/agent/memory/raw-traces", json=traces)
        assert response.status_code == 201, response.text
        workflow = client.put(
            "/v1/projects/p/features/f1/workflow",
            content=b'{"init": {"status": "READY", "dependencies": []}}',
            headers={"Content-Type": "application/json"},
        )
        assert workflow.status_code == 201, workflow.text
    # One step at a time first: 0008's downgrade with its register and keys filled.
    downgrade(url, "0007")
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            kept = connection.execute(text("SELECT COUNT(*) FROM agent_memory_items"))
            assert kept.scalar_one() == 2
        downgrade(url, "base")
        assert set(inspect(engine).get_table_names()) <= {"alembic_version"}
        upgrade(url)
        with engine.connect() as connection:
            assert connection.execute(text("SELECT COUNT(*) FROM saves")).scalar_one() == 0
    finally:
        engine.dispose()


def test_0008_registers_the_turns_of_the_raw_traces_stored_before_it(backend, tenant):
    url = backend.new_database_url()
    upgrade(url, "0007")
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            now = utcnow()
            project_id = connection.execute(
                insert(Project.__table__)  # type: ignore[arg-type]
                .values(tenant=tenant, name="p", created_at=now, last_write_at=now)
                .returning(Project.__table__.c.id)  # type: ignore[attr-defined]
            ).scalar_one()
            stored = [("a", 1), ("b", 1), ("a", 2), ("c", 1)]
            if backend.name == "sqlite":
                # SQLite took a NUL in a turn id before 0008 (PostgreSQL never did); the app
                # now stores its searchable form, which the backfill must give the old rows.
                stored.insert(0, ("n\x00", 1))
            traces = [raw_trace(turn, seq) for turn, seq in stored]
            rows = [
                {
                    "agent": "agent",
                    "kind": "raw_trace",
                    "turn_id": t["turn_id"],
                    "line": render_line(t),
                }
                for t in traces
            ]
            # Another agent's turn of the same name, and an item that is no raw trace.
            rows.append(next(row for row in rows if row["turn_id"] == "b") | {"agent": "other"})
            episode = {"id": "ep", "ts": 1.0, "turn_ids": ["c"], "summary": "s", "salience": 1}
            rows.append({"agent": "agent", "kind": "episodic", "line": render_line(episode)})
            connection.execute(
                insert(AgentMemoryItem.__table__),  # type: ignore[arg-type]
                [{"turn_id": None, "project_id": project_id, "created_at": now} | r for r in rows],
            )
        upgrade(url)
    finally:
        engine.dispose()
    app = create_app(make_settings(url))
    with TestClient(app):
        client = client_for(app, create_key(app, tenant))
        appended = [raw_trace("b", 2), raw_trace("d", 1)]
        response = client.post("/v1/projects/p/agents/agent/memory/raw-traces", json=appended)
        assert response.status_code == 201, response.text
        assert recent_turns(client, "p", "agent", 3) == [
            "(b:1) USER: b 1",
            "(b:2) USER: b 2",
            "(c:1) USER: c 1",
            "(d:1) USER: d 1",
        ]
        assert recent_turns(client, "p", "other", 3) == ["(b:1) USER: b 1"]
        if backend.name == "sqlite":
            response = client.post(
                "/v1/projects/p/agents/agent/memory/raw-traces", json=[raw_trace("n\x00", 2)]
            )
            assert response.status_code == 201, response.text
            assert recent_turns(client, "p", "agent", 9)[:2] == [
                "(n\x00:1) USER: n\x00 1",
                "(n\x00:2) USER: n\x00 2",
            ]


def test_0009_downgrade_writes_0_where_a_save_number_is_null(backend, tenant):
    url = backend.new_database_url()
    upgrade(url)
    app = create_app(make_settings(url))
    document = seed_save()
    document["context"]["token_usage"]["percentage"] = float("nan")
    document["metadata"]["save_count"] = 2**64
    with TestClient(app):
        client = client_for(app, create_key(app, tenant))
        assert import_save(client, "p", document).status_code == 201
    downgrade(url, "0008")
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            row = connection.execute(text("SELECT token_percentage, save_count FROM saves")).one()
            assert tuple(row) == (0, 0)
        upgrade(url)
    finally:
        engine.dispose()


def test_every_step_down_and_up_keeps_the_rows_that_refer_to_a_rebuilt_table(backend, tenant):
    """SQLite rebuilds a table to alter it (drop, create, copy); with foreign keys enforced,
    the drop would cascade into every table referring to it (a save's phase statuses, once)."""
    url = backend.new_database_url()
    upgrade(url)
    app = create_app(make_settings(url))
    with TestClient(app):
        client = client_for(app, create_key(app, tenant))
        assert import_save(client, "p", seed_save()).status_code == 201
    engine = create_engine(url)

    def statuses() -> int:
        with engine.connect() as connection:
            count: int = connection.execute(
                text("SELECT count(*) FROM save_phase_statuses")
            ).scalar_one()
            return count

    try:
        stored = statuses()
        assert stored > 0
        script = ScriptDirectory.from_config(alembic_config())
        for step in script.walk_revisions():
            if step.down_revision is None or step.down_revision < "0008":
                continue
            downgrade(url, str(step.down_revision))
            assert statuses() == stored, f"down to {step.down_revision}"
        upgrade(url)
        assert statuses() == stored
    finally:
        engine.dispose()


def test_0011_numbers_the_saves_of_each_project_in_their_order_and_downgrades(backend, tenant):
    url = backend.new_database_url()
    upgrade(url, "0010")
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            now = utcnow()
            projects = {name: _project_row(connection, tenant, now, name) for name in ("a", "b")}
            for name in ("a", "b", "a", "a", "b"):
                connection.execute(
                    text(
                        "INSERT INTO saves (project_id, timestamp, filename, project_name, "
                        "current_phase, all_phases_complete, content, content_gzipped, "
                        "size_bytes, etag, stored_at) VALUES (:project, :now, :filename, 'p', "
                        "'LOAD', false, :content, false, 2, 'e', :now)"
                    ),
                    {
                        "project": projects[name],
                        "now": now,
                        "filename": f"mdan-save-{name}.json",
                        "content": b"{}",
                    },
                )
            connection.execute(
                text(
                    "INSERT INTO save_phase_statuses (save_id, phase, status) "
                    "SELECT id, 'LOAD', 'complete' FROM saves"
                )
            )
        upgrade(url)
        with engine.connect() as connection:
            numbered = connection.execute(
                text("SELECT project_id, number FROM saves ORDER BY id")
            ).all()
            assert [(p, n) for p, n in numbered] == [
                (projects["a"], 1),
                (projects["b"], 1),
                (projects["a"], 2),
                (projects["a"], 3),
                (projects["b"], 2),
            ]
    finally:
        engine.dispose()
    app = create_app(make_settings(url))
    with TestClient(app):
        client = client_for(app, create_key(app, tenant))
        # The project's count goes on from its saves: no number is given twice.
        assert import_save(client, "a", seed_save()).json()["id"] == 4
        assert import_save(client, "b", seed_save()).json()["id"] == 3
    downgrade(url, "0010")
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            assert connection.execute(text("SELECT COUNT(*) FROM saves")).scalar_one() == 7
            # Nothing that refers to a save went with a rebuilt table: the five rows put in
            # before 0011 and the seed's eight phases of each save imported after it.
            statuses = connection.execute(text("SELECT COUNT(*) FROM save_phase_statuses"))
            assert statuses.scalar_one() == 5 + 2 * len(seed_save()["phases"]["status"])
            assert "number" not in {c["name"] for c in inspect(engine).get_columns("saves")}
        upgrade(url)
    finally:
        engine.dispose()


def test_0012_renames_the_run_state_times_and_keeps_every_value(backend, tenant):
    url = backend.new_database_url()
    upgrade(url, "0011")
    stored_at = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    state = atari_state.fresh(stored_at)
    state["history"]["b1"] = {
        "id": "b1",
        "status": "working",
        "attempts": 1,
        "last_attempt": state["updated_at"],
    }
    state["current_bead"] = "b1"
    content = atari_state.render(state)
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            project = _project_row(connection, tenant, stored_at)
            run_state = connection.execute(
                text(
                    "INSERT INTO run_states (project_id, run, version, status, iteration, "
                    "current_bead, total_cost, total_turns, updated_at, content, etag, "
                    "modified_at) VALUES (:project, 'r', 2, 'idle', 0, 'b1', 0, 0, :updated, "
                    ":content, :etag, :now) RETURNING id"
                ),
                {
                    "project": project,
                    "updated": state["updated_at"],
                    "content": content,
                    "etag": etag_of(content),
                    "now": stored_at,
                },
            ).scalar_one()
            connection.execute(
                text("INSERT INTO run_counted_sessions VALUES (:id, 's1')"), {"id": run_state}
            )
        upgrade(url)
    finally:
        engine.dispose()
    app = create_app(make_settings(url))
    with TestClient(app):
        client = client_for(app, create_key(app, tenant))
        [listed] = client.get("/v1/projects/p/runs").json()["items"]
        assert listed["updated_at"] == state["updated_at"]
        assert listed["modified_at"] == "2026-11-22T12:00:00Z"
        assert listed["etag"] == etag_of(content)
        assert client.get("/v1/projects/p/runs/r/state").content == content
        # The session counted before the migration is still counted.
        end = {"bead_id": "b1", "outcome": "completed", "session_id": "s1", "cost": 1.0}
        response = client.post("/v1/projects/p/runs/r/iterations/end", json=end)
        assert response.status_code == 200, response.text
        assert response.json()["counted"] is False
    downgrade(url, "0011")
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            row = connection.execute(
                text("SELECT updated_at, modified_at FROM run_states WHERE run = 'r'")
            ).one()
            assert row[0] == response.json()["state"]["updated_at"]
            counted = connection.execute(text("SELECT COUNT(*) FROM run_counted_sessions"))
            assert counted.scalar_one() == 1
        upgrade(url)
    finally:
        engine.dispose()


def test_0013_keeps_whole_documents_splits_them_on_their_next_change_and_numbers_ids(
    backend, tenant
):
    url = backend.new_database_url()
    upgrade(url, "0012")
    moment = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    context = feature_context.template("f", "2026-11-22T12:00:00+00:00")
    note = {"timestamp": "2026-11-22T12:00:00+00:00", "from_agent": "a", "to_agent": "b"}
    context["handover_notes"]["history"] = [{**note, "n": n} for n in range(3)]
    context_bytes = feature_context.render(context)
    state = atari_state.fresh(moment)
    state["history"] = {
        f"b{n}": {
            "id": f"b{n}",
            "status": "completed",
            "attempts": 1,
            "last_attempt": state["updated_at"],
        }
        for n in range(3)
    }
    state_bytes = atari_state.render(state)
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            project = _project_row(connection, tenant, moment)
            values = {
                "now": moment,
                "project": project,
                "context": context_bytes,
                "state": state_bytes,
            }
            context_id = connection.execute(
                text(
                    "INSERT INTO feature_contexts (project_id, feature_id, current_phase, "
                    "intervention_required, content, size_bytes, etag, created_at, updated_at) "
                    "VALUES (:project, 'f', 'init', false, :context, 1, 'e', :now, :now) "
                    "RETURNING id"
                ),
                values,
            ).scalar_one()
            for n in range(3):
                connection.execute(
                    text(
                        "INSERT INTO feature_handovers (project_id, context_id, feature_id, "
                        "position, timestamp, from_agent, to_agent, note) VALUES (:project, "
                        ":context_id, 'f', :n, :now, 'a', 'b', :note)"
                    ),
                    values | {"context_id": context_id, "n": n, "note": b"{}"},
                )
            connection.execute(
                text(
                    "INSERT INTO run_states (project_id, run, version, status, iteration, "
                    "current_bead, total_cost, total_turns, state_updated_at, content, etag, "
                    "updated_at) VALUES (:project, 'r', 2, '', 0, '', 0, 0, 'x', :state, 'e', "
                    ":now)"
                ),
                values,
            )
            for kind, item_id in [("decision", "dec-007"), ("decision", "other-9")]:
                connection.execute(
                    text(
                        "INSERT INTO memory_items (project_id, kind, item_id, position, "
                        "timestamp, resolved, features_mark, search_text, content, etag, "
                        "updated_at) VALUES (:project, :kind, :item_id, 0, 0, false, 0, '', "
                        "'{}', 'e', :now)"
                    ),
                    values | {"kind": kind, "item_id": item_id},
                )
        upgrade(url)
    finally:
        engine.dispose()
    app = create_app(make_settings(url))
    with TestClient(app):
        client = client_for(app, create_key(app, tenant))
        # Whole documents are served as they were.
        assert client.get("/v1/projects/p/features/f/context").content == context_bytes
        assert client.get("/v1/projects/p/runs/r/state").content == state_bytes
        # Their next change stores them as parts, byte for byte what the writer writes.
        handover = {"from_agent": "a", "to_agent": "c", "task_completed": "t", "message": "m"}
        for _ in range(2):
            response = client.post("/v1/projects/p/features/f/handovers", json=handover)
            assert response.status_code == 201, response.text
        exported = client.get("/v1/projects/p/features/f/context").content
        document = json.loads(exported)
        assert len(document["handover_notes"]["history"]) == 5
        assert exported == feature_context.render(document)
        listed = client.get("/v1/projects/p/handovers", params={"feature_id": "f"}).json()
        assert [item["index"] for item in listed["items"]] == [4, 3, 2, 1, 0]
        for bead in ("b1", "b9"):
            response = client.post("/v1/projects/p/runs/r/iterations", json={"bead_id": bead})
            assert response.status_code == 200, response.text
        run_state = client.get("/v1/projects/p/runs/r/state").content
        assert run_state == atari_state.render(atari_state.parse(run_state)[0])
        assert sorted(atari_state.parse(run_state)[0]["history"]) == ["b0", "b1", "b2", "b9"]
        # The next decision's id follows the highest number in use.
        created = client.post(
            "/v1/projects/p/memory/decisions",
            json={"decision": "d", "rationale": "r", "impact": [], "category": "architecture"},
        )
        assert created.status_code == 201, created.text
        assert created.json()["id"] == "dec-008"
    # Down again: every document is whole in its row.
    downgrade(url, "0012")
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            stored = connection.execute(text("SELECT content FROM feature_contexts")).scalar_one()
            assert bytes(stored) == exported
            stored = connection.execute(text("SELECT content FROM run_states")).scalar_one()
            assert bytes(stored) == run_state
        upgrade(url)
    finally:
        engine.dispose()


def test_0015_numbers_shared_handover_positions_again_then_holds_them_unique(backend, tenant):
    """A context whose notes share a position (none written so on purpose) keeps its document
    byte for byte, its notes numbered again in the order a read gave them; from then on the
    database refuses a second note at a taken place."""
    url = backend.new_database_url()
    upgrade(url)
    app = create_app(make_settings(url))
    context = feature_context.template("f", "2026-11-27T00:00:00+00:00")
    note = {"timestamp": "2026-11-27T00:00:00+00:00", "from_agent": "a", "to_agent": "b"}
    context["handover_notes"]["history"] = [{**note, "n": n} for n in range(3)]
    handover = {"from_agent": "a", "to_agent": "c", "task_completed": "t", "message": "m"}
    with TestClient(app):
        client = client_for(app, create_key(app, tenant))
        stored = client.put(
            "/v1/projects/p/features/f/context",
            content=feature_context.render(context),
            headers={"Content-Type": "application/json"},
        )
        assert stored.status_code == 201, stored.text
        appended = client.post("/v1/projects/p/features/f/handovers", json=handover)
        assert appended.status_code == 201, appended.text
        exported = client.get("/v1/projects/p/features/f/context").content
    downgrade(url, "0014")
    engine = create_engine(url)
    positions = text("SELECT position FROM feature_handovers ORDER BY id")
    try:
        with engine.begin() as connection:
            assert connection.execute(positions).scalars().all() == [0, 1, 2, 3]
            # The third note at the second's place: a read orders the two by id, as they were.
            connection.execute(text("UPDATE feature_handovers SET position = 1 WHERE position = 2"))
        upgrade(url)
        with engine.connect() as connection:
            assert connection.execute(positions).scalars().all() == [0, 1, 2, 3]
    finally:
        engine.dispose()
    app = create_app(make_settings(url))
    with TestClient(app):
        client = client_for(app, create_key(app, tenant))
        assert client.get("/v1/projects/p/features/f/context").content == exported
        again = client.post("/v1/projects/p/features/f/handovers", json=handover)
        assert again.status_code == 201 and again.json()["index"] == 4, again.text
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            taken = text(
                "INSERT INTO feature_handovers (project_id, context_id, feature_id, position, "
                "timestamp, from_agent, to_agent, note) SELECT project_id, context_id, "
                "feature_id, position, timestamp, from_agent, to_agent, note "
                "FROM feature_handovers WHERE position = 4"
            )
            with pytest.raises(IntegrityError):
                connection.execute(taken)
    finally:
        engine.dispose()


def test_0016_tags_every_save_by_blake3_so_an_archive_pushed_again_stores_nothing(backend, tenant):
    """A save stored before 0016 has its file's BLAKE2b as its tag; an archive pushed again
    knows the saves it holds by their tags, computed now by BLAKE3: without the migration's new
    tags every save would be stored a second time. One save stored whole, one gzip-compressed
    (over 1 MiB), which the migration inflates to hash."""
    url = backend.new_database_url()
    upgrade(url)
    app = create_app(make_settings(url))
    # Another timestamp: another file name (saves are listed by name here).
    large = seed_save() | {"timestamp": "2024-01-15T11:00:00Z", "vendor_notes": "a note " * 200_000}
    with TestClient(app):
        client = client_for(app, create_key(app, tenant))
        for document in (seed_save(), large):
            assert import_save(client, "p", document).status_code == 201
        listed = client.get("/v1/projects/p/saves").json()["items"]
        files = {
            save["filename"]: client.get(f"/v1/projects/p/saves/{save['id']}").content
            for save in listed
        }
    assert max(len(file) for file in files.values()) > 1024 * 1024
    engine = create_engine(url)
    stored = text("SELECT filename, etag, content_gzipped FROM saves ORDER BY id")
    try:
        downgrade(url, "0015")
        with engine.connect() as connection:
            before = connection.execute(stored).all()
        assert sorted(gzipped for _name, _tag, gzipped in before) == [False, True]
        assert {name: tag for name, tag, _gzipped in before} == {
            name: '"' + hashlib.blake2b(file, digest_size=16).hexdigest() + '"'
            for name, file in files.items()
        }
        upgrade(url)
        with engine.connect() as connection:
            after = connection.execute(stored).all()
        assert {name: tag for name, tag, _gzipped in after} == {
            name: etag_of(file) for name, file in files.items()
        }
    finally:
        engine.dispose()
    app = create_app(make_settings(url))
    with TestClient(app):
        client = client_for(app, create_key(app, tenant))
        archive = tar_gz({f"mdan/{name}": file for name, file in files.items()})
        report = client.post(
            "/v1/projects/p/archive", content=archive, headers={"Content-Type": "application/gzip"}
        )
        assert report.status_code == 200, report.text
        assert [member["action"] for member in report.json()["imported"]] == ["unchanged"] * 2
        assert len(client.get("/v1/projects/p/saves").json()["items"]) == 2


def test_0016_keeps_the_tag_of_a_save_whose_stored_file_does_not_inflate(backend, tenant, caplog):
    """A damaged stored file (its export fails as well) cannot be hashed: its tag is kept and
    the migration names the save, and every other save is tagged anew; the upgrade succeeds."""
    url = backend.new_database_url()
    # Alembic's own logging configuration would take the root logger's handlers, caplog's too.
    upgrade(url, "0015", configure_logging=False)
    engine = create_engine(url)
    insert_save = text(
        "INSERT INTO saves (project_id, number, timestamp, filename, project_name, "
        "current_phase, all_phases_complete, content, content_gzipped, size_bytes, etag, "
        "stored_at) VALUES (:project, :number, :now, :filename, 'p', 'LOAD', false, :content, "
        ":gzipped, 2, 'e', :now)"
    )
    try:
        with engine.begin() as connection:
            now = utcnow()
            project = _project_row(connection, tenant, now)
            for number, content, gzipped in ((1, b"\x1f\x8bdamaged", True), (2, b"{}", False)):
                connection.execute(
                    insert_save,
                    {
                        "project": project,
                        "number": number,
                        "now": now,
                        "filename": f"mdan-save-{number}.json",
                        "content": content,
                        "gzipped": gzipped,
                    },
                )
        with caplog.at_level("WARNING", logger="alembic.migration.0016"):
            upgrade(url, configure_logging=False)
        with engine.connect() as connection:
            tags = connection.execute(text("SELECT etag FROM saves ORDER BY number")).scalars()
            assert tags.all() == ["e", etag_of(b"{}")]
    finally:
        engine.dispose()
    [warning] = [record for record in caplog.records if record.name == "alembic.migration.0016"]
    assert "save" in warning.getMessage() and "tag is kept" in warning.getMessage()


def test_0017_writes_memory_search_entries_at_each_insert_on_postgresql(backend, tenant):
    """PostgreSQL's full-text index keeps no pending list (an insert that filled it flushed it,
    72-91 ms); what was pending is in the index once upgraded, found by a search as before.
    SQLite's FTS5 table is left as it was."""
    url = backend.new_database_url()
    upgrade(url, "0016")
    decision = {"id": "dec-1", "decision": "pending entries move into the index"}
    app = create_app(make_settings(url))
    with TestClient(app):
        client = client_for(app, create_key(app, tenant))
        assert client.post("/v1/projects/p/memory/decisions", json=decision).status_code == 201
    options = text("SELECT reloptions FROM pg_class WHERE relname = 'ix_memory_items_search'")
    postgresql = backend.name == "postgresql"
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            before = connection.execute(options).scalar() if postgresql else None
        upgrade(url)
        with engine.connect() as connection:
            after = connection.execute(options).scalar() if postgresql else None
        app = create_app(make_settings(url))
        with TestClient(app):
            client = client_for(app, create_key(app, tenant))
            found = client.get("/v1/projects/p/memory/decisions", params={"q": "pending"})
        assert [item["id"] for item in found.json()["items"]] == ["dec-1"]
        if postgresql:
            assert before is None and after == ["fastupdate=off"]
            downgrade(url, "0016")
            with engine.connect() as connection:
                assert connection.execute(options).scalar() is None
    finally:
        engine.dispose()


def test_0018_keys_the_search_index_by_project_and_keeps_every_item_found(backend, tenant):
    """The full-text index is made again, by project, from the items already stored: SQLite's
    table, and PostgreSQL's GIN index over each item's words under its project (its functions
    with it, and 0017's option kept). The downgrade makes the index before, found by a search
    of the same words."""
    url = backend.new_database_url()
    upgrade(url)

    def found(word: str) -> list[str]:
        app = create_app(make_settings(url))
        with TestClient(app):
            client = client_for(app, create_key(app, tenant))
            response = client.get("/v1/projects/p/memory/decisions", params={"q": word})
            assert response.status_code == 200, response.text
            return [item["id"] for item in response.json()["items"]]

    def postgres_index(connection: Connection) -> tuple[str, list[str], int]:
        definition, options = connection.execute(
            text(
                "SELECT pg_get_indexdef(oid), reloptions FROM pg_class "
                "WHERE relname = 'ix_memory_items_search'"
            )
        ).one()
        functions = text("SELECT count(*) FROM pg_proc WHERE proname LIKE 'memory_search_%'")
        return definition, options, connection.execute(functions).scalar_one()

    app = create_app(make_settings(url))
    with TestClient(app):
        client = client_for(app, create_key(app, tenant))
        for number, words in enumerate(["durable queue", "jwt tokens", "jwt cache"]):
            item = {"id": f"d{number}", "decision": words}
            assert client.post("/v1/projects/p/memory/decisions", json=item).status_code == 201
    downgrade(url, "0017")
    engine = create_engine(url)
    try:
        with engine.connect() as connection:
            if backend.name == "sqlite":
                match = "SELECT count(*) FROM memory_items_fts WHERE memory_items_fts MATCH 'jwt'"
                assert connection.execute(text(match)).scalar_one() == 2
            else:
                definition, options, functions = postgres_index(connection)
                assert "to_tsvector('simple'::regconfig, search_text)" in definition
                assert options == ["fastupdate=off"] and functions == 0
                by_word = text(
                    "SELECT count(*) FROM memory_items "
                    "WHERE to_tsvector('simple', search_text) @@ plainto_tsquery('simple', 'jwt')"
                )
                assert connection.execute(by_word).scalar_one() == 2
        upgrade(url)
        if backend.name == "postgresql":
            with engine.connect() as connection:
                definition, options, functions = postgres_index(connection)
            assert "memory_search_lexemes(project_id, search_text)" in definition
            assert options == ["fastupdate=off"] and functions == 2
            # The functions' configuration is pg_catalog's whatever the caller's search path:
            # a 'simple' of the caller's (here english's stemmer) is never the one they use.
            with engine.begin() as connection:
                connection.execute(text("CREATE SCHEMA shadow"))
                connection.execute(
                    text("CREATE TEXT SEARCH CONFIGURATION shadow.simple (COPY = english)")
                )
                connection.execute(text("SET LOCAL search_path = shadow, pg_catalog, public"))
                terms = connection.execute(
                    text("SELECT memory_search_lexemes(1, 'running cats')::text")
                ).scalar_one()
                assert terms == "'p1xcats' 'p1xrunning'", terms
    finally:
        engine.dispose()
    assert found("jwt") == ["d2", "d1"]
    assert found("durable") == ["d0"]
