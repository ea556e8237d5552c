"""The dependencies routes declare: settings, database sessions and the calling principal."""

import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Annotated

from anyio import CancelScope, CapacityLimiter, to_thread
from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPBearer
from sqlalchemy import Connection, event
from sqlalchemy.exc import SQLAlchemyError
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers

from app.core.config import AuthMode, Settings
from app.core.db import Database
from app.core.errors import UNKNOWN_KEY, Forbidden, RevokedKey, Unauthenticated
from app.core.fair import act_for
from app.core.security import ALL_SCOPES, Principal, Scope, hash_key

log = logging.getLogger(__name__)

DEFAULT_TENANT = "default"


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_database(request: Request) -> Database:
    database: Database = request.app.state.database
    return database


def _close(session: Session) -> None:
    """A read session ended. FastAPI ends it after the route has returned its answer and
    before it sends it: a rollback that fails (the connection lost since the read) is logged,
    not raised, so that the answer built is still sent and the response still ends (an
    export's turn is given back when it ends: raised here, it was held until restart)."""
    try:
        session.rollback()
    except SQLAlchemyError as exc:
        log.warning("a read session's rollback failed after its answer was built: %s", exc)
    finally:
        session.close()


async def _read_session(request: Request) -> AsyncIterator[Session]:
    # Async, so that opening the session costs no thread: it touches no connection until the
    # route's first query, which runs in the route's own thread. Writes do not come here: they
    # run and commit in the route's thread (app/storage/route.py).
    session = get_database(request).read_session()
    try:
        yield session
    finally:
        # As FastAPI ends a sync dependency: in a thread (a rollback may wait on the
        # database), shielded from cancellation (a connection must go back to its pool), and
        # outside the shared thread limit.
        with CancelScope(shield=True):
            await to_thread.run_sync(_close, session, limiter=CapacityLimiter(1))


ReadSession = Annotated[Session, Depends(_read_session, scope="function")]

# The two ways to send a key, as the OpenAPI document (and Swagger UI's "Authorize") shows
# them on every operation that needs one (app/core/api_docs.py). Not declared as dependencies:
# FastAPI resolves each dependency on every request (10-15 µs of CPU each), and the key is read
# by ``authenticated`` anyway.
KEY_SCHEMES = (
    HTTPBearer(auto_error=False, description="An API key as a bearer token."),
    APIKeyHeader(
        name="X-API-Key", auto_error=False, description="An API key, as an alternative to Bearer."
    ),
)


def presented_key(headers: Headers) -> str | None:
    """The key of either header (a bearer token, else ``X-API-Key``), without surrounding
    whitespace (keys never hold any)."""
    scheme, _, credentials = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return headers.get("x-api-key", "").strip() or None


@dataclass(frozen=True)
class KeyLookup:
    """How to find who a key stands for: the keys domain's functions, which the app factory
    hands in (``app.state.key_lookup``), so that core imports no domain."""

    # The principal of an active key, by the key itself; None when unknown or revoked.
    find_principal: Callable[[Session, str], Principal | None]
    # Whether the key with this id is still active. On a connection rather than a session: it
    # runs while a session begins its transaction (_confirm_key).
    key_is_active: Callable[[Connection, str], bool]


def key_lookup(request: Request) -> KeyLookup:
    lookup: KeyLookup = request.app.state.key_lookup
    return lookup


class PrincipalCache:
    """Who a key stands for (by its hash), remembered for ``ttl`` seconds, so that a request
    with a known key needs neither a thread nor a query of its own to authenticate.

    A key's tenant and scopes never change; whether it was revoked can change at any moment,
    in any process. So a remembered key is only half-authenticated: the request's first
    database transaction confirms it is still active (``_confirm_key``; a write's first
    statement, ``take_key_confirmation``), whichever process or command revoked it. Unknown
    keys are never remembered, so a new key works at once.
    """

    def __init__(self, ttl: float, size: int = 4096) -> None:
        self.ttl = ttl
        self.size = size
        self._entries: dict[str, tuple[float, Principal]] = {}
        self._lock = threading.Lock()

    def get(self, key_hash: str) -> Principal | None:
        entry = self._entries.get(key_hash)
        if entry is None or entry[0] < time.monotonic():
            return None
        return entry[1]

    def put(self, key_hash: str, principal: Principal) -> None:
        if self.ttl <= 0:
            return
        with self._lock:
            if len(self._entries) >= self.size:
                self._entries.pop(next(iter(self._entries)))
            self._entries[key_hash] = (time.monotonic() + self.ttl, principal)

    def forget(self, key_hash: str) -> None:
        with self._lock:
            self._entries.pop(key_hash, None)


def principal_cache(request: Request) -> PrincipalCache:
    cache: PrincipalCache = request.app.state.principal_cache
    return cache


