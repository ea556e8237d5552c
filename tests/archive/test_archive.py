"""The project archive through the API, on SQLite and PostgreSQL."""

import gzip
import io
import json
import math
import tarfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import event

from app.archive import service as archive_service
from app.archive.schemas import ArchiveReport
from app.formats import archive as archive_format
from app.formats.errors import MAX_LISTED
from tests.helpers import (
    GOLDEN,
    assert_problem,
    golden_bytes,
    hold_first_call,
    import_save,
    one_turn_without_wait,
    python_indent2,
    seed_save,
    tar_gz,
    untar,
    workspace_files,
)

ARCHIVE = "application/gzip"


def _url(project: str) -> str:
    return f"/v1/projects/{project}/archive"


def _post(client, project, archive: bytes, **headers: str):
    return client.post(_url(project), content=archive, headers={"Content-Type": ARCHIVE, **headers})


def _export(client, project) -> bytes:
    response = client.get(_url(project))
    assert response.status_code == 200, response.text
    return response.content


def test_a_workspace_round_trips_byte_for_byte(client, project):
    files = workspace_files()
    report = _post(client, project, tar_gz(files)).json()
    assert report["refused"] == [] and report["skipped"] == []
    assert sorted(item["path"] for item in report["imported"]) == sorted(files)
    assert untar(_export(client, project)) == files


def test_members_equal_what_each_export_route_answers(client, project):
    files = workspace_files()
    _post(client, project, tar_gz(files))
    exported = untar(_export(client, project))
    agent = json.loads(golden_bytes("autobyteus/working_context_snapshot.json"))["agent_id"]
    base = f"/v1/projects/{project}"
    routes = {
        f"memory/agents/{agent}/working_context_snapshot.json": (
            f"{base}/agents/{agent}/working-context-snapshot",
            {},
        ),
        f"memory/agents/{agent}/raw_traces.jsonl": (
            f"{base}/agents/{agent}/memory/raw-traces",
            {"Accept": "application/x-ndjson"},
        ),
        "memory/agents/coder_worker_4821/raw_traces_archive.jsonl": (
            f"{base}/agents/coder_worker_4821/memory/raw-traces-archive",
            {"Accept": "application/x-ndjson"},
        ),
        ".atari/state.json.backup": (f"{base}/runs/default/state/backup", {}),
        ".atari/runs/nightly/state.json": (f"{base}/runs/nightly/state", {}),
        ".autonomous/context/failure-memory.json": (
            f"{base}/memory/files/failure-memory.json",
            {},
        ),
    }
    for path, (url, headers) in routes.items():
        assert exported[path] == client.get(url, headers=headers).content, path


def test_an_exported_archive_imports_into_another_project_unchanged(client, project):
    _post(client, project, tar_gz(workspace_files()))
    first = _export(client, project)
    report = _post(client, project + "-copy", first).json()
    assert report["refused"] == [] and report["warnings"] == []
    assert untar(_export(client, project + "-copy")) == untar(first)


def test_the_archive_is_deterministic_and_its_headers_are_fixed(client, project):
    _post(client, project, tar_gz(workspace_files()))
    first = client.get(_url(project))
    assert first.headers["content-type"] == ARCHIVE
    assert first.headers["content-disposition"] == f'attachment; filename="{project}.tar.gz"'
    assert client.get(_url(project)).content == first.content
    with tarfile.open(fileobj=io.BytesIO(first.content), mode="r:gz") as tar:
        for member in tar:
            assert member.isreg() and member.mode == 0o600
            assert (member.uid, member.gid, member.uname, member.gname) == (0, 0, "", "")
            assert member.mtime > 0


