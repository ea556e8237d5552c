"""Idempotency-Key for POST routes that create or append.

A write claims the key first (``claim``: the remembered response, or None) and records its
response last (``record``); ``app/writing`` does both for every route that takes a key. The
key's row is written in the request's own transaction, so the effect and the remembered
response commit together or not at all; a request that fails leaves no row, and its retry
runs again. Two concurrent requests with one key: the second blocks on the row's unique key
(PostgreSQL) or on the write lock (SQLite), then finds the first's response and replays it.

A route that commits in several transactions (the archive import, batch by batch) asks
``recorded(session)`` first and records with ``record_in(session, response)`` in its last
transaction: the row is still written once, with the final response.

The claim runs in the write turn (on SQLite, every tenant's one writer) and reads of the key's
row only what decides it: the fingerprint, the status, the headers and the body's size. A
replay's body is read after the turn, from a reader (``Replay.answer``), and one over the body
limit in an export turn, as every large download is. What is stored under a key is bounded by
that limit too: a larger answer is stored as a reference to the document it carries when its
route can read that again (a resume's save: ``AnswerByReference``), else compressed. A
tenant's 2-byte resumes of a 30 MB save stored 34 MB each, a GB in 15 s (2026-11-27).
"""

import hashlib
import hmac
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Annotated, Any

from fastapi import Depends, Header, Request, Response
from pydantic import AfterValidator
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool

from app.core import redaction
from app.core.db import Database, utcnow
from app.core.deps import Writer, get_database, get_settings
from app.core.errors import Conflict, FieldError, InvalidContent
from app.core.json import FastJSONResponse
from app.core.responses import in_export_turn
from app.core.security import Principal
from app.formats import gzip as gzip_format
from app.idempotency.models import IdempotencyRecord
from app.idempotency.repository import Claimed, IdempotencyRepository
from app.redaction import redact_value

# Headers a replay must repeat for the client to see the same response.
REPLAYED_HEADERS = ("content-type", "location", "etag", "content-disposition", "redactions")

# What a stored body is when it is not the answer's own (``IdempotencyRecord.body_form``).
GZIPPED = "gzip"
REFERENCE = "reference"
# Fast, as the saves' storage is: it runs in the write, and JSON compresses well at any level.
GZIP_LEVEL = 2

Rebuild = Callable[[Session, dict[str, Any]], bytes | None]
"""A route's rebuild of the body of an answer it stored by reference (``AnswerByReference``),
read in the session: byte for byte the first answer's, or None when the document it carries
has changed since."""


class AnswerByReference(FastJSONResponse):
    """A JSON answer that carries a stored document the route can read again (a resume's
    save). Under an Idempotency-Key, an answer over the body limit is remembered by
    ``reference`` (what identifies that document's version, and the answer's other values),
    and its replay rebuilt from it by the route's ``Rebuild``."""

    def __init__(self, content: Any, *, reference: dict[str, Any], headers: dict[str, str]) -> None:
        super().__init__(content, headers=headers)
        self.reference = reference


def fingerprint(secret: bytes, method: str, path: str, query: str, body: bytes) -> str:
    """What tells a retry from another request under the same key: an HMAC-SHA256 keyed with
    the server's secret (``CONTEXT_STORE_FINGERPRINT_KEY``), never a plain digest, because a
    body may hold a secret the service redacts and a plain digest would let anyone holding
    the table check a guess of it."""
    digest = hmac.new(secret, digestmod=hashlib.sha256)
    for part in (method.encode(), path.encode(), query.encode(), body):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


