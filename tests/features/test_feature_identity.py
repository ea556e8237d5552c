"""A context's `feature_id` is data: the feature is named by its path (the directory), as
sdd-unified's orchestrator keeps the `feature_id` a context was created with. On SQLite and
PostgreSQL."""

import json

from tests.helpers import golden_workspace_files, python_indent2, tar_gz, untar

FEATURE = "feature-002-password-reset"
CONTEXT_PATH = f"features/{FEATURE}/context.json"


def _url(project: str, feature: str = FEATURE, suffix: str = "/context") -> str:
    return f"/v1/projects/{project}/features/{feature}{suffix}"


def _golden_context() -> bytes:
    return golden_workspace_files("features")[CONTEXT_PATH]


def test_a_context_named_other_than_its_directory_is_stored_as_written(client, project):
    context = _golden_context()
    assert json.loads(context)["feature_id"] == "password-reset"
    response = client.put(
        _url(project), content=context, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 201, response.text
    assert response.json()["feature_id"] == FEATURE
    assert client.get(_url(project)).content == context
    listed = client.get(f"/v1/projects/{project}/features").json()["items"]
    assert [item["feature_id"] for item in listed] == [FEATURE]


def test_handovers_are_listed_and_filtered_by_the_path_name(client, project):
    context = _golden_context()
    client.put(_url(project), content=context, headers={"Content-Type": "application/json"})
    handovers = f"/v1/projects/{project}/handovers"
    notes = json.loads(context)["handover_notes"]["history"]
    by_path = client.get(handovers, params={"feature_id": FEATURE}).json()["items"]
    assert {item["feature_id"] for item in by_path} == {FEATURE}
    assert len(by_path) == len(notes) > 0
    assert client.get(handovers, params={"feature_id": "password-reset"}).json()["items"] == []


def test_a_merge_patch_and_a_handover_keep_the_documents_feature_id(client, project):
    client.put(
        _url(project), content=_golden_context(), headers={"Content-Type": "application/json"}
    )
    patched = client.patch(
        _url(project),
        content=b'{"current_phase": "l1_design"}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert patched.status_code == 200, patched.text
    note = {
        "from_agent": "sdd-architect",
        "to_agent": "sdd-pe",
        "task_completed": "design-l1",
        "message": "L1 done",
    }
    appended = client.post(_url(project, suffix="/handovers"), json=note)
    assert appended.status_code == 201, appended.text
    assert appended.json()["feature_id"] == FEATURE
    assert client.get(_url(project)).json()["feature_id"] == "password-reset"


def test_a_merge_patch_may_change_the_documents_feature_id(client, project):
    client.put(
        _url(project),
        content=python_indent2({"feature_id": "a"}),
        headers={"Content-Type": "application/json"},
    )
    patched = client.patch(
        _url(project),
        json={"feature_id": "renamed"},
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert patched.status_code == 200, patched.text
    assert client.get(_url(project)).json()["feature_id"] == "renamed"


def test_the_archive_imports_and_exports_it_under_its_directory(client, project):
    context = _golden_context()
    report = client.post(
        f"/v1/projects/{project}/archive",
        content=tar_gz({CONTEXT_PATH: context}),
        headers={"Content-Type": "application/gzip"},
    ).json()
    assert report["refused"] == [], report
    assert [item["path"] for item in report["imported"]] == [CONTEXT_PATH]
    exported = untar(client.get(f"/v1/projects/{project}/archive").content)
    assert exported == {CONTEXT_PATH: context}
