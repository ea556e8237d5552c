"""atari run state through the API, on SQLite and PostgreSQL."""

import json
import re
import threading

import pytest

from app.formats import atari_state
from tests.conftest import client_for, create_key
from tests.helpers import assert_problem, go_written_atari_states, golden_bytes

SEED = "atari-state-seed-example.json"


def _url(project: str, run: str = "default", suffix: str = "/state") -> str:
    return f"/v1/projects/{project}/runs/{run}{suffix}"


def _put(client, project, content, run="default", **headers):
    body = content if isinstance(content, bytes) else json.dumps(content).encode()
    headers = {"Content-Type": "application/json", **headers}
    return client.put(_url(project, run), content=body, headers=headers)


def _load(client, project, content: bytes, run="default"):
    headers = {"Content-Type": "application/octet-stream"}
    return client.post(_url(project, run, "/state:load"), content=content, headers=headers)


def _seed() -> dict:
    return json.loads(golden_bytes(SEED))


def _state(client, project, run="default") -> dict:
    response = client.get(_url(project, run))
    assert response.status_code == 200, response.text
    return response.json()


def _start(client, project, run="default", **body):
    return client.post(_url(project, run, "/iterations"), json=body)


def _end(client, project, run="default", **body):
    return client.post(_url(project, run, "/iterations/end"), json=body)


def test_the_seed_example_round_trips_byte_for_byte(client, project):
    created = _put(client, project, golden_bytes(SEED))
    assert created.status_code == 201, created.text
    receipt = created.json()
    assert receipt["version"] == 1 and receipt["iteration"] == 5
    assert receipt["current_bead"] == "bd-123" and receipt["notices"] == []
    exported = client.get(_url(project), headers={"Accept-Encoding": "identity"})
    assert exported.content == golden_bytes(SEED)
    assert exported.headers["content-type"] == "application/json"
    assert exported.headers["content-disposition"] == 'attachment; filename="state.json"'
    assert exported.headers["etag"] == created.headers["etag"] == receipt["etag"]
    assert _put(client, project, golden_bytes(SEED)).status_code == 200


def test_export_is_what_go_writes_for_the_document(client, project):
    assert _put(client, project, golden_bytes("atari-state-v2-input.json")).status_code == 201
    exported = client.get(_url(project)).content
    assert exported == golden_bytes("atari-state-v2.json")
    assert "Résumé \\u003cexport\\u003e \\u0026 import".encode() in exported
    assert not exported.endswith(b"\n")


def test_unknown_fields_survive_after_the_known_ones(client, project):
    document = {"x_tool": {"z": 1, "a": [True, None]}, **_seed()}
    document["history"]["bd-002"]["x_note"] = "kept"
    _put(client, project, document)
    exported = client.get(_url(project)).content.decode()
    assert json.loads(exported) == document
    assert exported.endswith(
        '"x_tool": {\n    "z": 1,\n    "a": [\n      true,\n      null\n    ]\n  }\n}'
    )
    assert list(json.loads(exported)["history"]["bd-002"])[-1] == "x_note"


def test_empty_optional_fields_are_dropped_and_reported(client, project):
    receipt = _put(client, project, {**_seed(), "current_bead": ""}).json()
    assert receipt["notices"] == [{"path": "/current_bead", "message": "empty; atari omits it"}]
    assert receipt["current_bead"] is None
    assert "current_bead" not in _state(client, project)


@pytest.mark.parametrize(
    ("content", "status"),
    [
        (b'{"version": 1,', 400),
        (b"\xff\xfe\x00", 400),
        (b"", 400),
        (json.dumps({**_seed(), "version": 3}).encode(), 422),
        (json.dumps({**_seed(), "iteration": "6"}).encode(), 422),
        (json.dumps({**_seed(), "total_cost": None}).encode(), 422),
        (json.dumps({**_seed(), "updated_at": "yesterday"}).encode(), 422),
        (json.dumps({"version": 2}).encode(), 422),
        (b"[]", 422),
    ],
)
def test_a_body_that_is_not_a_valid_state_changes_nothing(client, project, content, status):
    _put(client, project, golden_bytes(SEED))
    before = client.get(_url(project))
    assert_problem(_put(client, project, content), status)
    after = client.get(_url(project))
    assert after.content == before.content and after.headers["etag"] == before.headers["etag"]


