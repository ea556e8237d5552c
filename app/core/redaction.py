"""The redaction setting (``CONTEXT_STORE_REDACT``) and what one request redacted.

Services call ``for_storage`` on every document they are about to store; ``RequestRedactions``
sets, for each request, whether redaction is on and where the sites it finds are collected, and
adds them to the response as its ``Redactions`` header (a receipt's own body may list them too).
"""

import json
from contextvars import ContextVar, Token
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.responses import Response

from app.core.json import dumps
from app.formats import jsondoc
from app.redaction import Redactions, holds_a_head, redact_document

HEADER = "Redactions"
# A header, not a body: bounded. The counts by kind are always whole; the sites are the first.
HEADER_SITES = 50

_enabled: ContextVar[bool] = ContextVar("redaction_enabled", default=True)
_collected: ContextVar[Redactions | None] = ContextVar("redactions_collected", default=None)


def enabled() -> bool:
    return _enabled.get()


def for_storage(document: Any, redactions: Redactions | None = None) -> Any:
    """``document`` redacted in place when the setting is on (the new value only for a bare
    string); its sites go to ``redactions`` and to the request's collection."""
    if not _enabled.get():
        return document
    found = Redactions()
    document = redact_document(document, found)
    if redactions is not None:
        redactions.sites.update(found.sites)
    collected = _collected.get()
    if collected is not None:
        collected.sites.update(found.sites)
    return document


def bytes_for_storage(raw: bytes) -> bytes:
    """A file kept as bytes (not a document of its format, e.g. the state atari set aside),
    redacted when the setting is on: the same bytes when nothing is found. Bytes that are JSON
    are redacted as a document (a secret hides from text patterns behind JSON's escapes, and a
    text replacement could break the JSON), then written again with two-space indents; any
    other bytes are redacted as text, those that are not UTF-8 kept as they are around what is
    replaced (``surrogateescape``): a state file in Latin-1 was kept whole, its keys with it."""
    if not _enabled.get():
        return raw
    try:
        document = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        text = raw.decode("utf-8", "surrogateescape")
        redacted = for_storage(text)
        return raw if redacted == text else redacted.encode("utf-8", "surrogateescape")
    found = Redactions()
    document = for_storage(document, found)
    if not found.sites:
        return raw
    # Written as Python tools write JSON files: two-space indents, ASCII.
    return jsondoc.dumps_indent2(document)


def json_without_secrets(body: bytes) -> bytes:
    """JSON as it is sent, with any secret in it redacted (the same bytes when there is none).
    It is walked only when a scan of its bytes cannot tell (an escape other than a quote's in
    it, or a head found): the walk cost a decision's receipt 15-25 µs of CPU, the scan 2-3."""
    only_quotes_escaped = body.count(b"\\") == body.count(b'\\"')
    if only_quotes_escaped and not holds_a_head(body):
        return body
    found = Redactions()
    document = redact_document(json.loads(body), found)
    return dumps(document) if found else body


def answer_without_secrets(response: Response) -> Response:
    """A write's JSON answer, with any secret it quotes redacted (in place): a receipt may
    quote what the client sent (a file's reason to be unreadable, an archive member's path)."""
    if not _enabled.get() or not response.headers.get("content-type", "").startswith(
        "application/json"
    ):
        return response
    # bytes() of a bytes object is that object; Starlette types a body as bytes or memoryview.
    body = bytes(response.body)
    redacted = json_without_secrets(body)
    if redacted is not body:
        response.body = redacted
        response.headers["content-length"] = str(len(redacted))
    return response


def header_value(redactions: Redactions) -> str:
    listing = redactions.listing()
    summary: dict[str, object] = {"counts": redactions.by_kind(), "sites": listing[:HEADER_SITES]}
    if len(listing) > HEADER_SITES:
        summary["sites_omitted"] = len(listing) - HEADER_SITES
    # ASCII: a pointer may hold any character, a header only Latin-1.
    return json.dumps(summary, separators=(",", ":"))


def collected_header() -> str | None:
    collected = _collected.get()
    return header_value(collected) if collected else None


class RequestRedactions:
    """One request's redaction: the setting its services apply (``for_storage``), and the
    sites they redact, collected for its ``Redactions`` header. Entered for the length of the
    request (``app/core/sending.py``)."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self.collected = Redactions()
        self._tokens: tuple[Token[bool], Token[Redactions | None]] | None = None

    def __enter__(self) -> "RequestRedactions":
        self._tokens = (_enabled.set(self.enabled), _collected.set(self.collected))
        return self

    def __exit__(self, *_exc: object) -> None:
        assert self._tokens is not None, "exited before it was entered"
        enabled_token, collected_token = self._tokens
        _collected.reset(collected_token)
        _enabled.reset(enabled_token)

    def add_header(self, headers: MutableHeaders) -> None:
        """The ``Redactions`` header, when anything was redacted and the response has none."""
        if self.collected and HEADER.lower() not in headers:
            headers[HEADER] = header_value(self.collected)
