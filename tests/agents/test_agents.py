"""Working context snapshots, agent memory and restore through the API, on both databases."""

import json
import threading

import anyio
import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from sqlmodel import Session

from app.agents import compaction, repository
from app.agents import router as agents_router
from app.agents import service as agents_service
from app.storage import route
from tests.conftest import client_for, create_key
from tests.helpers import (
    GOLDEN,
    assert_problem,
    golden_bytes,
    one_turn_without_wait,
    raw_trace,
    recent_turns,
)

AGENT = "agent_123"
NDJSON = "application/x-ndjson"
SNAPSHOT = golden_bytes("autobyteus/working_context_snapshot.json")
MEMORY_FILES = {
    "raw-traces": "raw_traces.jsonl",
    "episodic": "episodic.jsonl",
    "semantic": "semantic.jsonl",
}
# An agent's memory as autobyteus 1.4.4 itself wrote it (tests/formats/generators/
# autobyteus_memory.py): a session with two compactions, which pruned raw traces into
# raw_traces_archive.jsonl.
REAL_AGENT = "coder_worker_4821"
REAL_AGENT_DIR = GOLDEN / "workspace" / "memory" / "agents" / REAL_AGENT
REAL_MEMORY_FILES = {**MEMORY_FILES, "raw-traces-archive": "raw_traces_archive.jsonl"}


def _url(project: str, suffix: str, agent: str = AGENT) -> str:
    return f"/v1/projects/{project}/agents/{agent}/{suffix}"


def _put(client, project, content: bytes, agent: str = AGENT, **headers):
    return client.put(
        _url(project, "working-context-snapshot", agent),
        content=content,
        headers={"Content-Type": "application/json", **headers},
    )


def _snapshot(**changes) -> dict:
    document = json.loads(SNAPSHOT)
    document.update(changes)
    return document


def _append_file(client, project, memory: str, **headers):
    return client.post(
        _url(project, f"memory/{memory}"),
        content=golden_bytes(f"autobyteus/{MEMORY_FILES[memory]}"),
        headers={"Content-Type": NDJSON, **headers},
    )


def _restore(client, project, body=None, **headers):
    return client.post(
        _url(project, "restore"), json=body or {"system_prompt": "System prompt"}, headers=headers
    )


def test_the_snapshot_exports_byte_for_byte_including_non_ascii(client, project):
    created = _put(client, project, SNAPSHOT)
    assert created.status_code == 201, created.text
    assert created.json() == {
        "agent_id": AGENT,
        "schema_version": 1,
        "epoch_id": 4,
        "message_count": 5,
        "size_bytes": len(SNAPSHOT),
    }
    exported = client.get(_url(project, "working-context-snapshot"))
    assert exported.content == SNAPSHOT
    assert exported.headers["etag"] == created.headers["etag"]
    assert exported.headers["content-type"] == "application/json"
    assert exported.headers["content-disposition"] == (
        'attachment; filename="working_context_snapshot.json"'
    )


def test_an_indented_snapshot_is_exported_as_the_writer_writes_it(client, project):
    document = _snapshot(x_unknown={"kept": "é"})
    document["messages"][0]["x_extra"] = [1, 2]
    assert _put(client, project, json.dumps(document, indent=2).encode()).status_code == 201
    exported = client.get(_url(project, "working-context-snapshot")).content
    assert exported == json.dumps(document).encode()
    assert b"\n" not in exported


@pytest.mark.parametrize(
    ("document", "path"),
    [
        (_snapshot(agent_id="agent_999"), "/agent_id"),
        (_snapshot(schema_version=2), "/schema_version"),
        (
            _snapshot(messages=[{**_snapshot()["messages"][0], "role": "narrator"}]),
            "/messages/0/role",
        ),
    ],
)
def test_invalid_snapshots_are_refused_and_store_nothing(client, project, document, path):
    body = assert_problem(_put(client, project, json.dumps(document).encode()), 422)
    assert [error["path"] for error in body["errors"]] == [path]
    assert_problem(client.get(_url(project, "working-context-snapshot")), 404)


