"""Feature contexts, handovers, reviews and the circuit breaker through the API, on SQLite and
PostgreSQL."""

import json
import re
import threading

import pytest
from sqlalchemy import text

from app.formats import feature_context
from tests.conftest import client_for, create_key
from tests.helpers import assert_problem, golden_bytes, python_indent2

TOOL_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?\+00:00$")
TOOL_FILE_FEATURE = "checkout-flow"


def _url(project: str, feature: str, suffix: str = "/context") -> str:
    return f"/v1/projects/{project}/features/{feature}{suffix}"


def _seed_context(feature: str) -> dict:
    """The seed's template, instantiated, holding the seed's handover and iteration examples."""
    template = golden_bytes("sdd-context-template.json").decode()
    stamp = "2025-10-16T07:00:00Z"
    document = json.loads(
        template.replace("{{feature_name}}", feature).replace("{{timestamp}}", stamp)
    )
    document["handover_notes"]["history"].append(
        json.loads(golden_bytes("sdd-handover-note-example.json"))
    )
    document["iteration_tracking"].update(
        json.loads(golden_bytes("sdd-iteration-tracking-example.json"))
    )
    return document


def _put(client, project: str, feature: str, document, **headers: str):
    content = document if isinstance(document, bytes) else python_indent2(document)
    return client.put(
        _url(project, feature),
        content=content,
        headers={"Content-Type": "application/json", **headers},
    )


def _put_tool_file(client, project: str) -> None:
    response = _put(
        client, project, TOOL_FILE_FEATURE, golden_bytes("sdd-context-tool-written.json")
    )
    assert response.status_code == 201, response.text


def _context(client, project: str, feature: str) -> dict:
    return client.get(_url(project, feature)).json()


def _review(client, project: str, feature: str, phase: str = "design-l1", **fields):
    body = {"phase": phase, "outcome": "REJECTED_WITH_FEEDBACK", "rejecting_agents": ["sdd-pe"]}
    body.update(fields)
    return client.post(_url(project, feature, "/reviews"), json=body)


def _handover(client, project: str, feature: str, **fields):
    body = {
        "from_agent": "sdd-architect",
        "to_agent": "sdd-pe",
        "task_completed": "design-l1",
        "message": "L1 done",
    }
    body.update(fields)
    return client.post(_url(project, feature, "/handovers"), json=body)


# --- create, import, export -----------------------------------------------------------------


def test_create_instantiates_the_documented_template(client, project):
    response = client.post(f"/v1/projects/{project}/features", json={"feature_id": "f1"})
    assert response.status_code == 201, response.text
    assert response.headers["location"] == _url(project, "f1")
    document = response.json()
    stamp = document["created_at"]
    assert TOOL_TIMESTAMP.match(stamp) and document["last_updated"] == stamp
    template = golden_bytes("sdd-context-template.json").decode()
    expected = template.replace("{{feature_name}}", "f1").replace("{{timestamp}}", stamp)
    assert response.content == expected.encode()
    exported = client.get(_url(project, "f1"))
    assert exported.content == response.content
    assert exported.headers["etag"] == response.headers["etag"]
    assert exported.headers["content-type"] == "application/json"
    assert exported.headers["content-disposition"] == 'attachment; filename="context.json"'
    assert_problem(client.post(f"/v1/projects/{project}/features", json={"feature_id": "f1"}), 409)


def test_create_refuses_a_bad_feature_id(client, project):
    for feature_id in ("../etc", "", "a" * 129, 7):
        response = client.post(f"/v1/projects/{project}/features", json={"feature_id": feature_id})
        assert_problem(response, 422)


def test_the_seed_template_and_examples_round_trip_byte_for_byte(client, project):
    document = _seed_context("feature-001-auth")
    created = _put(client, project, "feature-001-auth", document)
    assert created.status_code == 201, created.text
    assert created.headers["location"] == _url(project, "feature-001-auth")
    assert created.json()["current_phase"] == "init"
    exported = client.get(_url(project, "feature-001-auth"))
    assert exported.content == python_indent2(document)
    assert exported.headers["etag"] == created.headers["etag"]
    replaced = _put(client, project, "feature-001-auth", document)
    assert replaced.status_code == 200


