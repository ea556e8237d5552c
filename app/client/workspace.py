"""A directory the tools write to, as a project archive: pack it for a push, unpack a pull.

Only the files of the layout travel; packing says why it left out each of the others.
Unpacking writes each file atomically (a temporary file in the same directory, fsync, rename)
with mode 0600, and never outside the directory: not through "..", an absolute name, or a
symbolic link already in the directory.
"""

import os
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from app.archive.layout import classify
from app.archive.schemas import SkippedMember
from app.formats.archive import ArchiveWriter, safe_name

FILE_MODE = 0o600

OUTSIDE_LAYOUT = "not a file of the archive layout"
SYMBOLIC_LINK = "a symbolic link (push does not follow links)"
NOT_REGULAR = "not a regular file"


@dataclass
class Packed:
    archive: bytes
    files: list[str]
    skipped: list[SkippedMember] = field(default_factory=list)


def _walk(root: Path) -> Iterator[tuple[str, Path]]:
    """Everything under ``root`` but the directories walked into: files of every kind and
    symbolic links (to directories too, which are not followed), relative path first, in a
    stable order."""
    for directory, subdirectories, files in os.walk(root):
        subdirectories.sort()
        links = [name for name in subdirectories if Path(directory, name).is_symlink()]
        for name in sorted([*files, *links]):
            path = Path(directory, name)
            yield path.relative_to(root).as_posix(), path


def _skip_reason(relative: str, path: Path) -> str | None:
    """Why the entry stays out of the archive; None for a file of the layout."""
    if path.is_symlink():
        return SYMBOLIC_LINK
    if not path.is_file():
        return NOT_REGULAR
    if classify(relative) is None:
        return OUTSIDE_LAYOUT
    return None


def pack(root: Path) -> Packed:
    writer = ArchiveWriter()
    chunks: list[bytes] = []
    packed = Packed(archive=b"", files=[])
    for relative, path in _walk(root):
        reason = _skip_reason(relative, path)
        if reason is not None:
            packed.skipped.append(SkippedMember(path=relative, reason=reason))
            continue
        chunks.append(writer.add(relative, path.read_bytes(), int(path.stat().st_mtime)))
        packed.files.append(relative)
    chunks.append(writer.finish())
    packed.archive = b"".join(chunks)
    return packed


class OutsideDirectory(ValueError):
    """A member whose path would land outside the directory it is unpacked into."""


def target_path(root: Path, name: str) -> Path:
    """Where member ``name`` goes under ``root``; raises OutsideDirectory when it would
    leave it (symbolic links already in ``root`` are resolved to tell)."""
    relative = safe_name(name)
    if relative is None:
        raise OutsideDirectory(f"{name!r} is not a relative path inside the directory")
    base = root.resolve()
    target = (base / relative).resolve()
    if not target.is_relative_to(base) or target == base:
        raise OutsideDirectory(f"{name!r} would be written outside {root}")
    return base / relative


def write_atomically(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            os.fchmod(file.fileno(), FILE_MODE)
            file.write(content)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a crash
    finally:
        os.close(directory)


@dataclass
class Unpacked:
    written: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def unpack(archive: IO[bytes], root: Path) -> Unpacked:
    """Write the layout's files of a .tar.gz into ``root``; anything else is refused."""
    result = Unpacked()
    root.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=archive, mode="r:gz") as tar:
        for member in tar:
            name = safe_name(member.name)
            if not member.isreg() or name is None or classify(name) is None:
                result.refused.append(member.name)
                continue
            try:
                path = target_path(root, name)
            except OutsideDirectory:
                result.refused.append(member.name)
                continue
            extracted = tar.extractfile(member)
            assert extracted is not None
            write_atomically(path, extracted.read())
            result.written.append(name)
    return result