class Replay(Response):
    """A remembered answer whose body has not been read: the claim that found it runs in the
    write turn, and reads the key's row but for its body. The route's write hands it back,
    and ``answer`` reads the body once the turn and the writer's connection are given back."""

    def __init__(self, tenant: str, key: str, claimed: Claimed) -> None:
        assert claimed.status_code is not None, "an answer is recorded"
        super().__init__(status_code=claimed.status_code)
        self.tenant = tenant
        self.key = key
        self.claimed = claimed
        self.rebuild: Rebuild | None = None

    async def answer(self, request: Request) -> Response:
        """The remembered answer, its body read from a reader: at most the body limit at
        once, a larger one (or one rebuilt from its reference) in one of the tenant's export
        turns, held until it has been sent."""
        claimed = self.claimed
        database = get_database(request)
        headers = dict(claimed.headers or {})
        headers["Idempotent-Replayed"] = "true"

        def read() -> Response:
            with database.read_session() as session:
                stored = IdempotencyRepository(session).body(
                    self.tenant, self.key, claimed.request_hash
                )
                if stored is None:
                    # Expired, and claimed by another request, since the claim found it.
                    raise Conflict("This Idempotency-Key's answer has expired; retry.")
                body = stored
                if claimed.body_form == GZIPPED:
                    body = gzip_format.decompress_stored(stored)
                elif claimed.body_form == REFERENCE:
                    assert self.rebuild is not None, "a route that answers by reference rebuilds"
                    rebuilt = self.rebuild(session, json.loads(stored))
                    if rebuilt is None:
                        raise Conflict(
                            "This Idempotency-Key's request took effect once, and its answer "
                            "carried a document too large to keep a copy of, which has changed "
                            "since (or is gone): read the document for what it holds now."
                        )
                    body = rebuilt
            return Response(content=body, status_code=self.status_code, headers=headers)

        size = claimed.body_bytes or 0
        if claimed.body_form is None and size <= get_settings(request).max_body_bytes:
            return await run_in_threadpool(read)
        return await in_export_turn(request, self.tenant, read)


async def answered(request: Request, response: Response) -> Response:
    """A write's response to send: a ``Replay``'s answer read, any other as it is."""
    return await response.answer(request) if isinstance(response, Replay) else response


class Idempotency:
    """One request's Idempotency-Key and the fingerprint that tells its retries from other
    requests sent under the same key; ``answer_bytes``, the largest answer stored whole."""

    def __init__(
        self, tenant: str, key: str, request_hash: str, ttl: timedelta, answer_bytes: int
    ) -> None:
        self.tenant = tenant
        self.key = key
        self.request_hash = request_hash
        self.ttl = ttl
        self.answer_bytes = answer_bytes
        self._claimed: IdempotencyRecord | None = None

    def _replay(self, claimed: Claimed) -> Replay:
        if claimed.request_hash != self.request_hash:
            raise InvalidContent(
                "This Idempotency-Key was already used for a different request.",
                errors=[FieldError("header.idempotency-key", "reused with a different request")],
            )
        if claimed.status_code is None:
            raise Conflict("A request with this Idempotency-Key is still in progress; retry.")
        return Replay(self.tenant, self.key, claimed)

    def claim(self, session: Session) -> Replay | None:
        """The remembered response for this key, or None after claiming the key in
        ``session``'s transaction for this request."""
        repository = IdempotencyRepository(session)
        now = utcnow()
        existing = repository.get_live(self.tenant, self.key, now)
        if existing is not None:
            return self._replay(existing)
        repository.delete_expired(self.tenant, now)
        claim = IdempotencyRecord(
            tenant=self.tenant,
            key=self.key,
            request_hash=self.request_hash,
            expires_at=now + self.ttl,
        )
        try:
            repository.claim(claim)
        except IntegrityError:
            # Another request committed this key while we waited: replay what it answered.
            existing = repository.get_live(self.tenant, self.key, utcnow())
            if existing is None:
                raise
            return self._replay(existing)
        self._claimed = claim
        return None

    def record(self, session: Session, response: Response) -> Response:
        """Remember ``response`` for the claimed key (in ``session``'s transaction, the one
        that claimed it) and return it as remembered."""
        assert self._claimed is not None, "claim() first"
        response = _redacted(response)
        self._claimed.status_code = response.status_code
        self._claimed.headers = {
            name: value for name, value in response.headers.items() if name in REPLAYED_HEADERS
        }
        body = bytes(response.body)
        if len(body) <= self.answer_bytes:
            self._claimed.body = body
        elif isinstance(response, AnswerByReference):
            self._claimed.body = json.dumps(response.reference).encode()
            self._claimed.body_form = REFERENCE
        else:
            self._claimed.body = gzip_format.compress(body, GZIP_LEVEL)
            self._claimed.body_form = GZIPPED
        IdempotencyRepository(session).save(self._claimed)
        return response

    # For a route that writes in several transactions (the archive import): no key is
    # claimed up front, since a claim committed with its first batch would be left "in
    # progress" by a crash; the answer is recorded with its last batch instead.

    def recorded(self, session: Session) -> Replay | None:
        """The remembered response for this key, looked up in ``session``; nothing claimed."""
        existing = IdempotencyRepository(session).get_live(self.tenant, self.key, utcnow())
        return self._replay(existing) if existing is not None else None

    async def recorded_first(self, database: Database) -> Replay | None:
        """``recorded``, read in a worker thread before the request waits for a turn: a retry
        of an import that finished is answered at once, never told to wait or come back."""

        def read() -> Replay | None:
            with database.read_session() as session:
                return self.recorded(session)

        return await run_in_threadpool(read)

    def record_in(self, session: Session, response: Response) -> Response:
        """Claim the key and remember ``response`` in ``session``'s transaction; or, when a
        request with this key finished meanwhile (the same one sent twice at once), answer
        what that one answered."""
        if (replayed := self.claim(session)) is not None:
            return replayed
        return self.record(session, response)