def test_a_tool_written_file_keeps_its_fields_and_timestamps(client, project):
    _put_tool_file(client, project)
    exported = client.get(_url(project, TOOL_FILE_FEATURE))
    assert exported.content == golden_bytes("sdd-context-tool-written.json")


@pytest.mark.parametrize(
    ("content", "status"),
    [
        (b'{"feature_id": 7}', 422),
        (b'{"current_phase": "init"}', 422),
        (b"[]", 422),
        (b'{"feature_id": "f1", "handover_notes": {"history": [{"from_agent": "a"}]}}', 422),
        (b'{"feature_id": "f1", "circuit_breaker": {"intervention_required": 1}}', 422),
        (b'{"feature_id": "f1", "x": 1e999}', 400),
        (b'{"feature_id": "f1"', 400),
        (b"", 400),
    ],
)
def test_an_invalid_context_is_refused_and_changes_nothing(client, project, content, status):
    original = _seed_context("f1")
    _put(client, project, "f1", original)
    assert_problem(_put(client, project, "f1", content), status)
    assert client.get(_url(project, "f1")).content == python_indent2(original)
    handovers = client.get(f"/v1/projects/{project}/handovers").json()["items"]
    assert len(handovers) == 1


def test_refusals_name_each_fault(client, project):
    document = {"feature_id": None, "iteration_tracking": {"design-l1": {"attempts": "2"}}}
    body = assert_problem(_put(client, project, "f1", document), 422)
    assert [error["path"] for error in body["errors"]] == [
        "/feature_id",
        "/iteration_tracking/design-l1/attempts",
        "/iteration_tracking/design-l1/max_attempts",
        "/iteration_tracking/design-l1/status",
        "/iteration_tracking/design-l1/reviews",
    ]


def test_put_honours_if_none_match_and_if_match(client, project):
    etag = _put(client, project, "f1", _seed_context("f1")).headers["etag"]
    changed = _seed_context("f1")
    changed["current_phase"] = "requirements"
    assert_problem(_put(client, project, "f1", changed, **{"If-None-Match": "*"}), 412)
    assert_problem(_put(client, project, "f1", changed, **{"If-Match": '"stale"'}), 412)
    assert _put(client, project, "f1", changed, **{"If-Match": etag}).status_code == 200
    assert _context(client, project, "f1")["current_phase"] == "requirements"
    # A new feature takes If-None-Match: *, whatever `feature_id` its document holds.
    assert _put(client, project, "f2", changed, **{"If-None-Match": "*"}).status_code == 201


def test_if_none_match_on_a_put_compares_weakly(client, project):
    """RFC 9110 13.1.2: If-None-Match compares tags weakly, for a PUT as for a GET (which
    answers 304 to the weak form of the current tag): the weak form of the current tag, or
    a list holding it, is a 412; another tag is not."""
    etag = _put(client, project, "f1", _seed_context("f1")).headers["etag"]
    changed = _seed_context("f1")
    changed["current_phase"] = "requirements"
    for header in (f"W/{etag}", f'"other", W/{etag}', etag):
        assert_problem(_put(client, project, "f1", changed, **{"If-None-Match": header}), 412)
    assert _put(client, project, "f1", changed, **{"If-None-Match": 'W/"other"'}).status_code == 200


def test_export_answers_if_none_match(client, project):
    etag = _put(client, project, "f1", _seed_context("f1")).headers["etag"]
    assert client.get(_url(project, "f1"), headers={"If-None-Match": etag}).status_code == 304


def test_unknown_features_and_bad_names(client, project):
    _put(client, project, "f1", _seed_context("f1"))
    assert_problem(client.get(_url(project, "nope")), 404)
    assert_problem(client.get(_url(project, "-bad")), 422)
    assert_problem(_review(client, project, "nope"), 404)
    assert_problem(_handover(client, project, "nope"), 404)
    assert_problem(client.get(_url("no-such-project", "f1")), 404)


def test_another_tenant_sees_nothing(client, other_client, project):
    _put(client, project, "f1", _seed_context("f1"))
    assert_problem(other_client.get(_url(project, "f1")), 404)
    assert_problem(other_client.get(f"/v1/projects/{project}/handovers"), 404)
    assert_problem(_review(other_client, project, "f1"), 404)


