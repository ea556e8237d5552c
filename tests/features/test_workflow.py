"""sdd-unified's `workflow.json` (the task graph next to `context.json`, named in its
`context_sources.workflow_state.file`), stored byte for byte per feature. On SQLite and
PostgreSQL."""

import json

import pytest

from tests.helpers import assert_problem, golden_workspace_files, python_indent2

FEATURE = "feature-002-password-reset"
JSON = {"Content-Type": "application/json"}


def _url(project: str, feature: str = FEATURE, suffix: str = "/workflow") -> str:
    return f"/v1/projects/{project}/features/{feature}{suffix}"


def _golden(feature: str = FEATURE, name: str = "workflow.json") -> bytes:
    return golden_workspace_files("features")[f"features/{feature}/{name}"]


def _put(client, project: str, content: bytes, feature: str = FEATURE, **headers: str):
    return client.put(_url(project, feature), content=content, headers={**JSON, **headers})


def test_the_orchestrators_workflow_round_trips_byte_for_byte(client, project):
    workflow = _golden()
    created = _put(client, project, workflow)
    assert created.status_code == 201, created.text
    assert created.headers["location"] == _url(project)
    body = created.json()
    assert body["feature_id"] == FEATURE and body["size_bytes"] == len(workflow)
    exported = client.get(_url(project))
    assert exported.status_code == 200
    assert exported.content == workflow
    assert exported.headers["etag"] == created.headers["etag"]
    assert 'filename="workflow.json"' in exported.headers["content-disposition"]
    assert _put(client, project, workflow).status_code == 200


@pytest.mark.parametrize(
    "content",
    [
        b'{"init":{"command":"x","status":"READY","dependencies":[]}}',
        # Raw UTF-8, an integer past 64 bits, four spaces, a final newline: as an agent wrote it.
        '{\n    "t\u00e2che": {"status": "PENDING", "n": 18446744073709551617}}\n'.encode(),
        b'{\r\n"a": {"status": "COMPLETED", "dependencies": [], "x": 1.50}}',
    ],
)
def test_any_json_object_is_kept_exactly_as_sent(client, project, content):
    assert _put(client, project, content).status_code == 201
    assert client.get(_url(project)).content == content


@pytest.mark.parametrize(
    ("content", "status"),
    [(b"[]", 422), (b'"tasks"', 422), (b"{", 400), (b"\xff{}", 400), (b"", 400)],
)
def test_anything_else_is_refused_and_changes_nothing(client, project, content, status):
    assert_problem(_put(client, project, content), status)
    assert_problem(client.get(_url(project)), 404)
    _put(client, project, _golden())
    assert_problem(_put(client, project, content), status)
    assert client.get(_url(project)).content == _golden()


def test_preconditions(client, project):
    etag = _put(client, project, _golden()).headers["etag"]
    assert client.get(_url(project), headers={"If-None-Match": etag}).status_code == 304
    other = python_indent2({"init": {"status": "RUNNING", "dependencies": []}})
    assert_problem(_put(client, project, other, **{"If-None-Match": "*"}), 412)
    assert_problem(_put(client, project, other, **{"If-Match": '"stale"'}), 412)
    assert _put(client, project, other, **{"If-Match": etag}).status_code == 200
    assert_problem(client.delete(_url(project), headers={"If-Match": etag}), 412)
    assert client.get(_url(project)).content == other


def test_a_workflow_needs_no_context(client, project):
    # The orchestrator reads workflow.json first and creates context.json itself.
    assert _put(client, project, _golden()).status_code == 201
    assert_problem(client.get(_url(project, suffix="/context")), 404)


def test_delete_the_workflow_alone(client, project):
    context = _golden(name="context.json")
    client.put(_url(project, suffix="/context"), content=context, headers=JSON)
    _put(client, project, _golden())
    assert client.delete(_url(project)).status_code == 204
    assert_problem(client.get(_url(project)), 404)
    assert_problem(client.delete(_url(project)), 404)
    assert client.get(_url(project, suffix="/context")).content == context


def test_deleting_the_feature_deletes_its_workflow(client, project):
    client.put(_url(project, suffix="/context"), content=_golden(name="context.json"), headers=JSON)
    _put(client, project, _golden())
    assert client.get(_url(project)).status_code == 200
    assert client.delete(_url(project, suffix="/context")).status_code == 204
    assert_problem(client.get(_url(project)), 404)


def test_features_and_tenants_are_apart(client, other_client, project):
    _put(client, project, _golden())
    login = _golden("feature-001-login")
    _put(client, project, login, feature="feature-001-login")
    assert client.get(_url(project)).content == _golden()
    assert client.get(_url(project, "feature-001-login")).content == login
    assert_problem(other_client.get(_url(project)), 404)
    assert_problem(other_client.delete(_url(project)), 404)
    assert json.loads(client.get(_url(project)).content)["init"]["status"] == "COMPLETED"


def test_a_bad_feature_name_is_a_422(client, project):
    assert_problem(_put(client, project, _golden(), feature="-bad"), 422)


def test_a_secret_in_a_workflow_is_stored_redacted_and_the_file_stays_json(client, project, engine):
    workflow = json.loads(_golden())
    secret = "sk-proj-Zq7Xw2Lm9Rt4Vb8Nc3Kd6Hs1Pq5Ty0Wx"
    workflow["deploy"] = {"command": f"deploy --token {secret}", "password": "hunter2-staging"}
    assert _put(client, project, python_indent2(workflow)).status_code == 201
    exported = client.get(_url(project)).content
    assert secret.encode() not in exported and b"hunter2-staging" not in exported
    assert json.loads(exported)["deploy"]["command"].startswith("deploy --token [REDACTED:")
    with engine.connect() as connection:
        stored = connection.exec_driver_sql("SELECT content FROM feature_workflows").all()
    assert not any(secret.encode() in bytes(row[0]) for row in stored)


def test_a_workflow_whose_secret_is_a_list_or_escaped_stays_json_and_loses_it(client, project):
    workflow = {
        "t1": {"api_key": ["sk-proj-Zq7Xw2Lm9Rt4Vb8Nc3Kd6Hs1Pq5Ty0Wx"]},
        "t2": {"password": "\\u00e9x"},
    }
    assert _put(client, project, python_indent2(workflow)).status_code == 201
    exported = client.get(_url(project)).content
    assert json.loads(exported)["t2"]["password"].startswith("[REDACTED:")
    assert b"sk-proj-Zq7" not in exported