def test_malformed_and_wrongly_typed_bodies(client, project):
    assert_problem(_put(client, project, b'{"schema_version": 1,'), 400)
    response = client.put(
        _url(project, "working-context-snapshot"),
        content=SNAPSHOT,
        headers={"Content-Type": "text/plain"},
    )
    assert_problem(response, 415)
    assert_problem(_put(client, project, SNAPSHOT, agent="bad agent"), 422)


def test_replace_conditional_requests_and_delete(client, project):
    first = _put(client, project, SNAPSHOT)
    assert_problem(_put(client, project, SNAPSHOT, **{"If-None-Match": "*"}), 412)
    changed = json.dumps(_snapshot(epoch_id=5)).encode()
    assert_problem(_put(client, project, changed, **{"If-Match": '"stale"'}), 412)
    replaced = _put(client, project, changed, **{"If-Match": first.headers["etag"]})
    assert replaced.status_code == 200
    assert replaced.json()["epoch_id"] == 5
    url = _url(project, "working-context-snapshot")
    unchanged = client.get(url, headers={"If-None-Match": replaced.headers["etag"]})
    assert unchanged.status_code == 304
    assert_problem(client.delete(url, headers={"If-Match": first.headers["etag"]}), 412)
    assert client.delete(url).status_code == 204
    assert_problem(client.get(url), 404)
    assert_problem(client.delete(url), 404)


@pytest.mark.parametrize("memory", list(REAL_MEMORY_FILES))
@pytest.mark.parametrize(
    "directory",
    [REAL_AGENT_DIR, GOLDEN / "autobyteus" / "before-second-compaction"],
    ids=["after-two-compactions", "after-one-compaction"],
)
def test_autobyteus_memory_files_round_trip_through_their_routes(
    client, project, directory, memory
):
    url = _url(project, f"memory/{memory}", REAL_AGENT)
    written = (directory / REAL_MEMORY_FILES[memory]).read_bytes()
    appended = client.post(url, content=written, headers={"Content-Type": NDJSON})
    assert appended.json() == {"appended": written.count(b"\n")}, appended.text
    exported = client.get(url, headers={"Accept": NDJSON})
    assert exported.content == written
    assert exported.headers["content-disposition"] == (
        f'attachment; filename="{REAL_MEMORY_FILES[memory]}"'
    )
    listed = client.get(url).json()["items"]
    assert listed == [json.loads(line) for line in written.splitlines()][:50]


@pytest.mark.parametrize(
    "snapshot",
    [
        REAL_AGENT_DIR / "working_context_snapshot.json",
        *sorted((GOLDEN / "autobyteus").rglob("*.json")),
    ],
    ids=lambda path: str(path.relative_to(GOLDEN)),
)
def test_autobyteus_snapshots_round_trip_through_their_route(client, project, snapshot):
    written = snapshot.read_bytes()
    agent = json.loads(written)["agent_id"]
    assert _put(client, project, written, agent).status_code == 201
    assert client.get(_url(project, "working-context-snapshot", agent)).content == written


@pytest.mark.parametrize("memory", list(MEMORY_FILES))
def test_memory_ndjson_in_and_out_byte_for_byte(client, project, memory):
    appended = _append_file(client, project, memory)
    assert appended.status_code == 201, appended.text
    expected = golden_bytes(f"autobyteus/{MEMORY_FILES[memory]}")
    assert appended.json() == {"appended": expected.count(b"\n")}
    exported = client.get(_url(project, f"memory/{memory}"), headers={"Accept": NDJSON})
    assert exported.content == expected
    assert exported.headers["content-type"] == NDJSON
    assert exported.headers["content-disposition"] == (
        f'attachment; filename="{MEMORY_FILES[memory]}"'
    )


def test_memory_lists_oldest_first_in_pages(client, project):
    _append_file(client, project, "raw-traces")
    lines = golden_bytes("autobyteus/raw_traces.jsonl").splitlines()
    items, cursor = [], None
    while True:
        params = {"limit": 4} | ({"cursor": cursor} if cursor else {})
        page = client.get(_url(project, "memory/raw-traces"), params=params).json()
        items += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert items == [json.loads(line) for line in lines]