def test_the_archive_is_not_compressed_twice(client, project):
    _post(client, project, tar_gz(workspace_files()))
    response = client.get(_url(project), headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in response.headers
    assert untar(response.content) == workspace_files()


def test_a_corrupt_member_is_refused_and_the_rest_imports(client, project):
    files = workspace_files()
    context_path = next(path for path in files if path.startswith("features/"))
    files[context_path] = b'{"feature_id": "checkout-flow",'
    files[".atari/runs/nightly/state.json"] = b'{"version": 2, "status": 7}'
    report = _post(client, project, tar_gz(files)).json()
    refused = {item["path"]: item for item in report["refused"]}
    assert set(refused) == {context_path}
    assert refused[context_path]["status"] == 400
    assert refused[context_path]["type"] == "urn:context-store:problem:malformed-body"
    assert refused[context_path]["title"] == "Bad Request"
    # state.json takes atari's load: an unreadable file is set aside, not refused.
    nightly = next(i for i in report["imported"] if i["path"] == ".atari/runs/nightly/state.json")
    assert nightly["action"] == "reset"
    assert len(report["imported"]) == len(files) - 1
    assert client.get(f"/v1/projects/{project}/features/checkout-flow/context").status_code == 404
    backup = client.get(f"/v1/projects/{project}/runs/nightly/state/backup")
    assert backup.content == b'{"version": 2, "status": 7}'


def test_an_invalid_member_reports_the_problem_of_its_route(client, project):
    snapshot = json.loads(golden_bytes("autobyteus/working_context_snapshot.json"))
    snapshot["schema_version"] = 9
    members = {
        "memory/agents/someone-else/working_context_snapshot.json": json.dumps(snapshot).encode(),
        "mdan/mdan-save-1.json": b'{"version": "2.0"}',
    }
    report = _post(client, project, tar_gz(members)).json()
    assert report["imported"] == []
    by_path = {item["path"]: item for item in report["refused"]}
    direct = client.put(
        f"/v1/projects/{project}/agents/someone-else/working-context-snapshot",
        content=json.dumps(snapshot).encode(),
        headers={"Content-Type": "application/json"},
    ).json()
    refused = by_path["memory/agents/someone-else/working_context_snapshot.json"]
    assert refused["status"] == 422
    assert refused["errors"] == direct["errors"]
    assert by_path["mdan/mdan-save-1.json"]["status"] == 422
    assert client.get(f"/v1/projects/{project}").status_code == 404


def test_a_member_named_outside_the_identifier_rule_is_refused(client, project):
    report = _post(client, project, tar_gz({"features/a b/context.json": b"{}"})).json()
    assert report["refused"][0]["status"] == 422
    assert report["refused"][0]["errors"][0]["path"] == "path.feature"


def _special_members() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:

        def add(name: str, kind: bytes = tarfile.REGTYPE, content: bytes = b"{}", **extra):
            info = tarfile.TarInfo(name)
            info.type = kind
            info.size = len(content) if kind == tarfile.REGTYPE else 0
            for attribute, value in extra.items():
                setattr(info, attribute, value)
            tar.addfile(info, io.BytesIO(content) if kind == tarfile.REGTYPE else None)

        add("../features/x/context.json")
        add("/etc/passwd")
        add("features/../../escape.json")
        add(".atari/state.json", tarfile.SYMTYPE, linkname="/etc/passwd")
        add("features/y/context.json", tarfile.LNKTYPE, linkname="features/x/context.json")
        add("memory/agents/a/episodic.jsonl", tarfile.CHRTYPE, devmajor=1, devminor=3)
        add("features", tarfile.DIRTYPE)
        add("notes/readme.txt", content=b"hello")
        add("./.atari/runs/r1/state.json.backup", content=b"kept")
    return buffer.getvalue()


def test_traversal_links_and_devices_are_refused_unknown_files_skipped(client, project):
    report = _post(client, project, _special_members()).json()
    refused = [item["path"] for item in report["refused"]]
    assert refused == [
        "../features/x/context.json",
        "/etc/passwd",
        "features/../../escape.json",
        ".atari/state.json",
        "features/y/context.json",
        "memory/agents/a/episodic.jsonl",
        # A backup needs its run's state: there is none.
        ".atari/runs/r1/state.json.backup",
    ]
    assert all(item["status"] in (404, 422) for item in report["refused"])
    assert report["skipped"] == [{"path": "notes/readme.txt", "reason": "not a file of the layout"}]
    assert report["imported"] == []


SPARSE_SIZE = 60 * 1024 * 1024


def _gnu_sparse(name: str, stored: bytes, *, extension_blocks: int = 0) -> bytes:
    """A member in GNU's own sparse form (type ``S``): ``stored`` at the end of a file of
    ``SPARSE_SIZE`` bytes whose holes the tar does not hold; its map goes on in
    ``extension_blocks`` blocks after the header."""
    info = tarfile.TarInfo(name)
    info.type = tarfile.GNUTYPE_SPARSE
    info.size = len(stored)
    header = bytearray(info.tobuf(tarfile.GNU_FORMAT))

    def octal(number: int) -> bytes:
        return b"%011o\0" % number

    header[386:410] = octal(SPARSE_SIZE - len(stored)) + octal(len(stored))  # the map
    header[482] = bool(extension_blocks)
    header[483:495] = octal(SPARSE_SIZE)  # the real size
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    blocks = b""
    for number in range(extension_blocks):
        block = bytearray(octal(0) + octal(1) + b"\0" * (tarfile.BLOCKSIZE - 24))
        block[504] = number + 1 < extension_blocks
        blocks += bytes(block)
    return bytes(header) + blocks + stored + b"\0" * (-len(stored) % tarfile.BLOCKSIZE)


def _pax_sparse(name: str, headers: dict[str, str], data: bytes) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.pax_headers = headers
    return info


# PAX's sparse forms, each with what tarfile would read as its map: versions 0.0, 0.1 and 1.0
# (its map at the start of the data), well-formed and not numbers (tarfile's own reading of a
# 0.1 or 1.0 map that is not numbers raises: these fail if it is ever called).
_PAX_SPARSE = [
    ("junk/f.bin", {"GNU.sparse.offset": "0", "GNU.sparse.numbytes": "2"}, b"{}"),  # 0.0
    ("mdan/mdan-save-1705314226.json", {"GNU.sparse.map": "0,2"}, b"{}"),
    ("junk/b.bin", {"GNU.sparse.map": "a,b"}, b"{}"),
    ("junk/c.bin", {"GNU.sparse.major": "1", "GNU.sparse.minor": "0"}, b"1\n0\n2\n{}"),
    ("junk/d.bin", {"GNU.sparse.major": "1", "GNU.sparse.minor": "0"}, b"abc\n"),
    ("junk/e.bin", {"GNU.sparse.major": "1", "GNU.sparse.minor": "0"}, b"9" * 600),
]


def _sparse_members() -> bytes:
    """A save, a feature's context and files outside the layout, sparse in GNU's form (one
    with its map's extension blocks), then in PAX's, beside a file that imports."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        gnu = [
            _gnu_sparse("mdan/mdan-save-1705314225.json", b"{}"),
            _gnu_sparse("features/f/context.json", b"{}"),
            _gnu_sparse("junk/a.bin", b"{}", extension_blocks=3),
        ]
        for member in gnu:
            tar.fileobj.write(member)  # type: ignore[union-attr]  # tarfile's writer has no such member
            tar.offset += len(member)
        for name, headers, data in _PAX_SPARSE:
            # 0.1 names its size GNU.sparse.size, 1.0 GNU.sparse.realsize, as GNU tar writes
            # them: with the other's, tarfile would read a 1.0 member as 0.0.
            size = "GNU.sparse.realsize" if "GNU.sparse.major" in headers else "GNU.sparse.size"
            tar.addfile(
                _pax_sparse(name, headers | {size: str(SPARSE_SIZE)}, data), io.BytesIO(data)
            )
        decision = b'[{"id": "dec-1", "decision": "x"}]'
        info = tarfile.TarInfo(".autonomous/context/key-decisions.json")
        info.size = len(decision)
        tar.addfile(info, io.BytesIO(decision))
    return gzip.compress(buffer.getvalue())


def test_sparse_members_are_refused_and_never_expanded(client, project):
    """A sparse member declares its expanded size: read, each made 60 MiB of zeros in memory,
    and a thousand of them, 7 KB of request, held a server's CPU 70 s (a helper's live run,
    2026-11-27), skipped or not."""
    archive = _sparse_members()
    report = _post(client, project, archive).json()
    assert [item["path"] for item in report["refused"]] == [
        "mdan/mdan-save-1705314225.json",
        "features/f/context.json",
        "junk/a.bin",
        *(name for name, _headers, _data in _PAX_SPARSE),
    ]
    assert {item["detail"] for item in report["refused"]} == {
        "A sparse file (its holes not stored in the tar) is not imported: archive it whole."
    }
    imported = [item["path"] for item in report["imported"]]
    assert imported == [".autonomous/context/key-decisions.json"]
    entries = list(archive_format.read(gzip.decompress(archive), 64 * 1024 * 1024))
    sparse = [entry for entry in entries if entry.size == SPARSE_SIZE]
    assert len(sparse) == 3 + len(_PAX_SPARSE)
    assert all(entry.type == "sparse" and entry.content is None for entry in sparse)


def _flood(members: int) -> bytes:
    """An archive of ``members`` refused members (absolute paths), as many skipped ones
    (files outside the layout) and as many saves that import with a warning each."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for number in range(members):
            for name, content in (
                (f"/abs/{number}", b"{}"),
                (f"notes/{number}.txt", b"x"),
                (f"mdan/mdan-save-{1705314225 + number}.json", b'{"version": "1.0"}'),
            ):
                info = tarfile.TarInfo(name)
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def test_a_report_lists_at_most_a_hundred_of_each_and_says_so(client, project):
    """Each refused member was a whole problem in the answer, and with an Idempotency-Key in
    the database too: 130,000 of them, an 806 KB upload, answered 38.8 MB and stored it
    (a helper's live run, 2026-11-27). Every save imported is still listed: each is a write."""
    flood = _flood(150)
    report = _post(client, project, flood, **{"Idempotency-Key": "flood-1"}).json()
    assert len(report["refused"]) == len(report["skipped"]) == MAX_LISTED
    assert len(report["warnings"]) == MAX_LISTED
    assert report["refused_truncated"] and report["skipped_truncated"]
    assert report["warnings_truncated"]
    assert len(report["imported"]) == 150
    replayed = _post(client, project, flood, **{"Idempotency-Key": "flood-1"}).json()
    assert replayed == report
    few = _post(client, project, _flood(2)).json()
    assert not (few["refused_truncated"] or few["skipped_truncated"] or few["warnings_truncated"])


