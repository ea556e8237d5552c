"""A stored document: the exact bytes its tool wrote (or the service rendered), their strong
ETag, and when they last changed; and the one shape every download takes."""

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from app.core.conditional import etag_of
from app.core.db import utcnow


class StoredDocument(Protocol):
    """A row holding a document: every domain's table has these three columns."""

    content: bytes
    etag: str
    updated_at: datetime


def set_content(row: StoredDocument, content: bytes, *, etag: str | None = None) -> None:
    """Store ``content`` in ``row`` with its ETag (given when it was computed from other bytes:
    a gzip-stored save's ETag is its identity bytes') and the time of the change."""
    row.content = content
    row.etag = etag if etag is not None else etag_of(content)
    row.updated_at = utcnow()


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
