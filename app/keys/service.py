"""Creating, listing, revoking and checking API keys. Used by the HTTP API and the CLI."""

import secrets
from dataclasses import dataclass

import orjson
from sqlmodel import Session

from app.core.conditional import Precondition, etag_of
from app.core.constraints import MAX_LIMIT
from app.core.db import utcnow
from app.core.errors import NotFound
from app.core.security import Principal, Scope, format_scopes, generate_key, hash_key
from app.keys.models import ApiKey
from app.keys.repository import ApiKeyRepository
from app.redaction import redact_value


@dataclass(frozen=True)
class CreatedKey:
    record: ApiKey
    secret: str


def create_key(
    session: Session, tenant: str, scopes: frozenset[Scope], name: str | None = None
) -> CreatedKey:
    secret = generate_key()
    record = ApiKey(
        id=secrets.token_hex(8),
        tenant=tenant,
        key_hash=hash_key(secret),
        prefix=secret[:10],
        scopes=format_scopes(scopes),
        # A label for people, shown in every listing: a secret pasted into it is redacted.
        name=None if name is None else redact_value(name),
    )
    ApiKeyRepository(session).add(record)
    return CreatedKey(record=record, secret=secret)


def list_keys(
    session: Session, tenant: str | None, cursor: str | None = None, limit: int = MAX_LIMIT
) -> tuple[list[ApiKey], str | None]:
    """The keys of one tenant, or of every tenant when ``tenant`` is None (the CLI)."""
    return ApiKeyRepository(session).page(tenant, cursor, limit)


def etag(key: ApiKey) -> str:
    """The key record's version, as its GET answers it: of everything that route shows
    (only ``revoked_at`` ever changes)."""
    shown = (key.id, key.tenant, key.scopes, key.name, key.prefix, key.created_at, key.revoked_at)
    return etag_of(orjson.dumps(shown))


def get_key(session: Session, tenant: str | None, key_id: str) -> tuple[ApiKey, str]:
    key = ApiKeyRepository(session).get(tenant, key_id)
    if key is None:
        raise NotFound(f"No API key {key_id!r}.")
    return key, etag(key)


def revoke_key(
    session: Session, tenant: str | None, key_id: str, precondition: Precondition | None = None
) -> ApiKey:
    """Revoke once (a revoked key stays as it was revoked); ``precondition`` is given the
    record's version (None: no such key) first, as every conditional DELETE's is."""
    repository = ApiKeyRepository(session)
    key = repository.get(tenant, key_id)
    if precondition is not None:
        precondition(None if key is None else etag(key))
    if key is None:
        raise NotFound(f"No API key {key_id!r}.")
    if key.revoked_at is None:
        repository.revoke(key, utcnow())
    return key


def principal_for(session: Session, secret: str) -> Principal | None:
    key = ApiKeyRepository(session).get_active_by_hash(hash_key(secret))
    if key is None:
        return None
    return Principal(
        tenant=key.tenant,
        scopes=frozenset(Scope(s) for s in key.scopes.split(",") if s),
        key_id=key.id,
    )