def test_faults_are_named_by_pointer(client, project):
    document = _seed()
    document["history"]["bd-001"]["attempts"] = 1.5
    body = assert_problem(_put(client, project, document), 422)
    assert body["errors"] == [{"path": "/history/bd-001/attempts", "message": "must be an integer"}]


def test_put_honours_if_none_match_and_if_match(client, project):
    etag = _put(client, project, golden_bytes(SEED)).headers["etag"]
    assert_problem(_put(client, project, golden_bytes(SEED), **{"If-None-Match": "*"}), 412)
    assert_problem(_put(client, project, _seed(), run="other", **{"If-Match": etag}), 412)
    changed = _put(client, project, {**_seed(), "status": "paused"}, **{"If-Match": etag})
    assert changed.status_code == 200
    assert_problem(_put(client, project, _seed(), **{"If-Match": etag}), 412)
    assert _state(client, project)["status"] == "paused"


def test_get_honours_if_none_match(client, project):
    etag = _put(client, project, golden_bytes(SEED)).headers["etag"]
    assert client.get(_url(project), headers={"If-None-Match": etag}).status_code == 304


def test_load_stores_the_current_version(client, project):
    raw = golden_bytes("atari-state-v2.json")
    result = _load(client, project, raw).json()
    assert result["outcome"] == "stored" and result["file_version"] == 2
    assert result["backup_size"] is None and result["state"]["has_backup"] is False
    assert client.get(_url(project)).content == raw
    assert_problem(client.get(_url(project, suffix="/state/backup")), 404)


def test_load_migrates_version_1_to_2(client, project):
    result = _load(client, project, golden_bytes(SEED)).json()
    assert result["outcome"] == "migrated" and result["file_version"] == 1
    assert result["state"]["version"] == 2
    assert client.get(_url(project)).content == golden_bytes("atari/seed-migrated.json")


def test_load_fills_what_go_would_leave_at_zero_and_says_so(client, project):
    result = _load(client, project, b'{"version": 2, "status": "running"}').json()
    assert result["outcome"] == "stored"
    assert {"path": "/history", "message": "missing; Go's zero value used"} in result["notices"]
    assert _state(client, project)["updated_at"] == "0001-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("raw", "file_version"),
    [
        (b"\x00\xff{corrupt \x80 bytes\r\n", None),
        (b'{"version": 2, "iteration": "five"}', None),
        (b'{"status": "running", "history": {}}', 0),
        (b'{"version": 0}', 0),
        (json.dumps({**_seed(), "version": 7}).encode(), 7),
        (b"", None),
    ],
)
def test_load_keeps_what_it_cannot_use_as_the_exact_backup_and_resets(
    client, project, raw, file_version
):
    _put(client, project, golden_bytes(SEED))
    response = _load(client, project, raw)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["outcome"] == "reset" and result["file_version"] == file_version
    assert result["backup_size"] == len(raw) and result["state"]["has_backup"] is True
    backup = client.get(_url(project, suffix="/state/backup"))
    assert backup.status_code == 200
    assert backup.content == raw
    assert backup.headers["content-type"] == "application/octet-stream"
    assert backup.headers["content-disposition"] == 'attachment; filename="state.json.backup"'
    state = _state(client, project)
    assert list(state) == ["version", "status", "iteration", "history", "total_cost"] + [
        "total_turns",
        "updated_at",
        "stalled_at",
    ]
    assert state["stalled_at"] == "0001-01-01T00:00:00Z"
    assert state["version"] == 2 and state["iteration"] == 0 and state["history"] == {}
    assert atari_state.is_rfc3339(state["updated_at"]) and state["updated_at"].endswith("Z")


