"""The ``context-store`` command: serve, migrate, and manage API keys."""

import re
import signal
from types import FrameType
from typing import Annotated

import typer
import uvicorn
from pydantic import ValidationError

from app.core.config import Settings
from app.core.db import create_database, session_scope
from app.core.errors import NotFound
from app.core.identifiers import IDENTIFIER_PATTERN, IDENTIFIER_RULE
from app.core.logs import configure_logging, logging_config
from app.core.migrations import upgrade
from app.core.security import parse_scopes
from app.keys import service as keys

cli = typer.Typer(no_args_is_help=True, help=__doc__, add_completion=False)
keys_cli = typer.Typer(no_args_is_help=True, help="Create, list and revoke API keys.")
cli.add_typer(keys_cli, name="keys")


def _settings() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        messages = "; ".join(str(error["msg"]) for error in exc.errors())
        typer.echo(f"error: invalid configuration: {messages}", err=True)
        raise typer.Exit(2) from exc


def _ignore_signal(_signal: int, _frame: FrameType | None) -> None:
    """See ``serve``."""


@cli.command()
def serve() -> None:
    """Serve the API (CONTEXT_STORE_HOST and CONTEXT_STORE_PORT). Run `migrate` first.

    SIGTERM stops accepting connections, lets the requests in flight finish (at most
    CONTEXT_STORE_SHUTDOWN_GRACE_SECONDS) and exits 0. Logs are JSON lines on stderr.
    """
    settings = _settings()
    # After a graceful shutdown uvicorn restores the SIGTERM handler it found and raises the
    # signal again, which Python's default handler turns into death by signal (status 143).
    # Shutting down when asked to is a success: with this handler found, serve returns, exit 0.
    signal.signal(signal.SIGTERM, _ignore_signal)
    uvicorn.run(
        "app.main:create_app",
        factory=True,
        host=settings.host,
        port=settings.port,
        proxy_headers=False,
        log_config=logging_config(settings.log_level.upper()),
        log_level=settings.log_level,
        # The app logs each request itself (app/core/logs.py), with its id and tenant.
        access_log=False,
        timeout_graceful_shutdown=settings.shutdown_grace_seconds,
    )


@cli.command()
def migrate() -> None:
    """Bring the database to the current schema (alembic upgrade head)."""
    settings = _settings()
    configure_logging(settings.log_level.upper())
    upgrade(settings.database_url, configure_logging=False)


def _scopes(value: str) -> str:
    try:
        parse_scopes(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    return value


def _tenant(value: str) -> str:
    if not re.fullmatch(IDENTIFIER_PATTERN, value):
        raise typer.BadParameter(f"a tenant is {IDENTIFIER_RULE}")
    return value


@keys_cli.command("create")
def create_key(
    tenant: Annotated[str, typer.Option(help="The tenant the key acts for.", callback=_tenant)],
    scopes: Annotated[
        str, typer.Option(help="Comma-separated: read, write, admin.", callback=_scopes)
    ] = "read,write",
    name: Annotated[str | None, typer.Option(help="A label for people.")] = None,
) -> None:
    """Create a key. The key itself is printed alone on the last line, this once."""
    database = create_database(_settings())
    try:
        with session_scope(database.write_session()) as session:
            created = keys.create_key(session, tenant, parse_scopes(scopes), name)
        typer.echo(f"id={created.record.id} tenant={tenant} scopes={created.record.scopes}")
        typer.echo(created.secret)
    finally:
        database.dispose()


@keys_cli.command("list")
def list_keys(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's keys.")] = None,
) -> None:
    """List keys (never the keys themselves): id, tenant, scopes, prefix, state."""
    database = create_database(_settings())
    try:
        cursor: str | None = None
        with database.read_session() as session:
            while True:
                records, cursor = keys.list_keys(session, tenant, cursor)
                for record in records:
                    state = "revoked" if record.revoked_at else "active"
                    typer.echo(
                        f"{record.id}\t{record.tenant}\t{record.scopes}\t{record.prefix}…"
                        f"\t{state}\t{record.name or ''}"
                    )
                if cursor is None:
                    break
    finally:
        database.dispose()


@keys_cli.command("revoke")
def revoke_key(key_id: Annotated[str, typer.Argument(help="The key's id.")]) -> None:
    """Revoke a key by its id; it stops working at once."""
    database = create_database(_settings())
    try:
        with session_scope(database.write_session()) as session:
            keys.revoke_key(session, None, key_id)
        typer.echo(f"revoked {key_id}")
    except NotFound as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    finally:
        database.dispose()


def main() -> None:
    cli()