def test_memory_appends_take_an_object_or_an_array(client, project):
    fact = {"id": "sem_1", "ts": 1.0, "fact": "A fact.", "confidence": 1, "salience": 0.5}
    url = _url(project, "memory/semantic")
    assert client.post(url, json=fact).json() == {"appended": 1}
    assert client.post(url, json=[fact, {**fact, "id": "sem_2"}]).json() == {"appended": 2}
    listed = client.get(url).json()["items"]
    assert [item["id"] for item in listed] == ["sem_1", "sem_1", "sem_2"]
    exported = client.get(url, headers={"Accept": NDJSON}).content
    assert exported == b"".join(json.dumps(i).encode() + b"\n" for i in listed)


def test_a_bad_item_refuses_the_whole_append(client, project):
    url = _url(project, "memory/episodic")
    good = {"id": "ep", "ts": 1.0, "turn_ids": ["t1"], "summary": "s", "salience": 0.1}
    body = assert_problem(client.post(url, json=[good, {**good, "turn_ids": "t1"}]), 422)
    assert body["errors"] == [{"path": "/1/turn_ids", "message": "must be an array of strings"}]
    assert_problem(client.post(url, content=b"{nope", headers={"Content-Type": NDJSON}), 400)
    assert_problem(client.post(url, content=b"x", headers={"Content-Type": "text/csv"}), 415)
    assert_problem(client.post(_url(project, "memory/procedural"), json=good), 422)
    # Nothing was written: not even the project came into being.
    assert_problem(client.get(url), 404)


def test_a_retried_append_with_the_same_key_appends_once(client, project):
    headers = {"Idempotency-Key": "append-1"}
    first = _append_file(client, project, "episodic", **headers)
    again = _append_file(client, project, "episodic", **headers)
    assert again.status_code == first.status_code == 201
    assert again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    listed = client.get(_url(project, "memory/episodic")).json()["items"]
    assert len(listed) == first.json()["appended"]


def test_restore_from_cache_restarts_at_epoch_2_and_keeps_the_messages(client, project):
    _put(client, project, SNAPSHOT)
    restored = _restore(client, project)
    assert restored.status_code == 200, restored.text
    body = restored.json()
    assert body["source"] == "cache"
    snapshot = body["snapshot"]
    # autobyteus restores into a new MemoryManager (epoch 1) and resets it once.
    assert snapshot["epoch_id"] == 2
    assert snapshot["messages"] == _snapshot()["messages"]
    assert isinstance(snapshot["last_compaction_ts"], float)
    assert snapshot["last_compaction_ts"] > 1738100000.0
    cached = client.get(_url(project, "working-context-snapshot"))
    assert cached.content == json.dumps(snapshot).encode()
    assert cached.headers["etag"] == restored.headers["etag"]
    assert _restore(client, project).json()["snapshot"]["epoch_id"] == 2


def _assert_as_reference(stored: bytes, reference: bytes) -> None:
    """``stored`` is byte for byte what autobyteus wrote, but for ``last_compaction_ts``: the
    time of the restore."""
    expected = json.loads(reference)
    expected["last_compaction_ts"] = json.loads(stored)["last_compaction_ts"]
    assert stored == json.dumps(expected).encode()


@pytest.mark.parametrize(
    ("cache", "reference"),
    [
        (REAL_AGENT_DIR / "working_context_snapshot.json", "restored-from-cache.json"),
        (GOLDEN / "autobyteus/cache-with-extras.json", "cache-with-extras.restored.json"),
    ],
    ids=["as-autobyteus-left-it", "with-unknown-fields-and-null-arguments"],
)
def test_restore_from_cache_writes_what_autobyteus_writes(client, project, cache, reference):
    assert _put(client, project, cache.read_bytes(), REAL_AGENT).status_code == 201
    restored = client.post(
        _url(project, "restore", REAL_AGENT), json={"system_prompt": "not used from a cache"}
    )
    assert restored.json()["source"] == "cache", restored.text
    stored = client.get(_url(project, "working-context-snapshot", REAL_AGENT)).content
    _assert_as_reference(stored, golden_bytes(f"autobyteus/{reference}"))
    assert restored.json()["snapshot"] == json.loads(stored)