def test_a_load_without_a_body_is_422_and_keeps_the_state(client, project):
    """Found by the fuzzer: no body at all was loaded as an empty file, resetting the run."""
    _put(client, project, golden_bytes(SEED))
    before = client.get(_url(project)).content
    assert_problem(client.post(_url(project, suffix="/state:load")), 422)
    assert client.get(_url(project)).content == before
    assert client.get(_url(project, suffix="/state/backup")).status_code == 404


def test_a_later_good_load_keeps_the_backup(client, project):
    _load(client, project, b"garbage")
    _load(client, project, golden_bytes(SEED))
    assert client.get(_url(project, suffix="/state/backup")).content == b"garbage"


def test_start_increments_and_records_the_attempt(client, project):
    _put(client, project, golden_bytes(SEED))
    response = _start(client, project, bead_id="bd-002")
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["state"]["iteration"] == 6 and result["state"]["current_bead"] == "bd-002"
    assert result["entry"]["status"] == "working" and result["entry"]["attempts"] == 4
    assert result["entry"]["last_error"] == "tests failed"
    assert response.headers["etag"] == client.get(_url(project)).headers["etag"]
    state = _state(client, project)
    assert state["history"]["bd-002"]["last_attempt"] == state["updated_at"]
    assert atari_state.is_rfc3339(state["updated_at"]) and state["updated_at"].endswith("Z")


def test_start_of_a_new_bead_creates_its_entry_with_the_given_attempt_and_time(client, project):
    _put(client, project, golden_bytes(SEED))
    at = "2024-01-15T12:00:00.5+01:00"
    _start(client, project, bead_id="bd-new", attempt=3, at=at)
    entry = _state(client, project)["history"]["bd-new"]
    assert entry == {"id": "bd-new", "status": "working", "attempts": 3, "last_attempt": at}


def test_start_on_a_run_without_state_starts_from_a_fresh_one(client, project):
    result = _start(client, project, run="fresh", bead_id="bd-1").json()
    assert result["state"]["version"] == 2 and result["state"]["iteration"] == 1
    assert result["entry"]["attempts"] == 1


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"bead_id": "../x"},
        {"bead_id": "bd-1", "attempt": -1},
        {"bead_id": "bd-1", "attempt": 2**63},
        {"bead_id": "bd-1", "attempt": "2"},
        {"bead_id": "bd-1", "at": "noon"},
        {"bead_id": "bd-1", "extra": True},
    ],
)
def test_a_bad_start_is_a_422(client, project, body):
    assert_problem(_start(client, project, **body), 422)


def test_end_sets_the_outcome_and_counts_cost_once_per_session(client, project):
    _put(client, project, golden_bytes(SEED))
    _start(client, project, bead_id="bd-123")
    ended = _end(
        client,
        project,
        bead_id="bd-123",
        outcome="failed",
        error="lint <failed>",
        session_id="sess-9",
        cost=0.5,
        turns=7,
    )
    assert ended.status_code == 200, ended.text
    assert ended.json()["counted"] is True
    state = _state(client, project)
    assert "current_bead" not in state
    assert state["total_cost"] == 1.75 and state["total_turns"] == 157
    assert state["history"]["bd-123"]["status"] == "failed"
    assert state["history"]["bd-123"]["last_error"] == "lint <failed>"
    assert state["history"]["bd-123"]["last_session_id"] == "sess-9"
    assert b'"last_error": "lint \\u003cfailed\\u003e"' in client.get(_url(project)).content
    again = _end(
        client, project, bead_id="bd-123", outcome="completed", session_id="sess-9", cost=0.5
    ).json()
    assert again["counted"] is False and again["entry"]["status"] == "completed"
    assert again["entry"]["last_error"] == "lint <failed>"
    assert _state(client, project)["total_cost"] == 1.75


def test_a_failure_without_an_error_clears_the_last_error(client, project):
    _put(client, project, golden_bytes(SEED))
    entry = _end(client, project, bead_id="bd-002", outcome="failed").json()["entry"]
    assert entry["last_error"] is None
    assert "last_error" not in _state(client, project)["history"]["bd-002"]


