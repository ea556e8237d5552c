"""A stored document: the exact bytes its tool wrote (or the service rendered), their strong
ETag, and when they last changed; and the one shape every download takes."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from app.core.conditional import etag_of
from app.core.db import utcnow


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