def test_restore_by_rebuild_writes_what_autobyteus_writes(client, project):
    # The archive of pruned traces too: autobyteus never reads it back, and neither does this.
    for memory, filename in REAL_MEMORY_FILES.items():
        appended = client.post(
            _url(project, f"memory/{memory}", REAL_AGENT),
            content=(REAL_AGENT_DIR / filename).read_bytes(),
            headers={"Content-Type": NDJSON},
        )
        assert appended.status_code == 201, appended.text
    reference = golden_bytes("autobyteus/restored-by-rebuild.json")
    system_prompt = json.loads(reference)["messages"][0]["content"]
    restored = client.post(
        _url(project, "restore", REAL_AGENT), json={"system_prompt": system_prompt}
    )
    assert restored.json()["source"] == "rebuild", restored.text
    stored = client.get(_url(project, "working-context-snapshot", REAL_AGENT)).content
    _assert_as_reference(stored, reference)


def _fixture_memory(client, project):
    for memory in MEMORY_FILES:
        assert _append_file(client, project, memory).status_code == 201


def test_restore_by_rebuild_lays_the_summary_out_as_autobyteus(client, project):
    _fixture_memory(client, project)
    restored = _restore(client, project, {"system_prompt": "Système"})
    body = restored.json()
    assert body["source"] == "rebuild"
    assert body["reason"] == "no snapshot is cached"
    summary = golden_bytes("autobyteus/compaction-summary-default.txt").decode()
    media = {"reasoning_content": None, "image_urls": [], "audio_urls": [], "video_urls": []}
    assert body["snapshot"]["messages"] == [
        {"role": "system", "content": "Système", **media, "tool_payload": None},
        {"role": "user", "content": summary, **media, "tool_payload": None},
    ]
    assert list(body["snapshot"]) == [
        "schema_version",
        "agent_id",
        "epoch_id",
        "last_compaction_ts",
        "messages",
    ]
    assert body["snapshot"]["epoch_id"] == 2
    cached = client.get(_url(project, "working-context-snapshot")).content
    assert cached == json.dumps(body["snapshot"]).encode()
    assert _restore(client, project).json()["source"] == "cache"


def test_restore_limits_choose_the_latest_memory(client, project):
    _fixture_memory(client, project)
    options = {"system_prompt": "S", "max_episodic": 1, "max_semantic": 0, "raw_tail_turns": 1}
    summary = _restore(client, project, options).json()["snapshot"]["messages"][1]["content"]
    assert summary == (
        "[MEMORY:EPISODIC]\n"
        "1) Turn four: tests started — 完了.\n\n"
        "[RECENT TURNS]\n"
        "(turn_0005:1) USER: Thanks\n"
        "(turn_0005:2) ASSISTANT: Done.\n"
        "(turn_0005:3) TOOL_CALL: ls {'dir': '.'}"
    )


def test_restore_with_no_memory_is_the_system_prompt_alone(client, project):
    messages = _restore(client, project).json()["snapshot"]["messages"]
    assert [(m["role"], m["content"]) for m in messages] == [("system", "System prompt")]


# Longer than any index entry may be: turns are indexed by a hash of their id.
LONG_TURN = "turn-" + "x" * 5000


def _line(turn: str, seq: int) -> str:
    return f"({turn}:{seq}) USER: {turn} {seq}"


def test_restore_chooses_the_last_turns_by_first_appearance_across_appends(
    client, engine, tenant, project
):
    url = _url(project, "memory/raw-traces")
    # Turns go on after later turns have begun, within one append and across appends.
    appends = [
        [("a", 1), ("b", 1), ("a", 2), (LONG_TURN, 1)],
        [("b", 2), ("d", 1), ("a", 3)],
        [(LONG_TURN, 2)],
        [("d", 2), ("b", 3)],
    ]
    for traces in appends:
        response = client.post(url, json=[raw_trace(turn, seq) for turn, seq in traces])
        assert response.status_code == 201, response.text
    assert recent_turns(client, project, AGENT, 0) == []
    assert recent_turns(client, project, AGENT, 1) == [_line("d", 1), _line("d", 2)]
    assert recent_turns(client, project, AGENT, 2) == [
        _line(LONG_TURN, 1),
        _line(LONG_TURN, 2),
        _line("d", 1),
        _line("d", 2),
    ]
    everything = [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2), ("b", 3)]
    everything += [(LONG_TURN, 1), (LONG_TURN, 2), ("d", 1), ("d", 2)]
    assert recent_turns(client, project, AGENT, 3) == [_line(*t) for t in everything[3:]]
    assert recent_turns(client, project, AGENT, 9) == [_line(*t) for t in everything]
    # One row a turn, pointing at its first trace.
    with engine.connect() as connection:
        firsts = connection.execute(
            text(
                "SELECT i.turn_id FROM agent_memory_turns t "
                "JOIN agent_memory_items i ON i.id = t.first_item_id "
                "JOIN projects p ON p.id = t.project_id "
                "WHERE p.tenant = :tenant AND p.name = :name ORDER BY t.first_item_id"
            ),
            {"tenant": tenant, "name": project},
        ).scalars()
        assert list(firsts) == ["a", "b", LONG_TURN, "d"]


