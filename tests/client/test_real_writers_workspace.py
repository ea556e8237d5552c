"""The files the tools' real writers wrote, pushed and pulled back: `diff -r` of the two
workspaces shows no difference but the documented ones.

`tests/formats/golden/workspace/` is one workspace in the tools' layout, every file written
by its tool's own code (or the same encoder with the same struct), by the generators under
`tests/formats/generators/`. Each domain's tests also round-trip these files through their own
routes; this one takes the way a user switching to the service takes: `push`, then `pull`.
"""

import json
import shutil
import subprocess
from pathlib import Path

from app.cli import pull_directory, push_directory
from app.client import ContextStoreClient
from tests.helpers import GOLDEN

WORKSPACE = GOLDEN / "workspace"

# The only files that come back different, and why (the README says the same).
DOCUMENTED_DIFFERENCES = {
    "mdan/mdan-save-1705314500.json": "a secret in a conversation turn: stored redacted",
}


def _only_redactions_differ(original: object, pulled: object, pointer: str = "") -> list[str]:
    """Where the two documents differ other than by a string the service redacted."""
    if isinstance(original, dict) and isinstance(pulled, dict):
        if list(original) != list(pulled):
            return [f"{pointer}: keys"]
        return [
            difference
            for key in original
            for difference in _only_redactions_differ(
                original[key], pulled[key], f"{pointer}/{key}"
            )
        ]
    if isinstance(original, list) and isinstance(pulled, list) and len(original) == len(pulled):
        return [
            difference
            for index, (left, right) in enumerate(zip(original, pulled, strict=True))
            for difference in _only_redactions_differ(left, right, f"{pointer}/{index}")
        ]
    if original == pulled or (isinstance(pulled, str) and "[REDACTED:" in pulled):
        return []
    return [pointer]


def _differing(left: Path, right: Path) -> tuple[set[str], list[str]]:
    """``diff -rq`` of the two trees: the files whose bytes differ, and every other line."""
    result = subprocess.run(
        ["diff", "-rq", str(left), str(right)], capture_output=True, text=True, check=False
    )
    differing: set[str] = set()
    other: list[str] = []
    for line in result.stdout.splitlines():
        if line.startswith("Files ") and line.endswith(" differ"):
            name = line.removeprefix(f"Files {left}/").split(" and ", 1)[0]
            differing.add(name)
        else:
            other.append(line)
    return differing, other


def _files(root: Path) -> list[str]:
    return sorted(path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file())


def test_the_corpus_holds_every_tools_files():
    tools = ("mdan/", "memory/agents/", ".atari/", "features/", ".autonomous/context/")
    files = _files(WORKSPACE)
    assert [tool for tool in tools if not any(name.startswith(tool) for name in files)] == []


def test_push_then_pull_gives_back_what_the_real_writers_wrote(client, project, tmp_path):
    source = tmp_path / "source"
    shutil.copytree(WORKSPACE, source)
    store = ContextStoreClient(http=client)
    report = push_directory(store, source, project)
    assert report.refused == [], report.refused
    assert report.skipped == [], report.skipped

    pulled = tmp_path / "pulled"
    pull_directory(store, pulled, project)
    differing, other = _differing(source, pulled)
    assert other == [], "\n".join(other)
    assert differing == set(DOCUMENTED_DIFFERENCES)
    for name in differing:
        original = json.loads((source / name).read_bytes())
        assert _only_redactions_differ(original, json.loads((pulled / name).read_bytes())) == []


def test_pushing_the_same_workspace_twice_changes_nothing(client, project, tmp_path):
    store = ContextStoreClient(http=client)
    push_directory(store, WORKSPACE, project)
    first = tmp_path / "first"
    pull_directory(store, first, project)
    counts = client.get(f"/v1/projects/{project}").json()["counts"]

    second_report = push_directory(store, WORKSPACE, project)
    assert second_report.refused == []
    assert {member.path: member.action for member in second_report.imported} == {
        path: "unchanged" for path in _files(WORKSPACE)
    }
    second = tmp_path / "second"
    pull_directory(store, second, project)
    assert _differing(first, second) == (set(), [])
    assert client.get(f"/v1/projects/{project}").json()["counts"] == counts


def test_a_file_stored_redacted_is_unchanged_when_pushed_again(client, project, tmp_path):
    """The stored copy of a file holding a secret never equals the file on disk; pushing it
    again still changes nothing."""
    source = tmp_path / "source"
    shutil.copytree(WORKSPACE, source)
    context_file = source / "features/feature-002-password-reset/context.json"
    context = json.loads(context_file.read_bytes())
    context["deploy_note"] = "staging uses sk-proj-Zq7Xw2Lm9Rt4Vb8Nc3Kd6Hs1Pq5Ty0Wx"
    context_file.write_text(json.dumps(context, indent=2))
    store = ContextStoreClient(http=client)
    push_directory(store, source, project)
    etag = client.get(f"/v1/projects/{project}/features/feature-002-password-reset/context")
    report = push_directory(store, source, project)
    actions = {member.path: member.action for member in report.imported}
    assert actions["features/feature-002-password-reset/context.json"] == "unchanged"
    again = client.get(f"/v1/projects/{project}/features/feature-002-password-reset/context")
    assert again.headers["etag"] == etag.headers["etag"]
    assert b"sk-proj-" not in again.content
