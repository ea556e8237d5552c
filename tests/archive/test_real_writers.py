"""The real writers' sdd-unified and Context Agent files (the golden workspace) through the
archive and through push and pull, byte for byte, on SQLite and PostgreSQL."""

from pathlib import Path

from app.cli import pull_directory, push_directory
from app.client import ContextStoreClient
from tests.helpers import golden_workspace_files, tar_gz, untar

ARCHIVE = {"Content-Type": "application/gzip"}


def _files() -> dict[str, bytes]:
    files = golden_workspace_files("features", ".autonomous")
    assert "features/feature-002-password-reset/workflow.json" in files
    assert ".autonomous/context/running-summary.json" in files
    return files


def test_the_golden_files_round_trip_through_the_archive(client, project):
    files = _files()
    response = client.post(
        f"/v1/projects/{project}/archive", content=tar_gz(files), headers=ARCHIVE
    )
    report = response.json()
    assert report["refused"] == [] and report["skipped"] == [], report
    assert sorted(item["path"] for item in report["imported"]) == sorted(files)
    kinds = {item["path"]: item["kind"] for item in report["imported"]}
    assert kinds["features/feature-001-login/workflow.json"] == "feature_workflow"
    # The one warning: the summary its writer counted 2000 is over the limit by cl100k_base.
    assert [w["path"] for w in report["warnings"]] == [".autonomous/context/running-summary.json"]
    exported = untar(client.get(f"/v1/projects/{project}/archive").content)
    assert exported == files
    base = f"/v1/projects/{project}/features/feature-002-password-reset"
    workflow = files["features/feature-002-password-reset/workflow.json"]
    assert client.get(f"{base}/workflow").content == workflow


def test_a_workflow_without_its_context_travels_alone(client, project):
    path = "features/feature-002-password-reset/workflow.json"
    workflow = _files()[path]
    report = client.post(
        f"/v1/projects/{project}/archive", content=tar_gz({path: workflow}), headers=ARCHIVE
    ).json()
    assert [(i["path"], i["action"]) for i in report["imported"]] == [(path, "created")]
    exported = client.get(f"/v1/projects/{project}/archive").content
    assert untar(exported) == {path: workflow}
    again = client.post(
        f"/v1/projects/{project}/archive", content=tar_gz({path: workflow}), headers=ARCHIVE
    ).json()
    assert [(i["path"], i["action"]) for i in again["imported"]] == [(path, "unchanged")]
    # Not even its time moved: the archive is the same bytes.
    assert client.get(f"/v1/projects/{project}/archive").content == exported


def test_an_invalid_workflow_member_is_refused_with_its_routes_problem(client, project):
    path = "features/f1/workflow.json"
    report = client.post(
        f"/v1/projects/{project}/archive", content=tar_gz({path: b"[]"}), headers=ARCHIVE
    ).json()
    assert [(r["path"], r["status"]) for r in report["refused"]] == [(path, 422)]


def _write(root: Path, files: dict[str, bytes]) -> None:
    for name, content in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)


def test_push_then_pull_gives_the_golden_files_back(client, project, tmp_path):
    files = _files()
    _write(tmp_path / "source", files)
    store = ContextStoreClient(http=client)
    report = push_directory(store, tmp_path / "source", project)
    assert report.refused == [] and report.skipped == []
    assert len(report.imported) == len(files)
    pull_directory(store, tmp_path / "pulled", project)
    pulled = {
        path.relative_to(tmp_path / "pulled").as_posix(): path.read_bytes()
        for path in (tmp_path / "pulled").rglob("*")
        if path.is_file()
    }
    assert pulled == files