def test_turns_whose_keys_collide_never_mix(client, project, monkeypatch):
    # Every turn gets the same key: only the first is registered, and the others' traces,
    # which carry its key, are still not taken for its own.
    monkeypatch.setattr(repository, "turn_key", lambda turn_id: "0" * 64)
    traces = [raw_trace("a", 1), raw_trace("b", 1), raw_trace("a", 2)]
    assert client.post(_url(project, "memory/raw-traces"), json=traces).status_code == 201
    assert recent_turns(client, project, AGENT, 4) == [_line("a", 1), _line("a", 2)]


def test_turn_ids_no_database_can_store_are_kept_apart_and_exported_as_sent(client, project):
    # Lone surrogates (JSON's "\\ud800") are valid JSON but not storable text on either
    # database; two ids differing only in them are still two turns.
    traces = [raw_trace("x\ud800", 1), raw_trace("x\udbff", 1), raw_trace("\u0000y", 1)]
    sent = "".join(json.dumps(trace) + "\n" for trace in traces).encode()
    url = _url(project, "memory/raw-traces")
    appended = client.post(url, content=sent, headers={"Content-Type": "application/x-ndjson"})
    assert appended.status_code == 201, appended.text
    assert recent_turns(client, project, AGENT, 2) == [_line("x\udbff", 1), _line("\u0000y", 1)]
    exported = client.get(url, headers={"Accept": "application/x-ndjson"})
    assert exported.content == sent


def _corrupt_cache(engine, tenant, project, content: bytes) -> None:
    with engine.begin() as connection:
        connection.execute(
            text(
                "UPDATE agent_snapshots SET content = :content WHERE agent = :agent AND "
                "project_id = (SELECT id FROM projects WHERE tenant = :tenant AND name = :name)"
            ),
            {"content": content, "agent": AGENT, "tenant": tenant, "name": project},
        )


@pytest.mark.parametrize(
    ("stored", "reason"),
    [
        (json.dumps(_snapshot(schema_version=9)).encode(), "schema_version 9 is not supported"),
        (json.dumps(_snapshot(agent_id="someone")).encode(), "/agent_id"),
        (b"{not json", "not well-formed JSON"),
    ],
)
def test_an_invalid_stored_cache_falls_back_to_rebuild(
    client, engine, tenant, project, stored, reason
):
    _fixture_memory(client, project)
    _put(client, project, SNAPSHOT)
    _corrupt_cache(engine, tenant, project, stored)
    body = _restore(client, project).json()
    assert body["source"] == "rebuild"
    assert reason in body["reason"]
    assert body["snapshot"]["messages"][1]["content"].startswith("[MEMORY:EPISODIC]")
    # Whatever epoch the cache held: a restore starts a new MemoryManager.
    assert body["snapshot"]["epoch_id"] == 2


def test_restore_validates_its_options_and_honours_if_match(client, project):
    assert_problem(_restore(client, project, {"max_episodic": 3}), 422)
    body = {"system_prompt": "S", "raw_tail_turns": -1}
    assert_problem(_restore(client, project, body), 422)
    _put(client, project, SNAPSHOT)
    assert_problem(_restore(client, project, None, **{"If-Match": '"stale"'}), 412)


def test_a_retried_restore_with_the_same_key_restores_once(client, project):
    _put(client, project, SNAPSHOT)
    first = _restore(client, project, None, **{"Idempotency-Key": "restore-1"})
    again = _restore(client, project, None, **{"Idempotency-Key": "restore-1"})
    assert again.content == first.content
    # A second restore would have stored a later last_compaction_ts.
    cached = client.get(_url(project, "working-context-snapshot"))
    assert cached.content == json.dumps(first.json()["snapshot"]).encode()


