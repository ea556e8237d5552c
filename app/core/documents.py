"""A stored document: the exact bytes its tool wrote (or the service rendered), their strong
ETag, and when they last changed; a document kept as its parts (``app/formats/parts.py``); and
the one shape every download takes."""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from app.core.conditional import etag_from, etag_of, tag_digest
from app.core.db import utcnow
from app.formats import parts


class StoredDocument(Protocol):
    """A row holding a document: the tables of every domain but saves (whose file's time is
    ``stored_at``, the one the API shows) have these three columns."""

    content: bytes
    etag: str
    updated_at: datetime


def document_columns(content: bytes) -> dict[str, Any]:
    """A stored document's three columns, by name: ``content``, its strong ETag, and the time
    of the change (for a Core statement's values)."""
    return {"content": content, "etag": etag_of(content), "updated_at": utcnow()}


def set_content(row: StoredDocument, content: bytes) -> None:
    """Store ``content`` in ``row``, with its ETag and the time of the change."""
    columns = document_columns(content)
    row.content = columns["content"]
    row.etag = columns["etag"]
    row.updated_at = columns["updated_at"]


class PartedDocument(StoredDocument, Protocol):
    """A row holding a document as its parts: ``content`` is its head, whose collection at
    ``parts_at`` (None: the head is the whole document) holds members kept in rows of their
    own; ``size_bytes`` is the whole document's size."""

    parts_at: int | None
    size_bytes: int


def whole_content(row: PartedDocument, members: Callable[[], list[bytes]]) -> bytes:
    """The document's bytes: its head joined with its members (read by ``members``, in order),
    or the stored bytes of one kept whole."""
    if row.parts_at is None:
        return row.content
    return parts.join(row.content, row.parts_at, members())


def parted_columns(head: parts.Head, members: list[bytes]) -> dict[str, Any]:
    """The columns of a document stored whole (its members' rows written with it): its ETag
    is its content's, as for any stored document."""
    content = parts.join(head.content, head.at, members)
    return {
        "content": head.content,
        "parts_at": head.at,
        "size_bytes": len(content),
        "etag": etag_of(content),
        "updated_at": utcnow(),
    }


def changed_parts_columns(
    row: PartedDocument,
    head: parts.Head,
    member: bytes | None = None,
    *,
    replaced: bytes | None = None,
) -> dict[str, Any]:
    """The columns after a change to a document kept as its parts: its new head, and the
    member added (or put in place of ``replaced``) if any; the rows of the others are neither
    read nor written.

    The ETag is the previous one hashed with the change, not the whole document's hash, which
    would read every member: still a strong validator. Bytes that differ have different tags
    (by induction from a whole store's content hash: the same previous version and the same
    change give the same bytes), and the tag is stored, so every read of these bytes shows it.
    """
    assert row.parts_at is not None and head.at is not None
    grown = 0
    if member is not None:
        # A document with no member yet is its head alone.
        first = row.size_bytes == len(row.content)
        grown = parts.size_change(head.content, head.at, member, replaced=replaced, first=first)
    change = tag_digest()
    # ``replaced`` too: the change is which member became which (members are unique in their
    # collection: one history entry per bead).
    changed = [piece for piece in (member, replaced) if piece is not None]
    for piece in (row.etag.encode("ascii"), head.content, *changed):
        change.update(len(piece).to_bytes(8, "big"))
        change.update(piece)
    return {
        "content": head.content,
        "parts_at": head.at,
        "size_bytes": row.size_bytes - len(row.content) + len(head.content) + grown,
        "etag": etag_from(change),
        "updated_at": utcnow(),
    }


@dataclass(frozen=True)
class Download:
    """A file as a client downloads it: its name, its strong ETag and its bytes (gzip-compressed
    when ``gzipped``; served as they are to a client that accepts gzip)."""

    filename: str
    etag: str
    content: bytes
    gzipped: bool = False

    @classmethod
    def of(cls, filename: str, content: bytes) -> "Download":
        return cls(filename=filename, etag=etag_of(content), content=content)


class Oversized(Exception):
    """A download's bytes are over what its reader was asked to read (``up_to``), and were not
    read; ``etag`` is the file's when it is known without them (a file rendered from its
    rows has its ETag once rendered). The download takes a turn before it reads them
    (``app/core/responses.py`` ``download``)."""

    def __init__(self, etag: str | None) -> None:
        super().__init__(etag)
        self.etag = etag


# A reader's ``up_to`` that reads a document whatever its size: the largest integer both
# databases bind.
ANY_SIZE = 2**63 - 1


def check_size(etag: str, size: int, up_to: int) -> None:
    """``Oversized`` when ``size`` is over ``up_to``."""
    if size > up_to:
        raise Oversized(etag)