@pytest.fixture
def small_limits(app) -> Iterator[None]:
    settings = app.state.settings
    app.state.settings = settings.model_copy(
        update={"max_body_bytes": 2000, "max_bulk_body_bytes": 200_000}
    )
    yield
    app.state.settings = settings


def test_an_oversized_member_is_refused(client, project, small_limits):
    files = {
        ".atari/state.json": golden_bytes("atari-state-v2.json"),
        "features/big/context.json": b" " * 2001,
    }
    report = _post(client, project, tar_gz(files)).json()
    assert [item["path"] for item in report["imported"]] == [".atari/state.json"]
    assert report["refused"][0]["status"] == 413


def test_an_archive_that_expands_past_the_limit_is_413(client, project, small_limits):
    bomb = tar_gz({"notes/zeros.txt": b"\0" * 300_000})
    assert len(bomb) < 200_000
    assert_problem(_post(client, project, bomb), 413)


def test_an_archive_of_gzip_saves_that_inflate_past_the_limit_in_total_is_413(
    client, project, small_limits
):
    # Each member is small, and inflates to a save under the bulk limit; together they
    # inflate to far more (the 21 KB archive inflated to 720 MiB of saves).
    document = seed_save()
    document["x_padding"] = ["the same line, again and again"] * 2000
    save = python_indent2(document)
    assert 50_000 < len(save) < 200_000
    members = {
        f"mdan/mdan-save-{1705314225 + n}.json.gz": gzip.compress(save, mtime=0) for n in range(12)
    }
    bomb = tar_gz(members)
    assert len(bomb) < 20_000
    problem = assert_problem(_post(client, project, bomb), 413)
    assert "200000" in problem["detail"]
    assert client.get(f"/v1/projects/{project}").status_code == 404