def test_concurrent_restores_each_store_a_whole_snapshot(app, tenant, project):
    key = create_key(app, tenant)
    _put(client_for(app, key), project, SNAPSHOT)
    snapshots: list[bytes] = []

    def restore_once() -> None:
        response = _restore(client_for(app, key), project)
        assert response.status_code == 200, response.text
        assert response.json()["source"] == "cache"
        snapshots.append(json.dumps(response.json()["snapshot"]).encode())

    threads = [threading.Thread(target=restore_once) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(snapshots) == 8
    assert {json.loads(snapshot)["epoch_id"] for snapshot in snapshots} == {2}
    # The cache is the last restore's, never a mix of two.
    cached = client_for(app, key).get(_url(project, "working-context-snapshot")).content
    assert cached in snapshots


def test_concurrent_appends_lose_nothing(app, tenant, project):
    key = create_key(app, tenant)

    def append(index: int) -> None:
        fact = {"id": f"sem_{index}", "ts": 1.0, "fact": "f", "confidence": 1, "salience": 1}
        response = client_for(app, key).post(_url(project, "memory/semantic"), json=fact)
        assert response.status_code == 201, response.text

    threads = [threading.Thread(target=append, args=(i,)) for i in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    listed = client_for(app, key).get(_url(project, "memory/semantic")).json()["items"]
    assert sorted(item["id"] for item in listed) == sorted(f"sem_{i}" for i in range(10))


def test_other_tenants_see_nothing(client, other_client, project):
    _put(client, project, SNAPSHOT)
    _append_file(client, project, "semantic")
    assert_problem(other_client.get(_url(project, "working-context-snapshot")), 404)
    assert_problem(other_client.get(_url(project, "memory/semantic")), 404)
    assert_problem(other_client.delete(_url(project, "working-context-snapshot")), 404)
    assert client.get(_url(project, "working-context-snapshot")).content == SNAPSHOT


def test_project_counts_and_deletion_cover_agents(client, project):
    _put(client, project, SNAPSHOT)
    _append_file(client, project, "semantic")
    counts = client.get(f"/v1/projects/{project}").json()["counts"]
    assert counts["working_context_snapshots"] == 1
    assert counts["agent_memory_items"] == 2
    assert client.delete(f"/v1/projects/{project}").status_code == 204
    _append_file(client, project, "episodic")
    counts = client.get(f"/v1/projects/{project}").json()["counts"]
    assert counts["working_context_snapshots"] == 0
    assert counts["agent_memory_items"] == 4
    assert client.get(_url(project, "memory/semantic")).json()["items"] == []


def test_a_rebuild_is_built_before_its_write_takes_any_lock(client, project, monkeypatch):
    """A restore reads and builds with no lock held, then writes: made in its write, a
    rebuild of 4,000 items of 40 KB took 8-12 s and held every tenant's writes on SQLite
    (a helper's run, 2026-11-27). Nor is it built in a write turn's thread, which on SQLite
    every tenant's small writes wait for."""
    writing: set[int] = set()
    run = route.Writes.run

    def watched_run(self: route.Writes, *args: object, **kwargs: object) -> object:
        writing.add(threading.get_ident())
        try:
            return run(self, *args, **kwargs)
        finally:
            writing.discard(threading.get_ident())

    # Where each build ran: (in a write, in a write turn's thread).
    built: list[tuple[bool, bool]] = []
    build = compaction.build_messages

    def watched_build(*args: object, **kwargs: object) -> object:
        turn = threading.current_thread().name.startswith("context-store-write")
        built.append((threading.get_ident() in writing, turn))
        return build(*args, **kwargs)

    fact = {"id": "sem_1", "ts": 1.0, "fact": "A fact.", "confidence": 1, "salience": 0.5}
    assert client.post(_url(project, "memory/semantic"), json=fact).status_code == 201
    monkeypatch.setattr(route.Writes, "run", watched_run)
    monkeypatch.setattr(compaction, "build_messages", watched_build)
    restored = _restore(client, project)
    assert restored.status_code == 200, restored.text
    assert restored.json()["source"] == "rebuild"
    assert "A fact." in json.dumps(restored.json()["snapshot"])
    assert built == [(False, False)]


def test_a_restore_whose_cache_changed_after_its_plan_plans_again(
    client, project, engine, monkeypatch
):
    """The plan's cache is compared with the one the write locks: changed meanwhile, the
    plan is made again rather than overwrite what was written."""
    assert _put(client, project, SNAPSHOT).status_code in (200, 201)
    plan = agents_service.plan_restore
    plans: list[str | None] = []

    def plan_then_change(*args: object, **kwargs: object) -> agents_service.PlannedRestore:
        planned = plan(*args, **kwargs)  # type: ignore[arg-type]
        plans.append(planned.read_etag)
        if len(plans) == 1:
            with engine.begin() as connection:
                connection.execute(
                    text(
                        "UPDATE agent_snapshots SET etag = 'changed' WHERE project_id = "
                        "(SELECT id FROM projects WHERE name = :project)"
                    ),
                    {"project": project},
                )
        return planned

    monkeypatch.setattr(agents_service, "plan_restore", plan_then_change)
    restored = _restore(client, project)
    assert restored.status_code == 200, restored.text
    assert len(plans) == 2 and plans[0] != "changed" and plans[1] == "changed"


def test_a_memory_file_sent_whole_takes_an_export_turn_until_it_is_sent(
    app, client, tenant, project, monkeypatch
):
    """An agent's memory file sent whole (NDJSON) grows without bound: it takes one of the
    tenant's export turns, as an archive does, held until the file is sent (or a 304 is);
    beyond them a 429 with Retry-After. A page of the JSON form takes none."""
    turns = app.state.archive_exports
    one_turn_without_wait(turns, monkeypatch)
    url = _url(project, "memory/raw-traces")
    assert client.post(url, json=[raw_trace("t", 1), raw_trace("t", 2)]).status_code == 201
    whole = {"Accept": NDJSON}
    held = anyio.run(turns.take, tenant)
    refused = client.get(url, headers=whole)
    assert_problem(refused, 429)
    assert refused.headers["Retry-After"] == "5"
    assert client.get(url).status_code == 200
    held.release()
    sent = client.get(url, headers=whole)
    assert sent.status_code == 200 and sent.content.count(b"\n") == 2
    assert turns.total == 0
    unchanged = client.get(url, headers=whole | {"If-None-Match": sent.headers["ETag"]})
    assert unchanged.status_code == 304
    assert turns.total == 0


def test_a_page_of_memory_is_made_in_a_worker_thread(client, project, monkeypatch):
    """A page's lines holding NaN are parsed and written again (85 ms of CPU for 500 lines of
    100 KB): in a worker thread, never on the event loop every request shares."""
    url = _url(project, "memory/raw-traces")
    trace = raw_trace("t", 1) | {"content": "NaN"}
    assert client.post(url, json=[trace]).status_code == 201
    threads: list[str] = []
    splice = agents_router.spliceable

    def watched(line: bytes) -> bytes:
        threads.append(threading.current_thread().name)
        return splice(line)

    monkeypatch.setattr(agents_router, "spliceable", watched)
    assert client.get(url).status_code == 200
    assert threads == ["AnyIO worker thread"], threads


def test_a_whole_file_is_sent_and_its_turn_given_back_when_the_reads_rollback_fails(
    app, client, project, monkeypatch
):
    """FastAPI ends the read session after the route has returned and before the answer is
    sent: a rollback that failed there (the connection lost since the read) lost the answer,
    and the export's turn, given back only when its response ends, was held until restart."""
    url = _url(project, "memory/raw-traces")
    assert client.post(url, json=[raw_trace("t", 1)]).status_code == 201
    assert client.get(url, headers={"Accept": NDJSON}).status_code == 200  # the key cached

    def lost(_session: Session) -> None:
        raise OperationalError("ROLLBACK", {}, Exception("server closed the connection"))

    monkeypatch.setattr(Session, "rollback", lost)
    sent = client.get(url, headers={"Accept": NDJSON})
    assert sent.status_code == 200 and sent.content.count(b"\n") == 1
    assert app.state.archive_exports.total == 0
