"""The ``context-store`` command: serve, migrate, manage API keys, push and pull workspaces."""

import re
import signal
import tarfile
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import httpx
import typer
import uvicorn
from pydantic import ValidationError
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from app.archive.schemas import ArchiveReport
from app.client import ContextStoreClient, ContextStoreError
from app.client.client import DEFAULT_URL
from app.client.workspace import pack, unpack
from app.core.config import Settings
from app.core.db import create_database, session_scope
from app.core.errors import NotFound
from app.core.http_server import bounded_head_protocol
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


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """How `serve` runs uvicorn; the benchmark serves its framework ceiling the same way."""
    return {
        "host": settings.host,
        "port": settings.port,
        "proxy_headers": False,
        "log_config": logging_config(settings.log_level.upper()),
        "log_level": settings.log_level,
        # The app logs each request itself (app/core/logs.py), with its id and tenant.
        "access_log": False,
        "timeout_graceful_shutdown": settings.shutdown_grace_seconds,
        "http": bounded_head_protocol(settings.max_header_bytes),
    }


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
    uvicorn.run("app.main:create_app", factory=True, **uvicorn_options(settings))


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


# Transfers shorter than this finish before a progress bar would be worth drawing.
LONG_TRANSFER_BYTES = 1024 * 1024
UPLOAD_CHUNK_BYTES = 64 * 1024

UrlOption = Annotated[
    str, typer.Option("--url", envvar="CONTEXT_STORE_URL", help="The service's base URL.")
]
KeyOption = Annotated[
    str | None,
    typer.Option(
        "--key", envvar="CONTEXT_STORE_KEY", help="An API key (not needed with auth off)."
    ),
]


def _project(value: str) -> str:
    if not re.fullmatch(IDENTIFIER_PATTERN, value):
        raise typer.BadParameter(f"a project name is {IDENTIFIER_RULE}")
    return value


ProjectOption = Annotated[str, typer.Option(help="The project.", callback=_project)]


def _progress(description: str) -> Progress:
    """A transfer bar on standard error, shown once a transfer is long."""
    return Progress(
        TextColumn(description),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)


def _service_error(exc: ContextStoreError | httpx.TransportError, url: str) -> typer.Exit:
    if isinstance(exc, httpx.TransportError):
        return _fail(f"cannot reach {url}: {exc}")
    lines = [str(exc)] + [f"  {error['path']}: {error['message']}" for error in exc.errors]
    return _fail("\n".join(lines))


def print_report(report: ArchiveReport) -> None:
    for item in report.imported:
        typer.echo(f"imported  {item.path} ({item.action})")
    for warning in report.warnings:
        typer.echo(f"warning   {warning.path} {warning.pointer or '/'}: {warning.message}")
    for refused in report.refused:
        typer.echo(f"refused   {refused.path}: {refused.status} {refused.title}: {refused.detail}")
        for error in refused.errors:
            typer.echo(f"            {error['path']}: {error['message']}")
    for skipped in report.skipped:
        typer.echo(f"skipped   {skipped.path}: {skipped.reason}")


def push_directory(store: ContextStoreClient, directory: Path, project: str) -> ArchiveReport:
    """Pack the directory's files of the layout into one archive and import it: one request,
    so the service reports on every file at once and a failed upload changes nothing."""
    packed = pack(directory)
    archive = packed.archive
    with _progress("push") as progress:
        task = progress.add_task("push", total=len(archive), visible=False)

        def chunks() -> Iterator[bytes]:
            for start in range(0, len(archive), UPLOAD_CHUNK_BYTES):
                yield archive[start : start + UPLOAD_CHUNK_BYTES]
                sent = min(start + UPLOAD_CHUNK_BYTES, len(archive))
                progress.update(task, completed=sent, visible=len(archive) >= LONG_TRANSFER_BYTES)

        return store.import_archive(project, chunks())


def pull_directory(store: ContextStoreClient, directory: Path, project: str) -> list[str]:
    """Download the project's archive and write its files into the directory; returns the
    paths written. Members that are not files of the layout, or would land outside the
    directory, are refused (and said so on standard error)."""
    with tempfile.TemporaryFile() as spool, _progress("pull") as progress:
        task = progress.add_task("pull", total=None, visible=False)

        def advance(received: int, total: int | None) -> None:
            progress.update(
                task, completed=received, total=total, visible=received >= LONG_TRANSFER_BYTES
            )

        store.download_archive(project, spool.write, advance)
        spool.seek(0)
        unpacked = unpack(spool, directory)
    for name in unpacked.refused:
        typer.echo(f"refused   {name}: not a file of the layout inside {directory}", err=True)
    return unpacked.written


@cli.command()
def push(
    directory: Annotated[
        Path, typer.Argument(exists=True, file_okay=False, help="The workspace to push.")
    ],
    project: ProjectOption,
    url: UrlOption = DEFAULT_URL,
    key: KeyOption = None,
) -> None:
    """Import a workspace's files (mdan/, memory/agents/, .atari/, features/,
    .autonomous/context/) into a project, and print what happened to each."""
    try:
        with ContextStoreClient(url, key) as store:
            report = push_directory(store, directory, project)
    except (ContextStoreError, httpx.TransportError) as exc:
        raise _service_error(exc, url) from exc
    print_report(report)
    if report.refused:
        raise typer.Exit(1)


@cli.command()
def pull(
    directory: Annotated[
        Path, typer.Argument(file_okay=False, help="Where to write (created if needed).")
    ],
    project: ProjectOption,
    url: UrlOption = DEFAULT_URL,
    key: KeyOption = None,
) -> None:
    """Write a project's files into a workspace, in the tools' layout; each file atomically
    (a temporary file, then a rename) with mode 0600."""
    try:
        with ContextStoreClient(url, key) as store:
            written = pull_directory(store, directory, project)
    except (ContextStoreError, httpx.TransportError) as exc:
        raise _service_error(exc, url) from exc
    except (tarfile.TarError, EOFError) as exc:
        raise _fail(f"the archive could not be read: {exc}") from exc
    for name in written:
        typer.echo(f"wrote     {name}")


def main() -> None:
    cli()