def _redacted(response: Response) -> Response:
    """The response to remember, with no secret in it; the first answer is the same as its
    replays. Its redactions header goes with it."""
    if not redaction.enabled():
        return response
    if (header := redaction.collected_header()) is not None:
        response.headers.setdefault(redaction.HEADER, header)
    return redaction.answer_without_secrets(response)


def holds_no_secret(key: str) -> str:
    """Refuse a key that holds a secret: it is stored as it is, to find the first answer by,
    and redacted it would be another key. (Names of projects, features and runs are not
    checked: the patterns also take ``sk-learn-experiments-2024`` or ``build:pass:3`` for
    secrets, which the identifier pattern has always allowed, and one stored under such a
    name would become unreachable.)"""
    if redact_value(key) != key:
        raise ValueError("must not hold a secret: the key is stored as it is")
    return key


IdempotencyKey = Annotated[
    str | None,
    Header(
        min_length=1,
        max_length=255,
        description="Makes a retry safe: the same key and body replay the first response.",
    ),
    AfterValidator(holds_no_secret),
]


async def idempotency_of(
    request: Request, principal: Principal, key: str | None
) -> Idempotency | None:
    """The request's Idempotency-Key and its fingerprint; None without a key."""
    if key is None:
        return None
    settings = get_settings(request)
    return Idempotency(
        tenant=principal.tenant,
        key=key,
        request_hash=fingerprint(
            settings.fingerprint_secret,
            request.method,
            request.url.path,
            request.url.query,
            await request.body(),
        ),
        ttl=timedelta(hours=settings.idempotency_ttl_hours),
        answer_bytes=settings.max_body_bytes,
    )


async def _idempotency(
    request: Request, principal: Writer, idempotency_key: IdempotencyKey = None
) -> Idempotency | None:
    return await idempotency_of(request, principal, idempotency_key)


IdempotencyDep = Annotated[Idempotency | None, Depends(_idempotency)]
"""The request's Idempotency-Key (None without one), for a route that writes in several
transactions: ``recorded(session)`` first, ``record_in(session, response)`` with its last
writes. The write runner (``app/storage/route.py``) takes the key itself."""
