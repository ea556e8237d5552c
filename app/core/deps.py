"""The dependencies routes declare: settings, database sessions and the calling principal."""

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer
from sqlmodel import Session

from app.core.config import AuthMode, Settings
from app.core.db import Database, session_scope
from app.core.errors import Forbidden, Unauthenticated
from app.core.security import ALL_SCOPES, Principal, Scope
from app.keys.service import principal_for

DEFAULT_TENANT = "default"


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def get_database(request: Request) -> Database:
    database: Database = request.app.state.database
    return database


def _read_session(request: Request) -> Iterator[Session]:
    with get_database(request).read_session() as session:
        yield session


def _write_session(request: Request) -> Iterator[Session]:
    # scope="function" below: the commit happens before the response is sent, so a client
    # never sees a 2xx for a change that then failed to commit.
    with session_scope(get_database(request).write_session()) as session:
        yield session


ReadSession = Annotated[Session, Depends(_read_session, scope="function")]
WriteSession = Annotated[Session, Depends(_write_session, scope="function")]

_bearer = HTTPBearer(auto_error=False, description="An API key as a bearer token.")
_api_key_header = APIKeyHeader(
    name="X-API-Key", auto_error=False, description="An API key, as an alternative to Bearer."
)


def _presented_key(request: Request) -> str | None:
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and credentials.strip():
        return credentials.strip()
    return request.headers.get("x-api-key") or None


def authenticate(request: Request) -> Principal:
    """The principal the request acts as (401 without a valid key), looked up once per request:
    the route class calls this before reading a body, the dependency below reuses it."""
    cached: Principal | None = getattr(request.state, "principal", None)
    if cached is not None:
        return cached
    if get_settings(request).auth is AuthMode.off:
        principal = Principal(tenant=DEFAULT_TENANT, scopes=ALL_SCOPES)
    else:
        secret = _presented_key(request)
        if not secret:
            raise Unauthenticated("An API key is required: Authorization: Bearer <key>.")
        with get_database(request).read_session() as session:
            found = principal_for(session, secret)
        if found is None:
            raise Unauthenticated("The API key is unknown or revoked.")
        principal = found
    request.state.principal = principal
    request.state.tenant = principal.tenant  # for the request log (app/core/logs.py)
    return principal


def current_principal(
    request: Request,
    # Declared so that OpenAPI (and Swagger UI's "Authorize") shows both ways to send a key.
    _bearer_scheme: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    _api_key_scheme: Annotated[str | None, Depends(_api_key_header)],
) -> Principal:
    return authenticate(request)


def _requires(scope: Scope) -> object:
    def dependency(principal: Annotated[Principal, Depends(current_principal)]) -> Principal:
        if scope not in principal.scopes:
            raise Forbidden(f"This key lacks the {scope.value!r} scope.")
        return principal

    return Depends(dependency)


Reader = Annotated[Principal, _requires(Scope.read)]
Writer = Annotated[Principal, _requires(Scope.write)]
Admin = Annotated[Principal, _requires(Scope.admin)]