def test_delete_removes_the_context_and_its_handovers(client, project):
    etag = _put(client, project, "f1", _seed_context("f1")).headers["etag"]
    assert_problem(client.delete(_url(project, "f1"), headers={"If-Match": '"x"'}), 412)
    assert client.delete(_url(project, "f1"), headers={"If-Match": etag}).status_code == 204
    assert_problem(client.get(_url(project, "f1")), 404)
    assert client.get(f"/v1/projects/{project}/handovers").json()["items"] == []


def test_features_are_listed_and_counted(client, project):
    _put(client, project, "f1", _seed_context("f1"))
    _put_tool_file(client, project)
    items = client.get(f"/v1/projects/{project}/features").json()["items"]
    assert [(i["feature_id"], i["current_phase"]) for i in items] == [
        (TOOL_FILE_FEATURE, None),
        ("f1", "init"),
    ]
    init = client.get(f"/v1/projects/{project}/features", params={"phase": "init"}).json()
    assert [i["feature_id"] for i in init["items"]] == ["f1"]
    counts = client.get(f"/v1/projects/{project}").json()["counts"]
    assert counts["features"] == 2 and counts["handovers"] == 3


def test_project_deletion_takes_features_and_handovers(client, engine, project):
    _put_tool_file(client, project)
    assert client.delete(f"/v1/projects/{project}").status_code == 204
    with engine.connect() as connection:
        orphans = connection.execute(
            text(
                "SELECT COUNT(*) FROM feature_handovers h WHERE NOT EXISTS "
                "(SELECT 1 FROM feature_contexts c WHERE c.id = h.context_id)"
            )
        ).scalar_one()
    assert orphans == 0


# --- merge patch -----------------------------------------------------------------------------


def _patch(client, project: str, feature: str, patch, media_type="application/merge-patch+json"):
    content = patch if isinstance(patch, bytes) else json.dumps(patch).encode()
    return client.patch(
        _url(project, feature), content=content, headers={"Content-Type": media_type}
    )


def test_merge_patch_changes_fields_in_place_and_moves_last_updated(client, project):
    _put(client, project, "f1", _seed_context("f1"))
    patch = {
        "current_phase": "l1_design",
        "context_sources": {"l1_architecture": {"status": "in_progress", "summary": None}},
    }
    response = _patch(client, project, "f1", patch)
    assert response.status_code == 200, response.text
    expected = _seed_context("f1")
    expected["current_phase"] = "l1_design"
    expected["context_sources"]["l1_architecture"]["status"] = "in_progress"
    del expected["context_sources"]["l1_architecture"]["summary"]
    expected["last_updated"] = response.json()["last_updated"]
    assert TOOL_TIMESTAMP.match(expected["last_updated"])
    assert response.content == python_indent2(expected)
    assert client.get(_url(project, "f1")).content == response.content
    assert response.headers["etag"] == client.get(_url(project, "f1")).headers["etag"]
    listed = client.get(f"/v1/projects/{project}/features", params={"phase": "l1_design"})
    assert [i["feature_id"] for i in listed.json()["items"]] == ["f1"]


def test_merge_patch_accepts_plain_json_and_a_given_last_updated(client, project):
    _put(client, project, "f1", _seed_context("f1"))
    patch = {"last_updated": "2025-10-17T00:00:00Z", "x_new": [1]}
    response = _patch(client, project, "f1", patch, media_type="application/json")
    assert response.status_code == 200
    document = response.json()
    assert document["last_updated"] == "2025-10-17T00:00:00Z"
    assert list(document)[-1] == "x_new"


def test_an_empty_merge_patch_changes_nothing(client, project):
    original = _put(client, project, "f1", _seed_context("f1"))
    response = _patch(client, project, "f1", {})
    assert response.headers["etag"] == original.headers["etag"]


@pytest.mark.parametrize(
    ("patch", "status"),
    [
        ({"context_sources": {"l3_tasks": {"status": "done"}}}, 422),
        ({"feature_id": None}, 422),
        ({"feature_id": 7}, 422),
        (["not", "an", "object"], 422),
        ({"handover_notes": {"history": [{"to_agent": "x"}]}}, 422),
        (b'{"current_phase": Infinity}', 400),
        (b"{", 400),
    ],
)
def test_a_merge_patch_with_an_invalid_result_changes_nothing(client, project, patch, status):
    original = _seed_context("f1")
    _put(client, project, "f1", original)
    assert_problem(_patch(client, project, "f1", patch), status)
    assert client.get(_url(project, "f1")).content == python_indent2(original)


