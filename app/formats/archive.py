"""Project archives: a tar stream compressed with gzip, in the tools' on-disk layout.

Writing is incremental (one member in, its compressed bytes out), so an export never holds
more than one document at a time, and deterministic: mode 0600, owner 0:0 without names,
the mtime the caller gives, a gzip header without a time. The same data gives the same bytes.
Reading takes the whole (already decompressed) tar and yields its members one at a time.
"""

import io
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

from app.formats import gzip as gzip_format
from app.formats.errors import MalformedDocument

MEMBER_MODE = 0o600
BLOCK = tarfile.BLOCKSIZE
# tarfile's and GNU tar's record size: the end of an archive is padded to a multiple of it.
RECORD = tarfile.RECORDSIZE
MEDIA_TYPE = "application/gzip"


def _padding(size: int, unit: int) -> bytes:
    return b"\0" * (-size % unit)


class ArchiveWriter:
    """``add`` each member, then ``finish``; every call returns the gzip bytes it produced."""

    def __init__(self, level: int = 6) -> None:
        # A gzip wrapper whose header holds no time, unlike gzip.GzipFile's; zlib-ng, as stored
        # files are (app/formats/gzip.py).
        self._compressor = gzip_format.compressor(level)
        self._written = 0

    def _write(self, data: bytes) -> bytes:
        self._written += len(data)
        return self._compressor.compress(data)

    def add(self, name: str, content: bytes, mtime: int = 0) -> bytes:
        info = tarfile.TarInfo(name)
        info.size = len(content)
        info.mtime = max(int(mtime), 0)
        info.mode = MEMBER_MODE
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        header = info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
        return self._write(header + content + _padding(len(content), BLOCK))

    def finish(self) -> bytes:
        end = b"\0" * (2 * BLOCK)
        tail = self._write(end + _padding(self._written + len(end), RECORD))
        return tail + self._compressor.flush()


class EntryType(StrEnum):
    file = "file"
    directory = "directory"
    link = "link"
    # A file whose holes the tar does not store (GNU's or PAX's sparse forms): its size is
    # what it expands to, which a few hundred bytes of archive may declare as 60 MiB.
    sparse = "sparse"
    special = "special"


@dataclass(frozen=True)
class Entry:
    name: str
    type: EntryType
    size: int
    content: bytes | None = None
    """Only for files no larger than the reader's ``limit``."""


def _entry_type(member: tarfile.TarInfo) -> EntryType:
    if member.issparse():
        return EntryType.sparse
    if member.isreg():
        return EntryType.file
    if member.isdir():
        return EntryType.directory
    if member.issym() or member.islnk():
        return EntryType.link
    return EntryType.special


class _SparseMapsUnread(tarfile.TarInfo):
    """tarfile's member, whose sparse maps are never read: a sparse member is refused whole
    (``EntryType.sparse``), and tarfile read its map as it read the header, before anyone could
    look at the member: a PAX map of 15 million entries, 270 KB of gzip, took 2 GB, and a map
    that is not numbers raised a ``ValueError`` (2026-11-27). ``sparse`` is set empty: the
    member is still known as sparse. tarfile calls these methods by these names; the tests read
    each form of sparse member, among them 0.1 and 1.0 maps that are not numbers, which
    tarfile's own methods raise on: a Python whose tarfile calls others fails them.
    """

    def _proc_sparse(self, archive: tarfile.TarFile) -> tarfile.TarInfo:
        # GNU's own form: the map is in the header and in extension blocks after it, which
        # are passed over a block at a time, as tarfile's own reading passes them.
        _map, extended, real_size = self._sparse_structs  # type: ignore[attr-defined]  # set by tarfile's frombuf for this type
        del self._sparse_structs  # type: ignore[attr-defined]  # as tarfile's own does
        assert archive.fileobj is not None
        while extended:
            block = archive.fileobj.read(tarfile.BLOCKSIZE)
            if len(block) < tarfile.BLOCKSIZE:
                raise tarfile.ReadError("a sparse member's map is cut short")
            extended = bool(block[504])
        self.sparse = []  # type: ignore[assignment]  # tarfile's own is a list of pairs
        self.offset_data = archive.fileobj.tell()
        archive.offset = self.offset_data + self._block(self.size)  # type: ignore[attr-defined]  # tarfile's own bookkeeping
        self.size = real_size
        return self

    # PAX's forms: 0.0 and 0.1 hold the map in the extended header, 1.0 at the start of the
    # member's data.
    def _proc_gnusparse_00(self, member: tarfile.TarInfo, *_map: object) -> None:
        member.sparse = []  # type: ignore[assignment]  # tarfile's own is a list of pairs

    _proc_gnusparse_01 = _proc_gnusparse_10 = _proc_gnusparse_00


def _text(name: str) -> str:
    """A member's name as text: tarfile decodes the bytes of a name that are not UTF-8 as
    lone surrogates (``surrogateescape``), which no JSON answer can carry (the Python client
    refused its report of such a member); each is U+FFFD here."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def read(tar_bytes: bytes, limit: int) -> Iterator[Entry]:
    """The members of an uncompressed tar, in order. A file over ``limit`` bytes comes
    without its content, and so does a sparse one: its holes would be made whole in memory
    (1,000 members of 60 MiB each held a server's CPU 70 s, from 7 KB of request); a stream
    that is not a tar (or is cut short) is malformed."""
    try:
        with tarfile.open(
            fileobj=io.BytesIO(tar_bytes), mode="r:", tarinfo=_SparseMapsUnread
        ) as tar:
            for member in tar:
                kind = _entry_type(member)
                content = None
                if kind is EntryType.file and member.size <= limit:
                    extracted = tar.extractfile(member)
                    assert extracted is not None
                    content = extracted.read()
                yield Entry(_text(member.name), kind, member.size, content)
    except (tarfile.TarError, EOFError, ValueError, OverflowError, RecursionError) as exc:
        # ValueError: a header field tarfile could not read as a number; OverflowError: a size
        # past what a file can seek to (base-256, or a PAX size of 40 digits); RecursionError:
        # hundreds of chained long-name or PAX headers, which tarfile reads recursively.
        raise MalformedDocument(f"The archive is not a readable tar file: {exc}.") from exc


def safe_name(name: str) -> str | None:
    """The member's path relative to the archive's root ("./" and empty parts dropped), or
    None when it could reach outside it: absolute, "..", a NUL, or nothing at all."""
    if not name or name.startswith("/") or "\0" in name or "\\" in name:
        return None
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if not parts or ".." in parts:
        return None
    return "/".join(parts)