def test_end_of_a_bead_never_started_is_a_409_and_changes_nothing(client, project):
    etag = _put(client, project, golden_bytes(SEED)).headers["etag"]
    assert_problem(_end(client, project, bead_id="bd-999", outcome="completed", cost=1), 409)
    assert client.get(_url(project)).headers["etag"] == etag


@pytest.mark.parametrize(
    "body",
    [
        {"bead_id": "bd-001", "outcome": "done"},
        {"bead_id": "bd-001", "outcome": "completed", "error": "x"},
        {"bead_id": "bd-001", "outcome": "completed", "cost": -1},
        {"bead_id": "bd-001", "outcome": "completed", "turns": 1.5},
        {"bead_id": "bd-001", "outcome": "completed", "session_id": ""},
    ],
)
def test_a_bad_end_is_a_422(client, project, body):
    _put(client, project, golden_bytes(SEED))
    assert_problem(_end(client, project, **body), 422)


@pytest.mark.parametrize("session_id", ["sess\x00ion", "sess\udc00ion"])
def test_a_session_id_no_database_can_hold_is_the_same_422_on_both(client, project, session_id):
    """It is a key column of the counted sessions: refused by the route, with where, rather
    than stored by SQLite and refused by PostgreSQL itself."""
    etag = _put(client, project, golden_bytes(SEED)).headers["etag"]
    body = {"bead_id": "bd-001", "outcome": "completed", "session_id": session_id, "cost": 1}
    response = client.post(
        _url(project, suffix="/iterations/end"),
        content=json.dumps(body).encode(),  # \u0000 and \udc00 as JSON escapes
        headers={"Content-Type": "application/json"},
    )
    problem = assert_problem(response, 422)
    assert [error["path"] for error in problem["errors"]] == ["/session_id"]
    assert client.get(_url(project)).headers["etag"] == etag


def test_totals_that_would_overflow_are_a_409(client, project):
    _put(client, project, {**_seed(), "total_turns": 2**63 - 1})
    body = {"bead_id": "bd-001", "outcome": "completed", "turns": 1}
    assert_problem(_end(client, project, **body), 409)


def test_end_on_a_run_without_state_is_a_404(client, project):
    _put(client, project, golden_bytes(SEED))
    assert_problem(_end(client, project, run="none", bead_id="bd-1", outcome="failed"), 404)


def test_a_start_retry_with_the_same_idempotency_key_counts_once(client, project):
    _put(client, project, golden_bytes(SEED))
    headers = {"Idempotency-Key": "start-1"}
    url = _url(project, suffix="/iterations")
    first = client.post(url, json={"bead_id": "bd-001"}, headers=headers)
    second = client.post(url, json={"bead_id": "bd-001"}, headers=headers)
    assert second.headers["idempotent-replayed"] == "true"
    assert second.json() == first.json()
    assert _state(client, project)["iteration"] == 6


def test_an_end_with_an_idempotency_key_changes_the_entry_it_read_with_the_run(client, project):
    """With a key the write's ORM session is made before the run is read (the key's claim),
    so the run and its bead's stored entry come through the session's look-up, not the
    connection's: the entry it changes is the stored one, and a retry counts once."""
    _put(client, project, golden_bytes(SEED))
    assert _start(client, project, bead_id="bd-001").status_code == 200
    attempts = _state(client, project)["history"]["bd-001"]["attempts"]
    headers = {"Idempotency-Key": "end-1"}
    url = _url(project, suffix="/iterations/end")
    body = {"bead_id": "bd-001", "outcome": "failed", "error": "tests failed", "turns": 3}
    first = client.post(url, json=body, headers=headers)
    again = client.post(url, json=body, headers=headers)
    assert first.status_code == again.status_code == 200, first.text
    assert again.headers["idempotent-replayed"] == "true"
    state = _state(client, project)
    entry = state["history"]["bd-001"]
    assert (entry["status"], entry["last_error"]) == ("failed", "tests failed")
    assert entry["attempts"] == attempts
    assert state["total_turns"] == json.loads(golden_bytes(SEED))["total_turns"] + 3