def test_merge_patch_refuses_other_media_types(client, project):
    _put(client, project, "f1", _seed_context("f1"))
    assert_problem(_patch(client, project, "f1", {}, media_type="text/plain"), 415)


def test_merge_patch_honours_if_match(client, project):
    _put(client, project, "f1", _seed_context("f1"))
    response = client.patch(
        _url(project, "f1"),
        content=b'{"current_phase": "x"}',
        headers={"Content-Type": "application/merge-patch+json", "If-Match": '"stale"'},
    )
    assert_problem(response, 412)


def test_a_merge_patch_of_the_history_reindexes_the_handovers(client, project):
    _put(client, project, "f1", _seed_context("f1"))
    note = {"timestamp": "2025-10-18T00:00:00Z", "from_agent": "sdd-pe", "to_agent": "sdd-le"}
    _patch(client, project, "f1", {"handover_notes": {"history": [note]}})
    items = client.get(f"/v1/projects/{project}/handovers").json()["items"]
    assert items == [{"feature_id": "f1", "index": 0, "note": note}]


# --- handovers -------------------------------------------------------------------------------


def test_a_handover_is_appended_with_its_timestamp_filled(client, project):
    _put(client, project, "f1", _seed_context("f1"))
    response = _handover(client, project, "f1", critical_points=["p95 < 100ms"])
    assert response.status_code == 201, response.text
    body = response.json()
    note = body["note"]
    assert TOOL_TIMESTAMP.match(note["timestamp"])
    assert list(note) == [
        "timestamp",
        "from_agent",
        "to_agent",
        "task_completed",
        "message",
        "critical_points",
        "artifacts_created",
    ]
    assert body["index"] == 1 and body["last_updated"] == note["timestamp"]
    document = _context(client, project, "f1")
    assert document["handover_notes"]["history"][1] == note
    assert document["last_updated"] == body["last_updated"]
    assert response.headers["etag"] == client.get(_url(project, "f1")).headers["etag"]


def test_a_given_handover_timestamp_is_kept_as_written(client, project):
    _put_tool_file(client, project)
    stamp = "2026-03-02T08:00:00.5+01:00"
    note = _handover(client, project, TOOL_FILE_FEATURE, timestamp=stamp).json()["note"]
    assert note["timestamp"] == stamp
    history = _context(client, project, TOOL_FILE_FEATURE)["handover_notes"]["history"]
    assert history[-1]["timestamp"] == stamp


@pytest.mark.parametrize(
    "fields",
    [
        {"timestamp": "tomorrow"},
        {"from_agent": None},
        {"to_agent": "x" * 257},
        {"to_agent": "a\x00b"},
        {"critical_points": "one"},
        {"unknown": 1},
    ],
)
def test_a_bad_handover_is_refused(client, project, fields):
    _put(client, project, "f1", _seed_context("f1"))
    assert_problem(_handover(client, project, "f1", **fields), 422)
    assert len(_context(client, project, "f1")["handover_notes"]["history"]) == 1


def test_a_context_without_handover_notes_gets_them(client, project):
    _put(client, project, "f1", {"feature_id": "f1"})
    _handover(client, project, "f1")
    document = _context(client, project, "f1")
    assert list(document) == ["feature_id", "handover_notes", "last_updated"]


def test_handovers_are_listed_across_features_with_filters(client, project):
    _put(client, project, "f1", _seed_context("f1"))  # sdd-architect -> sdd-pe, 2025-10-16
    _put_tool_file(client, project)  # sdd-ba -> next-ready-task, sdd-architect -> sdd-pe
    _handover(
        client,
        project,
        "f1",
        from_agent="sdd-pe",
        to_agent="sdd-le",
        timestamp="2026-04-01T00:00:00Z",
    )
    url = f"/v1/projects/{project}/handovers"

    def listed(**params) -> list[tuple[str, int]]:
        response = client.get(url, params=params)
        assert response.status_code == 200, response.text
        return [(item["feature_id"], item["index"]) for item in response.json()["items"]]

    assert listed() == [("f1", 1), (TOOL_FILE_FEATURE, 1), (TOOL_FILE_FEATURE, 0), ("f1", 0)]
    assert listed(to_agent="sdd-pe") == [(TOOL_FILE_FEATURE, 1), ("f1", 0)]
    assert listed(from_agent="sdd-pe") == [("f1", 1)]
    assert listed(feature_id="f1") == [("f1", 1), ("f1", 0)]
    assert listed(since="2026-03-01T09:14:00Z") == [("f1", 1), (TOOL_FILE_FEATURE, 1)]
    assert listed(to_agent="sdd-pe", feature_id="f1") == [("f1", 0)]
    big = client.get(url, params={"feature_id": TOOL_FILE_FEATURE}).json()["items"][0]
    assert big["note"]["x_tool_extra"]["tokens"] == 18446744073709551617
    assert_problem(client.get(url, params={"since": "soon"}), 422)
    assert_problem(client.get(url, params={"to_agent": "a\x00"}), 422)