@pytest.mark.parametrize(
    "body",
    [b"", b"not a tar at all", gzip.compress(b"not a tar either", mtime=0)],
    ids=["empty", "not-gzip", "gzip-not-tar"],
)
def test_an_unreadable_archive_is_400_and_imports_nothing(client, project, body):
    assert_problem(_post(client, project, body), 400)
    assert client.get(f"/v1/projects/{project}").status_code == 404


def test_a_truncated_archive_imports_nothing(client, project):
    archive = gzip.decompress(tar_gz(workspace_files()))
    assert_problem(_post(client, project, gzip.compress(archive[:3000])), 400)
    assert client.get(f"/v1/projects/{project}").status_code == 404


def test_other_media_types_are_415(client, project):
    response = client.post(
        _url(project), content=tar_gz({}), headers={"Content-Type": "application/json"}
    )
    assert_problem(response, 415)


def test_pushing_the_same_workspace_twice_changes_nothing(client, project):
    archive = tar_gz(workspace_files())
    _post(client, project, archive)
    counts = client.get(f"/v1/projects/{project}").json()["counts"]
    again = _post(client, project, archive).json()
    assert again["refused"] == []
    actions = {item["path"]: item["action"] for item in again["imported"]}
    assert actions["mdan/mdan-save-1705314225.json"] == "unchanged"
    assert {actions[p] for p in actions if p.endswith(".jsonl")} == {"unchanged"}
    assert client.get(f"/v1/projects/{project}").json()["counts"] == counts