def test_patch_sets_and_clears_the_top_level_and_stall_fields(client, project):
    etag = _put(client, project, golden_bytes(SEED)).headers["etag"]
    patch = {
        "status": "stalled",
        "active_top_level": None,
        "active_top_level_title": "",
        "stalled_bead_id": "bd-002",
        "stalled_at": "2024-01-15T11:10:00Z",
        "stall_type": "review",
        "created_beads": ["bd-200", "bd-201"],
    }
    response = client.patch(_url(project), json=patch, headers={"If-Match": etag})
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "stalled"
    state = _state(client, project)
    assert "active_top_level" not in state and "active_top_level_title" not in state
    assert list(state)[-4:] == ["stalled_bead_id", "stalled_at", "stall_type", "created_beads"]
    assert state["created_beads"] == ["bd-200", "bd-201"]
    assert_problem(client.patch(_url(project), json={}, headers={"If-Match": etag}), 412)


@pytest.mark.parametrize(
    "patch",
    [{"status": None}, {"stalled_at": "later"}, {"version": 3}, {"created_beads": [1]}],
)
def test_a_bad_patch_is_a_422(client, project, patch):
    _put(client, project, golden_bytes(SEED))
    assert_problem(client.patch(_url(project), json=patch), 422)
    assert client.get(_url(project)).content == golden_bytes(SEED)


def test_runs_are_listed_most_recently_written_first_with_their_totals(client, project):
    for run in ("a", "b", "c"):
        _put(client, project, golden_bytes(SEED), run=run)
    _start(client, project, run="a", bead_id="bd-7")
    first = client.get(f"/v1/projects/{project}/runs", params={"limit": 2}).json()
    assert [item["run"] for item in first["items"]] == ["a", "c"]
    assert first["items"][0]["iteration"] == 6 and first["items"][0]["current_bead"] == "bd-7"
    assert first["items"][1]["total_cost"] == 1.25 and first["items"][1]["total_turns"] == 150
    rest = client.get(
        f"/v1/projects/{project}/runs", params={"cursor": first["next_cursor"]}
    ).json()
    assert [item["run"] for item in rest["items"]] == ["b"] and rest["next_cursor"] is None
    assert client.get(f"/v1/projects/{project}").json()["counts"]["runs"] == 3


def test_delete_removes_the_run(client, project):
    etag = _put(client, project, golden_bytes(SEED)).headers["etag"]
    assert_problem(client.delete(_url(project, suffix=""), headers={"If-Match": '"x"'}), 412)
    assert client.delete(_url(project, suffix=""), headers={"If-Match": etag}).status_code == 204
    assert_problem(client.get(_url(project)), 404)


def test_another_tenant_sees_nothing(client, other_client, project):
    _put(client, project, golden_bytes(SEED))
    assert_problem(other_client.get(_url(project)), 404)
    assert_problem(other_client.get(f"/v1/projects/{project}/runs"), 404)
    _put(other_client, project, {**_seed(), "status": "theirs"})
    assert _state(client, project)["status"] == "running"


def test_a_bad_run_name_is_a_422(client, project):
    assert_problem(client.get(f"/v1/projects/{project}/runs/-bad/state"), 422)


def test_concurrent_starts_lose_no_update(app, tenant, project):
    key = create_key(app, tenant)
    clients = [client_for(app, key) for _ in range(16)]
    _put(clients[0], project, {**_seed(), "iteration": 0, "history": {}})
    beads = [f"bd-{n % 4}" for n in range(64)]
    failures: list[str] = []

    def work(worker: int) -> None:
        for bead in beads[worker::16]:
            response = _start(clients[worker], project, bead_id=bead)
            if response.status_code != 200:
                failures.append(response.text)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    state = _state(clients[0], project)
    assert state["iteration"] == 64
    assert sum(entry["attempts"] for entry in state["history"].values()) == 64
    assert sorted(state["history"]) == ["bd-0", "bd-1", "bd-2", "bd-3"]