def test_handover_pages_cover_every_note_once(client, project):
    _put_tool_file(client, project)
    _put(client, project, "f1", _seed_context("f1"))
    seen, cursor = [], None
    while True:
        params = {"limit": 1} | ({"cursor": cursor} if cursor else {})
        page = client.get(f"/v1/projects/{project}/handovers", params=params).json()
        seen += [(item["feature_id"], item["index"]) for item in page["items"]]
        if (cursor := page["next_cursor"]) is None:
            break
    assert len(seen) == len(set(seen)) == 3


def test_a_handover_retry_with_the_same_key_appends_once(client, project):
    _put(client, project, "f1", _seed_context("f1"))
    headers = {"Idempotency-Key": "handover-1"}
    body = {"from_agent": "a", "to_agent": "b", "task_completed": "t", "message": "m"}
    url = _url(project, "f1", "/handovers")
    first = client.post(url, json=body, headers=headers)
    again = client.post(url, json=body, headers=headers)
    assert first.status_code == again.status_code == 201
    assert again.content == first.content and again.headers["idempotent-replayed"] == "true"
    assert len(_context(client, project, "f1")["handover_notes"]["history"]) == 2


# --- reviews and the circuit breaker ---------------------------------------------------------


def test_the_full_circuit_breaker_cycle(client, project):
    client.post(f"/v1/projects/{project}/features", json={"feature_id": "f1"})
    for attempt in (1, 2):
        response = _review(client, project, "f1", issues_count=attempt)
        assert response.status_code == 201, response.text
        body = response.json()
        assert body["iteration_tracking"]["design-l1"]["attempts"] == attempt
        assert body["iteration_tracking"]["design-l1"]["status"] == "active"
        assert not body["tripped"]
    third = _review(client, project, "f1").json()
    assert third["tripped"]
    assert third["iteration_tracking"]["design-l1"]["status"] == "limit_reached"
    breaker = third["circuit_breaker"]
    assert breaker["intervention_required"] and breaker["blocked_task"] == "design-l1"
    assert "design-l1" in breaker["reason"]
    tripped = client.get(f"/v1/projects/{project}/features", params={"intervention_required": True})
    assert [i["blocked_task"] for i in tripped.json()["items"]] == ["design-l1"]

    assert_problem(_review(client, project, "f1", outcome="APPROVED"), 409)
    # Other phases are not blocked.
    assert _review(client, project, "f1", phase="design-l2").status_code == 201

    reset = client.post(_url(project, "f1", "/circuit-breaker:reset"))
    assert reset.status_code == 200, reset.text
    assert reset.json()["circuit_breaker"] == {
        "max_review_iterations": 3,
        "max_task_rework_iterations": 2,
        "intervention_required": False,
        "blocked_task": None,
        "reason": None,
    }
    reopened = reset.json()["iteration_tracking"]["design-l1"]
    assert (reopened["attempts"], reopened["max_attempts"], reopened["status"]) == (0, 3, "active")
    assert len(reopened["reviews"]) == 3

    approved = _review(client, project, "f1", outcome="APPROVED", rejecting_agents=[]).json()
    phase = approved["iteration_tracking"]["design-l1"]
    assert (phase["attempts"], phase["status"]) == (1, "approved")
    document = _context(client, project, "f1")
    assert document["iteration_tracking"]["design-l1"] == phase
    assert document["circuit_breaker"]["intervention_required"] is False
    assert document["last_updated"] == approved["last_updated"]
    assert [r["outcome"] for r in phase["reviews"]] == ["REJECTED_WITH_FEEDBACK"] * 3 + ["APPROVED"]
    assert list(phase["reviews"][0]) == [
        "attempt",
        "outcome",
        "rejecting_agents",
        "timestamp",
        "issues_count",
    ]
    assert TOOL_TIMESTAMP.match(phase["reviews"][0]["timestamp"])
    assert_problem(_review(client, project, "f1"), 409)  # approved: closed


