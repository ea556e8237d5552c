"""A running summary the Context Agent wrote over the service's limit: its own `len(text) // 4`
estimate lets 8,000 CJK characters through as `token_count` 2000, far more by cl100k_base.
A file imported is kept as written, with a warning; the service's own write route refuses it;
the context pack still keeps to its budget. On SQLite and PostgreSQL."""

import json

from app.memory import tokens
from tests.helpers import assert_problem, golden_workspace_files, tar_gz, untar

SUMMARY_PATH = ".autonomous/context/running-summary.json"
LIMIT = 2000


def _base(project: str) -> str:
    return f"/v1/projects/{project}/memory"


def _summary() -> bytes:
    return golden_workspace_files(".autonomous")[SUMMARY_PATH]


def test_the_golden_summary_is_over_the_limit_by_cl100k_only():
    document = json.loads(_summary())
    assert document["token_count"] == len(document["content"]) // 4 == LIMIT
    assert tokens.count(document["content"]) > LIMIT


def test_a_file_import_keeps_it_and_warns(client, project):
    summary = _summary()
    response = client.put(
        f"{_base(project)}/files/running-summary.json",
        content=summary,
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 201, response.text
    receipt = response.json()
    counted = tokens.count(json.loads(summary)["content"])
    assert receipt["token_count"] == counted
    assert receipt["filled"] == []
    assert [w["pointer"] for w in receipt["warnings"]] == ["/content"]
    assert f"{counted} tokens" in receipt["warnings"][0]["message"]
    assert client.get(f"{_base(project)}/files/running-summary.json").content == summary
    assert client.get(f"{_base(project)}/running-summary").content == summary


def test_the_services_own_write_route_still_refuses_it(client, project):
    response = client.put(
        f"{_base(project)}/running-summary",
        content=_summary(),
        headers={"Content-Type": "application/json"},
    )
    assert assert_problem(response, 422)["errors"][0]["path"] == "/content"
    assert_problem(client.get(f"{_base(project)}/running-summary"), 404)


def test_a_summary_within_the_limit_has_no_warning(client, project):
    response = client.put(
        f"{_base(project)}/files/running-summary.json", json={"content": "short", "token_count": 1}
    )
    assert response.json()["warnings"] == []


def test_the_archive_imports_it_with_a_warning_and_exports_it_unchanged(client, project):
    summary = _summary()
    report = client.post(
        f"/v1/projects/{project}/archive",
        content=tar_gz({SUMMARY_PATH: summary}),
        headers={"Content-Type": "application/gzip"},
    ).json()
    assert report["refused"] == [], report
    assert [item["path"] for item in report["imported"]] == [SUMMARY_PATH]
    assert [(w["path"], w["pointer"]) for w in report["warnings"]] == [(SUMMARY_PATH, "/content")]
    exported = untar(client.get(f"/v1/projects/{project}/archive").content)
    assert exported == {SUMMARY_PATH: summary}


def test_the_pack_truncates_a_stored_summary_over_the_limit(client, project):
    summary = _summary()
    client.put(
        f"{_base(project)}/files/running-summary.json",
        content=summary,
        headers={"Content-Type": "application/json"},
    )
    for budget in (LIMIT, 500):
        pack = client.get(f"{_base(project)}/context", params={"max_tokens": budget}).json()
        assert pack["summary_truncated"] is True
        assert pack["token_count"] == tokens.count(pack["markdown"]) <= budget
        assert json.loads(summary)["content"].startswith(pack["summary"])