def test_memory_files_append_only_their_new_lines(client, project):
    lines = golden_bytes("autobyteus/raw_traces.jsonl").splitlines(keepends=True)
    path = "memory/agents/a1/raw_traces.jsonl"
    first = b"".join(lines[:2])
    _post(client, project, tar_gz({path: first}))
    report = _post(client, project, tar_gz({path: b"".join(lines)})).json()
    assert report["imported"][0]["result"] == {"appended": len(lines) - 2}
    assert untar(_export(client, project))[path] == b"".join(lines)
    diverged = _post(client, project, tar_gz({path: b"".join(lines[1:])})).json()
    assert diverged["refused"][0]["status"] == 409


def test_a_memory_file_holding_a_secret_pushed_twice_appends_nothing(client, project):
    # The stored lines are redacted: the file's lines compare with them as they would be
    # stored, not as sent (before, the second push was a 409, "the two histories differ").
    path = "memory/agents/a1/episodic.jsonl"
    item = {
        "id": "ep1",
        "ts": 1.0,
        "turn_ids": ["t1"],
        "summary": "used the key sk-ant-api03-Qz7Wk2Lm9Xc4Vb8Nn1Pp6Rr3Tt5Yy0Uu2Ii to deploy",
        "salience": 0.5,
    }
    archive = tar_gz({path: json.dumps(item).encode() + b"\n"})
    assert _post(client, project, archive).json()["imported"][0]["action"] == "appended"
    again = _post(client, project, archive).json()
    assert again["refused"] == []
    assert again["imported"][0]["action"] == "unchanged"


AUTOBYTEUS_AGENT = "memory/agents/coder_worker_4821"


def _agent_files(directory) -> dict[str, bytes]:
    return {f"{AUTOBYTEUS_AGENT}/{path.name}": path.read_bytes() for path in directory.iterdir()}


