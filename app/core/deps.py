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


def current_principal(
    request: Request,
    bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    api_key: Annotated[str | None, Depends(_api_key_header)],
) -> Principal:
    settings = get_settings(request)
    if settings.auth is AuthMode.off:
        request.state.tenant = DEFAULT_TENANT  # for the request log (app/core/logs.py)
        return Principal(tenant=DEFAULT_TENANT, scopes=ALL_SCOPES)
    secret = bearer.credentials if bearer is not None else api_key
    if not secret:
        raise Unauthenticated("An API key is required: Authorization: Bearer <key>.")
    with get_database(request).read_session() as session:
        principal = principal_for(session, secret)
    if principal is None:
        raise Unauthenticated("The API key is unknown or revoked.")
    request.state.tenant = principal.tenant
    return principal


def _requires(scope: Scope) -> object:
    def dependency(principal: Annotated[Principal, Depends(current_principal)]) -> Principal:
        if scope not in principal.scopes:
            raise Forbidden(f"This key lacks the {scope.value!r} scope.")
        return principal

    return Depends(dependency)


Reader = Annotated[Principal, _requires(Scope.read)]
Writer = Annotated[Principal, _requires(Scope.write)]
Admin = Annotated[Principal, _requires(Scope.admin)]