@dataclass
class KeyToConfirm:
    """A remembered key the request acts with, not yet confirmed active in the database."""

    key_id: str
    key_hash: str
    cache: PrincipalCache
    key_is_active: Callable[[Connection, str], bool]
    confirmed: bool = False

    def refused(self) -> RevokedKey:
        """The key was found revoked: forgotten, and a 401 for the whole request."""
        self.cache.forget(self.key_hash)
        return RevokedKey(UNKNOWN_KEY)

    def confirm(self, connection: Connection) -> None:
        """Look the key up in ``connection``'s transaction: ``refused()`` when revoked."""
        if not self.key_is_active(connection, self.key_id):
            raise self.refused()
        self.confirmed = True


# Set while serving a request whose key came from the cache. A context variable rather than
# an argument: it reaches every session the request opens, in whichever of its threads, also
# those a route opens itself (the archive export); and a shared object, so that the threads'
# copies of the context see one confirmation.
_key_to_confirm: ContextVar[KeyToConfirm | None] = ContextVar("key_to_confirm", default=None)


@event.listens_for(Session, "after_begin")
def _confirm_key(_session: Session, _transaction: object, connection: Connection) -> None:
    """Before the request's first statement, in its own transaction and thread: one indexed
    look-up, rather than a thread, a connection and a transaction for authentication alone."""
    pending = _key_to_confirm.get()
    if pending is not None and not pending.confirmed:
        pending.confirm(connection)


def take_key_confirmation() -> KeyToConfirm | None:
    """The request's remembered key, for a statement that confirms it active along with its own
    work (a write's first, ``app/storage/writes.py``), which must then ``refused()`` it when it
    is not; None when no key is left to confirm. Counted as confirmed from now on, so that the
    transaction about to begin does not look it up again."""
    pending = _key_to_confirm.get()
    if pending is None or pending.confirmed:
        return None
    pending.confirmed = True
    return pending


def _known_principal(request: Request) -> Principal | None:
    """The principal when no database is needed: this request's, auth off, or a cached key
    (confirmed by the request's first transaction). Raises 401 when no key is presented.
    Runs on the event loop, so that what it sets holds for the rest of the request."""
    cached: Principal | None = getattr(request.state, "principal", None)
    if cached is not None:
        return cached
    if get_settings(request).auth is AuthMode.off:
        return _remember(request, Principal(tenant=DEFAULT_TENANT, scopes=ALL_SCOPES))
    secret = presented_key(request.headers)
    if not secret:
        # Worded so that the redaction every problem's text takes leaves it whole: it reads
        # "Authorization: <scheme> <value>" as a credential.
        raise Unauthenticated(
            "An API key is required: send it as a Bearer token in the Authorization header, "
            "or in X-API-Key."
        )
    key_hash = hash_key(secret)
    cache = principal_cache(request)
    found = cache.get(key_hash)
    if found is None:
        return None
    assert found.key_id is not None, "only keys are cached"
    is_active = key_lookup(request).key_is_active
    _key_to_confirm.set(KeyToConfirm(found.key_id, key_hash, cache, is_active))
    return _remember(request, found)


def _remember(request: Request, principal: Principal) -> Principal:
    request.state.principal = principal
    request.state.tenant = principal.tenant  # for the request log (app/core/logs.py)
    return principal


def _look_up(request: Request, secret: str) -> Principal:
    """The key's principal from the database (401 when it is unknown or revoked). In a thread."""
    with get_database(request).read_session() as session:
        found = key_lookup(request).find_principal(session, secret)
    if found is None:
        raise Unauthenticated(UNKNOWN_KEY)
    principal_cache(request).put(hash_key(secret), found)
    return _remember(request, found)


async def authenticated(request: Request) -> Principal:
    """The principal the request acts as (401 without a valid key), looked up once per request:
    the route class calls this before anything else of the request, the dependencies below
    and a write route's ``Writes`` reuse it."""
    known = _known_principal(request)
    if known is None:
        secret = presented_key(request.headers)
        assert secret is not None, "_known_principal refuses a request without a key"
        known = await run_in_threadpool(_look_up, request, secret)
    # On the event loop, so that it holds for the rest of the request: its worker threads
    # are taken in its tenant's turns.
    act_for(known.tenant)
    return known


# The scope each scope dependency (``Reader``, ``Writer``, ``Admin``) requires. A route that
# declares one, itself or through another dependency, needs a key with that scope; its route
# class (``app/core/body.py``) checks both before anything else of the request.
_SCOPE_OF: dict[Callable[..., object], Scope] = {}


def required_scope(dependency: Callable[..., object] | None) -> Scope | None:
    """The scope ``dependency`` requires (None: it is not a scope dependency)."""
    return None if dependency is None else _SCOPE_OF.get(dependency)


def authorize(principal: Principal, scope: Scope) -> Principal:
    """``principal``, when its key has ``scope``; else 403."""
    if scope not in principal.scopes:
        raise Forbidden(f"This key lacks the {scope.value!r} scope.")
    return principal


def _requires(scope: Scope) -> object:
    # Checks on its own too: a dependency must not rely on the route class it is used under.
    async def dependency(request: Request) -> Principal:
        return authorize(await authenticated(request), scope)

    _SCOPE_OF[dependency] = scope
    return Depends(dependency)


Reader = Annotated[Principal, _requires(Scope.read)]
Writer = Annotated[Principal, _requires(Scope.write)]
Admin = Annotated[Principal, _requires(Scope.admin)]
