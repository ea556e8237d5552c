from typing import Annotated

from fastapi import Path, Request, Response

from app.core.body import ContextStoreRoute
from app.core.conditional import if_match, not_modified
from app.core.deps import Admin, ReadSession, get_database
from app.core.json import FastJSONResponse
from app.core.pagination import Cursor, Limit
from app.core.routing import GatedRouter
from app.core.schemas import Page
from app.core.security import Scope
from app.keys import service
from app.keys.models import ApiKey
from app.keys.schemas import ApiKeyCreate, ApiKeyCreated, ApiKeyPublic

KeyId = Annotated[str, Path(pattern=r"^[0-9a-f]{16}$", description="The key's id.")]

router = GatedRouter(prefix="/v1/admin/keys", tags=["admin"], route_class=ContextStoreRoute)


def _public(key: ApiKey) -> ApiKeyPublic:
    return ApiKeyPublic(
        id=key.id,
        tenant=key.tenant,
        scopes=[Scope(name) for name in key.scopes.split(",")],
        name=key.name,
        prefix=key.prefix,
        created_at=key.created_at,
        revoked_at=key.revoked_at,
    )


@router.post("", status_code=201, response_model=ApiKeyCreated)
def create_key(body: ApiKeyCreate, request: Request, principal: Admin) -> ApiKeyCreated:
    """Create an API key for the caller's tenant. The key is in this response only.

    Idempotency-Key is not honoured here: replaying the response would mean storing the key.
    """
    with get_database(request).write_transaction() as session:
        created = service.create_key(session, principal.tenant, frozenset(body.scopes), body.name)
    return ApiKeyCreated(**_public(created.record).model_dump(), key=created.secret)


@router.get("", response_model=Page[ApiKeyPublic])
def list_keys(
    session: ReadSession, principal: Admin, cursor: Cursor = None, limit: Limit = 50
) -> Page[ApiKeyPublic]:
    """The tenant's keys, newest first, revoked ones included. Never the keys themselves."""
    keys, next_cursor = service.list_keys(session, principal.tenant, cursor, limit)
    return Page(items=[_public(key) for key in keys], next_cursor=next_cursor)


@router.get(
    "/{key_id}",
    response_model=ApiKeyPublic,
    responses={304: {"description": "Unchanged (If-None-Match)."}},
)
def get_key(key_id: KeyId, request: Request, session: ReadSession, principal: Admin) -> Response:
    """One of the tenant's keys, revoked or not, with its `ETag` (which a revoke changes).
    Never the key itself."""
    key, etag = service.get_key(session, principal.tenant, key_id)
    if (unchanged := not_modified(request, etag)) is not None:
        return unchanged
    return FastJSONResponse(_public(key).model_dump(mode="json"), headers={"ETag": etag})


@router.delete("/{key_id}", status_code=204, response_class=Response)
def revoke_key(key_id: KeyId, request: Request, principal: Admin) -> Response:
    """Revoke a key: it stops working at once, on every server of the database. The record
    stays for the audit trail. Honours If-Match (the ETag of the key's GET); a revoked key's
    revoke again is a 204 that changes nothing."""
    with get_database(request).write_transaction() as session:
        service.revoke_key(session, principal.tenant, key_id, if_match(request))
    return Response(status_code=204)