def test_a_push_after_autobyteus_pruned_raw_traces_prunes_them_too(client, project):
    # The same agent as autobyteus left it between its two compactions, then after both.
    earlier = _agent_files(GOLDEN / "autobyteus" / "before-second-compaction")
    later = _agent_files(GOLDEN / "workspace" / AUTOBYTEUS_AGENT)
    assert _post(client, project, tar_gz(earlier)).json()["refused"] == []
    report = _post(client, project, tar_gz(later)).json()
    assert report["refused"] == []
    imported = {item["path"]: item for item in report["imported"]}
    raw_traces = imported[f"{AUTOBYTEUS_AGENT}/raw_traces.jsonl"]
    # turn_0003's four traces went to the archive; turns 5 and 6 are new.
    assert (raw_traces["action"], raw_traces["result"]) == ("pruned", {"pruned": 4, "appended": 8})
    assert imported[f"{AUTOBYTEUS_AGENT}/raw_traces_archive.jsonl"]["result"] == {"appended": 4}
    assert [w["message"] for w in report["warnings"]] == [
        "4 raw trace(s) of 1 turn(s) pruned, as in the file"
    ]
    exported = untar(_export(client, project))
    assert {path: exported[path] for path in later} == later
    # A rebuild reads the turns autobyteus reads.
    agent_url = f"/v1/projects/{project}/agents/coder_worker_4821"
    assert client.delete(f"{agent_url}/working-context-snapshot").status_code == 204
    reference = json.loads(golden_bytes("autobyteus/restored-by-rebuild.json"))
    restored = client.post(
        f"{agent_url}/restore", json={"system_prompt": reference["messages"][0]["content"]}
    ).json()
    assert restored["snapshot"]["messages"] == reference["messages"]
    again = _post(client, project, tar_gz(later)).json()["imported"]
    assert {item["action"] for item in again if item["path"].endswith(".jsonl")} == {"unchanged"}


def test_a_reset_state_supersedes_the_backup_in_the_same_archive(client, project):
    files = {".atari/state.json.backup": b"older backup", ".atari/state.json": b"garbage"}
    report = _post(client, project, tar_gz(files)).json()
    assert report["skipped"][0]["path"] == ".atari/state.json.backup"
    backup = client.get(f"/v1/projects/{project}/runs/default/state/backup")
    assert backup.content == b"garbage"
    assert any(w["message"].startswith("reset:") for w in report["warnings"])


def test_a_backup_before_its_state_in_the_tar_still_lands(client, project):
    files = {
        ".atari/state.json.backup": b"older",
        ".atari/state.json": golden_bytes("atari-state-v2.json"),
    }
    report = _post(client, project, tar_gz(files)).json()
    assert report["refused"] == []
    assert [item["path"] for item in report["imported"]][-1] == ".atari/state.json.backup"
    assert untar(_export(client, project)) == {
        ".atari/state.json": files[".atari/state.json"],
        ".atari/state.json.backup": b"older",
    }


def test_save_warnings_are_reported_and_the_name_is_kept(client, project):
    document = seed_save()
    del document["configuration"]["log_level"]
    report = _post(client, project, tar_gz({"mdan/mdan-save-9.json": python_indent2(document)}))
    body = report.json()
    assert body["imported"][0]["status"] == 201
    assert body["imported"][0]["result"]["filename"] == "mdan-save-9.json"
    messages = [(w["pointer"], w["message"]) for w in body["warnings"]]
    assert messages == [("/configuration/log_level", "missing; default 'INFO' used")]
    assert list(untar(client.get(f"/v1/projects/{project}/archive").content)) == [
        "mdan/mdan-save-9.json"
    ]


def test_a_large_save_travels_as_json_gz(client, project):
    document = seed_save()
    document["x_padding"] = [f"line {n} of filler" for n in range(80_000)]
    receipt = import_save(client, project, document).json()
    exported = untar(_export(client, project))
    name = f"mdan/{receipt['filename']}.gz"
    assert list(exported) == [name]
    assert gzip.decompress(exported[name]) == python_indent2(document)
    report = _post(client, project + "-b", tar_gz(exported)).json()
    assert report["refused"] == []
    assert untar(_export(client, project + "-b")) == exported