# Every state the service writes is what atari's Go writer writes for the same values: the
# files under golden/atari/ were written by Go's json.MarshalIndent of a struct with atari's
# field tags (tests/formats/generators/atari_state.sh), from the same steps and values as these
# tests. Where the service must write "now" (`updated_at` on reset, iterations and PATCH), the
# file's `updated_at` is replaced by the one the service wrote; nothing else is.

_UPDATED_AT = re.compile(rb'^  "updated_at": "[^"]*",$', re.MULTILINE)


def _ok(response) -> None:
    assert response.status_code == 200, response.text


def assert_written_as_go_writes(exported: bytes, golden: str) -> None:
    """``exported`` is the golden file, but for the ``updated_at`` the service set to now."""
    written = json.loads(exported)["updated_at"]
    assert atari_state.is_rfc3339(written) and written.endswith("Z")
    expected = golden_bytes(golden)
    assert len(_UPDATED_AT.findall(expected)) == 1
    assert exported == _UPDATED_AT.sub(f'  "updated_at": "{written}",'.encode(), expected)


def test_a_reset_writes_the_fresh_state_as_atari_does(client, project):
    assert _load(client, project, b"{not json").json()["outcome"] == "reset"
    assert_written_as_go_writes(client.get(_url(project)).content, "atari/reset.json")


def test_iterations_and_stalls_write_what_atari_writes(client, project):
    _load(client, project, golden_bytes(SEED))
    _ok(_start(client, project, bead_id="bd-002", at="2024-01-15T12:00:00Z"))
    assert_written_as_go_writes(client.get(_url(project)).content, "atari/seed-started.json")

    end = {
        "bead_id": "bd-002",
        "outcome": "failed",
        "error": "lint <failed> & more\u2028",
        "session_id": "sess-\U0001f600",
        "cost": 0.1,
        "turns": 7,
    }
    _ok(_end(client, project, **end))
    assert_written_as_go_writes(client.get(_url(project)).content, "atari/seed-ended.json")

    stall = {
        "status": "stalled",
        "stalled_bead_id": "bd-002",
        "stalled_bead_title": "Flaky <test> & 中文 \U0001f600",
        "stall_reason": "max failures reached",
        "stalled_at": "2024-01-15T12:30:00.25+01:00",
        "stall_type": "review",
        "created_beads": ["bd-200", "bd-201"],
    }
    _ok(client.patch(_url(project), json=stall))
    assert_written_as_go_writes(client.get(_url(project)).content, "atari/seed-stalled.json")

    cleared = {name: None for name in stall if name != "status"} | {"status": "running"}
    _ok(client.patch(_url(project), json=cleared))
    assert_written_as_go_writes(client.get(_url(project)).content, "atari/seed-stall-cleared.json")


def test_iterations_on_a_run_without_state_write_what_atari_writes(client, project):
    attempts = [
        ("2024-02-01T09:00:00Z", "failed", "sess-1", 0.1, 3),
        ("2024-02-01T09:30:00.123456789Z", "completed", "sess-2", 0.2, 4),
    ]
    for at, outcome, session_id, cost, turns in attempts:
        _ok(_start(client, project, run="fresh", bead_id="bd-7", at=at))
        end = {"outcome": outcome, "session_id": session_id, "cost": cost, "turns": turns}
        _ok(_end(client, project, run="fresh", bead_id="bd-7", **end))
    assert_written_as_go_writes(
        client.get(_url(project, "fresh")).content, "atari/fresh-two-iterations.json"
    )


@pytest.mark.parametrize("name", go_written_atari_states())
def test_a_file_atari_wrote_round_trips_through_put_and_load(client, project, name):
    raw = golden_bytes(name)
    assert _put(client, project, raw, run="put").json()["notices"] == []
    assert client.get(_url(project, "put")).content == raw
    loaded = _load(client, project, raw, run="load").json()
    assert loaded["outcome"] == "stored" and loaded["notices"] == []
    assert client.get(_url(project, "load")).content == raw