def test_design_l3_allows_four_attempts(client, project):
    client.post(f"/v1/projects/{project}/features", json={"feature_id": "f1"})
    results = [_review(client, project, "f1", phase="design-l3").json() for _ in range(4)]
    assert [r["tripped"] for r in results] == [False, False, False, True]


def test_reset_with_nothing_to_reset_is_a_409(client, project):
    client.post(f"/v1/projects/{project}/features", json={"feature_id": "f1"})
    assert_problem(client.post(_url(project, "f1", "/circuit-breaker:reset")), 409)


def test_reviews_of_a_tool_file_add_the_documented_tracking(client, project):
    _put_tool_file(client, project)
    response = _review(client, project, TOOL_FILE_FEATURE, phase="design-l2")
    assert response.status_code == 201, response.text
    assert response.json()["added"] == ["/iteration_tracking", "/iteration_tracking/design-l2"]
    document = _context(client, project, TOOL_FILE_FEATURE)
    assert list(document)[-2:] == ["review_routing", "iteration_tracking"]
    assert document["iteration_tracking"]["design-l2"]["max_attempts"] == 3
    assert (
        document["execution_log"]
        == json.loads(golden_bytes("sdd-context-tool-written.json"))["execution_log"]
    )


@pytest.mark.parametrize(
    "fields",
    [
        {"phase": "no-such-phase"},
        {"outcome": "MAYBE"},
        {"issues_count": -1},
        {"issues_count": 2**63},
        {"rejecting_agents": "sdd-pe"},
        {
            "rejecting_agents": [
                f"agent-{n}" for n in range(feature_context.MAX_REJECTING_AGENTS + 1)
            ]
        },
        {"rejecting_agents": ["a" * (feature_context.MAX_AGENT_NAME + 1)]},
        {"phase": ""},
    ],
)
def test_a_bad_review_is_refused_and_counts_nothing(client, project, fields):
    client.post(f"/v1/projects/{project}/features", json={"feature_id": "f1"})
    assert_problem(_review(client, project, "f1", **fields), 422)
    tracking = _context(client, project, "f1")["iteration_tracking"]
    assert all(phase["attempts"] == 0 for phase in tracking.values())


def test_reviews_stop_at_the_heads_limit_and_change_nothing_then(client, project, monkeypatch):
    """Every review is kept in the context's head, which each review reads, redacts and writes
    whole: a head of 42-50 MB cost a review 1.2 s of CPU. Once the head holds the limit, a
    review is a 409 that says what to do, and the context is as it was; the most agents a
    review names go in whole until then."""
    monkeypatch.setattr(client.app.state.settings, "max_body_bytes", 40_000)
    client.post(f"/v1/projects/{project}/features", json={"feature_id": "f1"})
    context = client.get(_url(project, "f1"))
    tracking = context.json()["iteration_tracking"]["design-l1"]
    client.put(
        _url(project, "f1"),
        json={
            **context.json(),
            "iteration_tracking": {"design-l1": {**tracking, "max_attempts": 1000}},
        },
    )
    agents = [f"{'a' * 200}-{n}" for n in range(feature_context.MAX_REJECTING_AGENTS)]
    recorded = 0
    while recorded < 10:
        before = client.get(_url(project, "f1")).headers["etag"]
        answer = _review(client, project, "f1", rejecting_agents=agents)
        if answer.status_code != 201:
            break
        recorded += 1
    assert recorded >= 1, answer.text
    problem = assert_problem(answer, 409)
    assert "PUT or PATCH the context smaller" in problem["detail"]
    after = client.get(_url(project, "f1"))
    assert after.headers["etag"] == before
    assert after.json()["iteration_tracking"]["design-l1"]["attempts"] == recorded