def test_two_saves_of_the_same_second_export_the_later_one(client, project):
    first = seed_save()
    second = seed_save()
    second["metadata"]["save_count"] = 99
    import_save(client, project, first)
    import_save(client, project, second)
    exported = untar(_export(client, project))
    assert exported == {"mdan/mdan-save-1705314225.json": python_indent2(second)}


def test_archive_imports_do_not_prune_saves(client, project):
    complete = seed_save()
    complete["phases"]["status"] = {phase: "complete" for phase in complete["phases"]["status"]}
    complete["timestamp"] = "2024-02-01T00:00:00Z"
    import_save(client, project, seed_save())
    _post(client, project, tar_gz({"mdan/mdan-save-1.json": python_indent2(complete)}))
    assert len(client.get(f"/v1/projects/{project}/saves").json()["items"]) == 2


def test_idempotency_key_replays_the_report(client, project):
    archive = tar_gz(workspace_files())
    first = _post(client, project, archive, **{"Idempotency-Key": "push-1"})
    again = _post(client, project, archive, **{"Idempotency-Key": "push-1"})
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    other = _post(client, project, tar_gz({}), **{"Idempotency-Key": "push-1"})
    assert_problem(other, 422)


def test_the_writes_commit_batch_by_batch(app, client, project, monkeypatch):
    # Each batch is a transaction of its own, so that other writers take the database's
    # writer between two batches; the report is the same as in one transaction.
    monkeypatch.setattr(archive_service, "BATCH_MEMBERS", 2)
    files = workspace_files()
    archive = tar_gz(files)
    commits: list[object] = []
    engine = app.state.database.writer
    record = commits.append
    event.listen(engine, "commit", record)
    try:
        report = _post(client, project, archive, **{"Idempotency-Key": "batched"}).json()
    finally:
        event.remove(engine, "commit", record)
    assert len(report["imported"]) == len(files)
    assert len(commits) == math.ceil(len(files) / 2)
    assert untar(_export(client, project)) == files
    replayed = _post(client, project, archive, **{"Idempotency-Key": "batched"})
    assert replayed.headers["idempotent-replayed"] == "true"
    assert replayed.json() == report


def test_another_tenant_sees_no_archive(client, other_client, project):
    _post(client, project, tar_gz(workspace_files()))
    assert_problem(other_client.get(_url(project)), 404)
    assert_problem(client.get(_url(project + "-none")), 404)


def test_an_empty_archive_reports_nothing(client, project):
    report = _post(client, project, tar_gz({})).json()
    assert report == {
        "imported": [],
        "warnings": [],
        "warnings_truncated": False,
        "refused": [],
        "refused_truncated": False,
        "skipped": [],
        "skipped_truncated": False,
    }


def _members(client, project: str, **params: object) -> list[str]:
    paths: list[str] = []
    cursor = None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        page = client.get(f"{_url(project)}/members", params=query)
        assert page.status_code == 200, page.text
        assert len(page.json()["items"]) <= params.get("limit", 50)
        paths += [item["path"] for item in page.json()["items"]]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            return paths


def test_the_members_are_listed_without_the_archive_in_pages(client, project):
    files = workspace_files()
    _post(client, project, tar_gz(files))
    large = seed_save()
    large["x_padding"] = [f"line {n} of filler" for n in range(80_000)]
    import_save(client, project, large)  # kept gzipped: listed as the archive holds it
    exported = sorted(untar(_export(client, project)))
    assert any(path.endswith(".json.gz") for path in exported)
    assert _members(client, project) == exported
    assert _members(client, project, limit=2) == exported  # keyset pages, in path order


