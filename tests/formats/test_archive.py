"""The archive codec and the layout on their own: no server, no database."""

import gzip
import io
import tarfile

import pytest

from app.archive import layout
from app.archive.layout import Kind, Target
from app.formats import archive
from app.formats.agent_memory import MemoryKind
from app.formats.errors import MalformedDocument
from tests.helpers import tar_gz, workspace_files


def _written(members: dict[str, tuple[bytes, int]]) -> bytes:
    writer = archive.ArchiveWriter()
    chunks = [writer.add(name, content, mtime) for name, (content, mtime) in members.items()]
    return b"".join(chunks) + writer.finish()


def test_the_writer_makes_a_tar_gz_that_tar_reads():
    long_name = "memory/agents/" + "a" * 120 + "/working_context_snapshot.json"
    data = _written({".atari/state.json": (b"{}", 1700000000), long_name: (b"x" * 513, 0)})
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = tar.getmembers()
        assert [m.name for m in members] == [".atari/state.json", long_name]
        assert [m.mtime for m in members] == [1700000000, 0]
        assert all(m.mode == 0o600 and m.uid == m.gid == 0 and m.uname == "" for m in members)
        assert tar.extractfile(members[1]).read() == b"x" * 513
    assert len(gzip.decompress(data)) % tarfile.RECORDSIZE == 0


def test_the_same_members_give_the_same_bytes():
    members = {"features/f/context.json": (b'{"feature_id": "f"}', 1)}
    assert _written(members) == _written(members)
    assert _written(members) != _written({"features/f/context.json": (b'{"feature_id": "f"}', 2)})


def test_the_reader_yields_types_and_leaves_out_large_contents():
    entries = list(archive.read(gzip.decompress(tar_gz({"a": b"12345", "b": b"1"})), limit=4))
    assert [(e.name, e.type, e.size, e.content) for e in entries] == [
        ("a", archive.EntryType.file, 5, None),
        ("b", archive.EntryType.file, 1, b"1"),
    ]


@pytest.mark.parametrize("raw", [b"", b"hello", b"\0" * 100 + b"junk" * 200])
def test_the_reader_refuses_what_is_not_a_tar(raw):
    with pytest.raises(MalformedDocument):
        list(archive.read(raw, limit=10))


@pytest.mark.parametrize(
    ("name", "safe"),
    [
        ("./mdan/x.json", "mdan/x.json"),
        ("mdan//x.json", "mdan/x.json"),
        ("/etc/passwd", None),
        ("a/../../b", None),
        ("..", None),
        ("a\\..\\b", None),
        ("a/\0b", None),
        ("./", None),
        ("", None),
    ],
)
def test_safe_names(name, safe):
    assert archive.safe_name(name) == safe


def test_every_workspace_file_has_a_kind_and_comes_back_to_its_path():
    paths = {
        Kind.save: layout.save_path,
        Kind.snapshot: layout.snapshot_path,
        Kind.run_state: layout.state_path,
        Kind.run_backup: layout.backup_path,
        Kind.feature_context: layout.context_path,
        Kind.memory_file: layout.memory_file_path,
    }
    for path in workspace_files():
        target = layout.classify(path)
        assert target is not None, path
        if target.kind is Kind.agent_memory:
            assert target.memory_kind is not None
            assert layout.agent_memory_path(target.name, target.memory_kind) == path
        else:
            assert paths[target.kind](target.name) == path


@pytest.mark.parametrize(
    ("path", "target"),
    [
        (".atari/state.json", Target(Kind.run_state, "default")),
        (".atari/runs/r-2/state.json.backup", Target(Kind.run_backup, "r-2")),
        ("mdan/mdan-save-17.json.gz", Target(Kind.save, "mdan-save-17.json.gz")),
        ("memory/agents/a/episodic.jsonl", Target(Kind.agent_memory, "a", MemoryKind.episodic)),
        ("mdan/notes.json", None),
        ("features/f/context.json.bak", None),
        ("memory/agents/a/b/semantic.jsonl", None),
        (".autonomous/context/other.json", None),
    ],
)
def test_classify(path, target):
    assert layout.classify(path) == target