def test_a_patch_whose_context_is_over_the_body_limit_answers_its_etag_alone(
    client, project, monkeypatch
):
    """A context grown past the body limit (by handovers) is sent by its GET alone, in an
    export turn: a PATCH, even one that changes nothing, answered the whole file, which a
    client that does not read held with no turn. Within the limit the file comes back."""
    client.post(f"/v1/projects/{project}/features", json={"feature_id": "f1"})
    patch = {"Content-Type": "application/merge-patch+json"}
    small = client.patch(_url(project, "f1"), content=b'{"current_phase": "l1"}', headers=patch)
    assert small.status_code == 200 and small.json()["current_phase"] == "l1"
    monkeypatch.setattr(client.app.state.settings, "max_body_bytes", len(small.content) - 1)
    large = client.patch(_url(project, "f1"), content=b"{}", headers=patch)
    assert large.status_code == 204, large.text
    assert large.content == b""
    assert large.headers["content-location"] == _url(project, "f1")
    assert large.headers["etag"] == client.get(_url(project, "f1")).headers["etag"]


def test_a_review_honours_if_match(client, project):
    created = client.post(f"/v1/projects/{project}/features", json={"feature_id": "f1"})
    url = _url(project, "f1", "/reviews")
    body = {"phase": "design-l1", "outcome": "APPROVED"}
    assert_problem(client.post(url, json=body, headers={"If-Match": '"stale"'}), 412)
    ok = client.post(url, json=body, headers={"If-Match": created.headers["etag"]})
    assert ok.status_code == 201


# --- concurrency -----------------------------------------------------------------------------


def _in_threads(app, tenant: str, count: int, work) -> None:
    key = create_key(app, tenant)
    clients = [client_for(app, key) for _ in range(count)]
    failures: list[str] = []

    def run(client) -> None:
        try:
            work(client)
        except AssertionError as exc:  # reported by the main thread
            failures.append(str(exc))

    threads = [threading.Thread(target=run, args=(c,)) for c in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_concurrent_reviews_lose_no_attempt(app, client, tenant, project):
    document = _seed_context("f1")
    document["iteration_tracking"]["design-l2"]["max_attempts"] = 1000
    _put(client, project, "f1", document)

    def review_three_times(thread_client) -> None:
        for _ in range(3):
            response = _review(thread_client, project, "f1", phase="design-l2")
            assert response.status_code == 201, response.text

    _in_threads(app, tenant, 8, review_three_times)
    phase = _context(client, project, "f1")["iteration_tracking"]["design-l2"]
    assert phase["attempts"] == 24
    assert sorted(r["attempt"] for r in phase["reviews"]) == list(range(1, 25))


def test_concurrent_handovers_are_all_kept_and_indexed(app, client, tenant, project):
    _put(client, project, "f1", {"feature_id": "f1"})

    def append_two(thread_client) -> None:
        for _ in range(2):
            assert _handover(thread_client, project, "f1").status_code == 201

    _in_threads(app, tenant, 6, append_two)
    history = _context(client, project, "f1")["handover_notes"]["history"]
    listed = client.get(f"/v1/projects/{project}/handovers", params={"limit": 500}).json()
    assert len(history) == 12
    assert sorted(item["index"] for item in listed["items"]) == list(range(12))


def test_a_context_read_while_a_handover_commits_is_one_version(client, project, monkeypatch):
    """A context kept as its parts is read as its head, then its notes: on PostgreSQL, under
    READ COMMITTED, a handover committed between the two gave the new note with the head's
    old ETag (bytes of one version under the tag of another). Every read now sees one
    snapshot, as SQLite's WAL read transactions always did."""
    from app.features.repository import HandoverRepository

    assert client.post(f"/v1/projects/{project}/features", json={"feature_id": "f1"}).status_code
    for number in range(2):
        assert _handover(client, project, "f1", message=f"note {number}").status_code == 201
    before = client.get(_url(project, "f1"))
    notes = HandoverRepository.notes
    appended: list[int] = []

    def after_a_handover(self, context_id):
        if not appended:  # once: the append's own write reads no notes
            appended.append(_handover(client, project, "f1", message="late").status_code)
        return notes(self, context_id)

    monkeypatch.setattr(HandoverRepository, "notes", after_a_handover)
    raced = client.get(_url(project, "f1"))
    monkeypatch.undo()
    assert appended == [201] and raced.status_code == 200
    after = client.get(_url(project, "f1"))
    versions = {(v.headers["ETag"], v.content) for v in (before, after)}
    assert (raced.headers["ETag"], raced.content) in versions