def test_the_members_of_another_tenant_or_a_bad_cursor_are_refused(client, other_client, project):
    _post(client, project, tar_gz(workspace_files()))
    assert_problem(other_client.get(f"{_url(project)}/members"), 404)
    assert_problem(client.get(f"{_url(project)}/members", params={"cursor": "bm90IG1pbmU"}), 422)
    assert_problem(client.get(f"{_url(project)}/members", params={"limit": 501}), 422)


def test_a_tenants_imports_beyond_its_turns_wait_then_get_a_429(
    app, client, other_client, project, monkeypatch
):
    """Imports take turns as exports do: one tenant's 18 large imports at once took every
    worker thread (a helper's live run, 2026-11-27), and every other request waited."""
    one_turn_without_wait(app.state.bulk_imports, monkeypatch)
    entered, release = hold_first_call(monkeypatch, archive_service, "prepare_import")
    archive = tar_gz({"notes/readme.txt": b"x"})
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(_post, client, project, archive)
        assert entered.wait(30)
        refused = _post(client, project, archive)
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "5"
        assert "imports under the bulk limit are all running" in refused.json()["detail"]
        assert _post(other_client, project, archive).status_code == 200
        release.set()
        assert first.result(30).status_code == 200
    assert _post(client, project, archive).status_code == 200


def test_a_member_name_that_is_not_utf8_is_reported_as_text(client, project):
    """A directory named by bytes that are not UTF-8 (``features/\\xff/``): the report named
    it with a lone surrogate, which the Python client, and any strict JSON reader, refused
    (``context-store push`` died on its own server's report). Each such byte is U+FFFD."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", errors="surrogateescape") as tar:
        for name in ("features/ok1/context.json", "features/\udcff/context.json"):
            data = b'{"feature_id": "x"}'
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    answer = _post(client, project, buffer.getvalue())
    report = ArchiveReport.model_validate_json(answer.content)
    assert [item.path for item in report.refused] == ["features/\ufffd/context.json"]
    assert [item.path for item in report.imported] == ["features/ok1/context.json"]


def test_a_retry_of_a_finished_archive_import_is_answered_while_the_turns_are_taken(
    app, client, project, monkeypatch
):
    one_turn_without_wait(app.state.bulk_imports, monkeypatch)
    archive = tar_gz({"notes/readme.txt": b"x"})
    first = _post(client, project, archive, **{"Idempotency-Key": "finished-1"})
    assert first.status_code == 200
    entered, release = hold_first_call(monkeypatch, archive_service, "prepare_import")
    with ThreadPoolExecutor(1) as pool:
        other = pool.submit(_post, client, project, archive)
        assert entered.wait(30)
        retried = _post(client, project, archive, **{"Idempotency-Key": "finished-1"})
        release.set()
        assert other.result(30).status_code == 200
    assert retried.status_code == 200 and retried.content == first.content


def _header(name: bytes, size_field: bytes, kind: bytes = b"0") -> bytes:
    """A ustar header written field by field: sizes tarfile's writer never writes."""
    header = bytearray(tarfile.BLOCKSIZE)
    header[0 : len(name)] = name
    header[100:108] = b"0000644\0"
    header[124:136] = size_field
    header[156:157] = kind
    header[257:265] = b"ustar\x0000"
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header)


@pytest.mark.parametrize(
    "tar",
    [
        _header(b"a", b"\x80" + b"\xff" * 11) + b"\0" * 1024,  # base-256: past what a file seeks
        (_header(b"././@LongLink", b"%011o\0" % 4, b"L") + b"abc\0".ljust(512, b"\0")) * 400
        + _header(b"a", b"%011o\0" % 0)
        + b"\0" * 1024,  # 400 long names in a row: tarfile reads them recursively
    ],
    ids=["huge size", "chained long names"],
)
def test_a_tar_whose_headers_tarfile_cannot_follow_is_a_400(client, project, tar):
    """An OverflowError and a RecursionError from tarfile were 500s (a review's fuzz)."""
    assert_problem(_post(client, project, gzip.compress(tar)), 400)