@pytest.mark.parametrize(
    ("written", "notice"),
    [
        (b"", "missing; atari writes Go's zero value, 0001-01-01T00:00:00Z"),
        (b',\n  "stalled_at": null', "null; atari writes Go's zero value, 0001-01-01T00:00:00Z"),
    ],
)
def test_a_version_2_state_without_stalled_at_is_stored_as_atari_would_write_it(
    client, project, written, notice
):
    """Go reads a missing or null ``stalled_at`` as the zero time and writes that: so does the
    store. Earlier versions of this service exported version 2 states without the field."""
    expected = golden_bytes("atari/seed-stall-cleared.json")
    zero = b',\n  "stalled_at": "0001-01-01T00:00:00Z"'
    assert zero in expected
    receipt = _put(client, project, expected.replace(zero, written)).json()
    assert receipt["notices"] == [{"path": "/stalled_at", "message": notice}]
    assert client.get(_url(project)).content == expected


def test_a_version_1_state_keeps_version_1s_layout(client, project):
    """Version 1's struct has no stall fields: a version 1 state stays without ``stalled_at``
    through the routes that keep its version (PUT, iterations, PATCH)."""
    _put(client, project, golden_bytes(SEED))
    _ok(_start(client, project, bead_id="bd-002"))
    _ok(client.patch(_url(project), json={"stalled_bead_id": "bd-002", "stalled_at": None}))
    exported = _state(client, project)
    assert exported["version"] == 1 and exported["stalled_bead_id"] == "bd-002"
    assert "stalled_at" not in exported


def test_a_backup_that_is_json_loses_its_secrets_in_any_escaping_and_stays_json(client, project):
    """A state atari could not read is kept as bytes; when those bytes are JSON, its secrets go
    whatever the JSON escaping hides them in, and the backup is still JSON."""
    key = "sk-proj-Zq7Xw2Lm9Rt4Vb8Nc3Kd6Hs1Pq5Ty0Wx"
    escaped = json.dumps({"version": 3, "password": "\u00e9s3cret-value", "keys": [key]})
    assert "\\u00e9" in escaped
    raw = escaped.encode()
    response = _load(client, project, raw)
    assert response.json()["outcome"] == "reset"
    backup = client.get(_url(project, suffix="/state/backup")).content
    kept = json.loads(backup)
    assert kept["version"] == 3
    assert kept["password"].startswith("[REDACTED:") and "s3cret" not in backup.decode()
    assert key not in backup.decode()


@pytest.mark.parametrize("field", ["version", "iteration", "total_turns", "attempts"])
def test_an_integer_of_thousands_of_digits_is_a_fault_not_a_500(client, project, field):
    """Python converts at most 4,300 digits to an int: a 5,000-digit version, iteration or
    count was a ValueError, a 500, on PUT, state:load and the archive (a helper's finding)."""
    big = "9" * 5000
    written = golden_bytes(SEED).decode()
    if field == "attempts":
        body = re.sub(r'"attempts": \d+', f'"attempts": {big}', written, count=1)
    else:
        body = re.sub(rf'"{field}": \d+', f'"{field}": {big}', written, count=1)
    assert big in body
    put = assert_problem(_put(client, project, body.encode()), 422)
    assert put["errors"][0]["message"] == "must fit in a 64-bit integer" or field == "version"
    loaded = _load(client, project, body.encode(), run="loaded")
    assert loaded.status_code < 500, loaded.text


def test_a_backup_that_is_not_utf8_is_redacted_around_its_other_bytes(client, project):
    """A state file in Latin-1 holding keys: kept as the backup whole, keys and all (a
    helper's finding); now its secrets are replaced and every other byte kept."""
    raw = (
        b'{"version": 2, "note": "caf\xe9", "key": "sk-proj-abcdefghijklmnopqrstuvwxyz012345",'
        b' "db": "postgres://u:hunter2pass@db/x"}'
    )
    assert _load(client, project, raw).status_code == 200
    backup = client.get(_url(project, suffix="/state/backup")).content
    assert backup == (
        b'{"version": 2, "note": "caf\xe9", "key": "[REDACTED:api_key]",'
        b' "db": "postgres://u:[REDACTED:url_credential]@db/x"}'
    )
