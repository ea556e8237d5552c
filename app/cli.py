"""The context-store command: serve the API, migrate its database, manage API keys, and push
and pull workspaces."""

import contextlib
import errno
import gc
import ipaddress
import re
import signal
import socket
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Annotated, Any, TypedDict, TypeVar

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
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from app import __version__
from app.archive.schemas import ArchiveReport, SkippedMember
from app.client import ContextStoreClient, ContextStoreError
from app.client.client import DEFAULT_URL
from app.client.workspace import pack, unpack
from app.core.config import AuthMode, Settings
from app.core.constraints import IDENTIFIER_PATTERN, IDENTIFIER_RULE
from app.core.db import create_database, session_scope
from app.core.errors import NotFound
from app.core.http_server import bounded_request_protocol
from app.core.logs import configure_logging, gather_only_what_lines_show, logging_config
from app.core.migrations import current_revision, head_revision, not_migrated_reason, upgrade
from app.core.security import parse_scopes
from app.formats.errors import MAX_LISTED
from app.keys import service as keys

# Plain help (click's): it rewraps each paragraph to the terminal, where rich's keeps the
# docstrings' line breaks and breaks sentences in the middle on any other width.
cli = typer.Typer(no_args_is_help=True, help=__doc__, add_completion=False, rich_markup_mode=None)
keys_cli = typer.Typer(
    no_args_is_help=True, help="Create, list and revoke API keys.", rich_markup_mode=None
)
cli.add_typer(keys_cli, name="keys")


def _print_version(requested: bool) -> None:
    if requested:
        typer.echo(f"context-store {__version__}")
        raise typer.Exit()


@cli.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    pass


class _Options(TypedDict, total=False):
    host: str
    port: int


def _settings(*, host: str | None = None, port: int | None = None) -> Settings:
    """The environment's settings, with the options given on the command line over them."""
    given: _Options = {}
    if host is not None:
        given["host"] = host
    if port is not None:
        given["port"] = port
    try:
        return Settings(**given)
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
        "http": bounded_request_protocol(settings.max_header_bytes, settings.read_timeout_seconds),
    }


# By then a server has built what its routes build on their first request (below).
WARM_UP_REQUESTS = 1000


def freeze_heap() -> None:
    """Keep every object alive now out of every later garbage collection.

    ``serve`` calls it twice. Before serving: the built app holds about 195,000 objects
    (routes, pydantic and SQLAlchemy models, the OpenAPI documents), all alive as long as the
    process. Python's cyclic collector walks every one of them in each full (generation 2)
    collection: under load one came every 8-11 s and took 118-152 ms of CPU, during which the
    event loop stalls every request in flight. Then once more after its first
    ``WARM_UP_REQUESTS`` requests (``WarmingServer``). ``gc.freeze`` moves them to a permanent
    generation that no collection visits; collecting first frees the garbage among them rather
    than keeping it for good."""
    gc.collect()
    gc.freeze()


class WarmingServer(uvicorn.Server):
    """uvicorn's server, which freezes the heap once more after its first ``WARM_UP_REQUESTS``
    requests, between two of its ticks (every 0.1 s, on the event loop).

    A server's first requests build as much again as the app's own long-lived parts: the first
    request of all, FastAPI's contexts of every route (their parameters' fields and
    validators) and SQLAlchemy's mapped attributes, about 9,600 objects; each route's first,
    its statements and handlers. In a server that had served the three appends the benchmark
    sends, 18,200-18,500 objects were tracked, and a full collection took 4.8-5.2 ms of CPU
    idle and 8-16 ms under load; frozen once more, 1,100 and 0.6 ms (2026-11-27, SQLite,
    ``gc.callbacks`` timed in the server). A route first used after the freeze keeps what it
    builds in every collection: a few hundred objects. Whatever a request in flight at the
    freeze holds in a reference cycle is never freed: a few requests' worth, once."""

    warmed_up = False

    async def on_tick(self, counter: int) -> bool:
        if not self.warmed_up and self.server_state.total_requests >= WARM_UP_REQUESTS:
            self.warmed_up = True
            freeze_heap()
        return await super().on_tick(counter)


def _ignore_signal(_signal: int, _frame: FrameType | None) -> None:
    """See ``serve``."""


def _listen(settings: Settings) -> socket.socket:
    """The server's socket, bound here rather than by uvicorn so that an address that cannot
    be used is one plain message naming the setting to change, not a log line."""
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind((settings.host, settings.port))
    except OSError as exc:
        listening.close()
        where = f"cannot listen on {settings.host}:{settings.port}"
        if exc.errno == errno.EADDRINUSE:
            raise _fail(
                f"{where}: the address is already in use (another server?). "
                "Choose another port with --port or CONTEXT_STORE_PORT."
            ) from exc
        raise _fail(
            f"{where}: {exc.strerror}. Check --host or CONTEXT_STORE_HOST, "
            "and --port or CONTEXT_STORE_PORT."
        ) from exc
    return listening


def _browsable_host(host: str) -> str:
    """How a browser on this machine reaches ``host``."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if address.is_unspecified:
        address = ipaddress.ip_address("::1" if address.version == 6 else "127.0.0.1")
    return f"[{address}]" if address.version == 6 else str(address)


def _database_state(settings: Settings) -> str:
    shown = make_url(settings.database_url).render_as_string(hide_password=True)
    database = create_database(settings)
    try:
        current = current_revision(database.reader)
    except SQLAlchemyError:
        return f"{shown}, unreachable for now (GET /readyz says when it is ready)"
    finally:
        database.dispose()
    head = head_revision()
    reason = not_migrated_reason(current, head)
    return f"{shown} (migrated to {head})" if reason is None else f"{shown}, not migrated: {reason}"


def startup_banner(settings: Settings) -> str:
    """Where the server listens, what it stores into and who may ask, in plain words."""
    base = f"http://{_browsable_host(settings.host)}:{settings.port}"
    if settings.auth is AuthMode.off:
        auth = 'off: no key needed, every request acts as tenant "default" (loopback only)'
    else:
        auth = "on: requests need an API key (context-store keys create --tenant NAME)"
    return "\n".join(
        [
            f"context-store {__version__} serving at {base}"
            f" (listening on {settings.host}:{settings.port})",
            f"  API docs  {base}/docs",
            f"  database  {_database_state(settings)}",
            f"  auth      {auth}",
            "Logs follow on standard error, one JSON object per line. Ctrl-C stops the server.",
        ]
    )


@cli.command()
def serve(
    host: Annotated[
        str | None,
        typer.Option(
            help="The address to listen on. [default: CONTEXT_STORE_HOST, else 127.0.0.1]",
            show_default=False,
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            help="The port to listen on. [default: CONTEXT_STORE_PORT, else 8000]",
            show_default=False,
        ),
    ] = None,
    banner: Annotated[
        bool | None,
        typer.Option(
            "--banner/--no-banner",
            help="Say where it serves, its database and whether auth is off, before the "
            "logs. [default: when standard output is a terminal]",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Serve the API. Run context-store migrate first.

    SIGTERM stops accepting connections, lets the requests in flight finish (at most
    CONTEXT_STORE_SHUTDOWN_GRACE_SECONDS) and exits 0. Logs are JSON lines on standard error.
    """
    settings = _settings(host=host, port=port)
    listening = _listen(settings)
    if sys.stdout.isatty() if banner is None else banner:
        typer.echo(startup_banner(settings))
    # Imported here: the other commands start faster without the whole app.
    from app.main import create_app

    # After a graceful shutdown uvicorn restores the SIGTERM handler it found and raises the
    # signal again, which Python's default handler turns into death by signal (status 143).
    # Shutting down when asked to is a success: with this handler found, serve returns, exit 0.
    signal.signal(signal.SIGTERM, _ignore_signal)
    server = WarmingServer(uvicorn.Config(create_app(settings), **uvicorn_options(settings)))
    # uvicorn configures serve's logging (its Config), not configure_logging: the switches
    # are set here.
    gather_only_what_lines_show()
    freeze_heap()
    # Ctrl-C: uvicorn shuts down gracefully, then raises the interrupt again.
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[listening])
    if not server.started:
        raise typer.Exit(3)  # uvicorn's own status for a server that could not start


@cli.command()
def migrate() -> None:
    """Bring the database to this release's schema.

    Runs alembic upgrade head: each migration not yet applied, in order. Run it before serve
    and after each upgrade of the service; running it again changes nothing.
    """
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
        typer.echo("ID\tTENANT\tSCOPES\tPREFIX\tSTATE\tNAME")
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


def _top_directory(path: str) -> str | None:
    top, separator, _ = path.partition("/")
    return top if separator else None


def skipped_lines(report: ArchiveReport) -> list[str]:
    """A line per skipped file, except that the files of a top-level directory from which
    nothing was sent are one line per reason: a project's root pushed as a workspace should
    not list every source file."""
    sent = {_top_directory(item.path) for item in report.imported} | {
        _top_directory(item.path) for item in report.refused
    }
    groups: dict[tuple[str, str], list[str]] = {}
    for skipped in report.skipped:
        top = _top_directory(skipped.path)
        shown = f"{top}/" if top is not None and top not in sent else skipped.path
        groups.setdefault((shown, skipped.reason), []).append(skipped.path)
    lines = []
    for (shown, reason), paths in sorted(groups.items()):
        what = paths[0] if len(paths) == 1 else f"{shown} ({len(paths)} files)"
        lines.append(f"skipped   {what}: {reason}")
    return lines


def _files(count: int) -> str:
    return f"{count} file" if count == 1 else f"{count} files"


def print_report(report: ArchiveReport, directory: Path, project: str) -> None:
    for item in report.imported:
        typer.echo(f"imported  {item.path} ({item.action})")
    for warning in report.warnings:
        typer.echo(f"warning   {warning.path} {warning.pointer or '/'}: {warning.message}")
    for refused in report.refused:
        typer.echo(f"refused   {refused.path}: {refused.status} {refused.title}: {refused.detail}")
        for error in refused.errors:
            typer.echo(f"            {error['path']}: {error['message']}")
    for line in skipped_lines(report):
        typer.echo(line)
    # The service lists the first 100 of each: past them, a count is at least what is listed.
    cut = {
        "warnings": report.warnings_truncated,
        "refused": report.refused_truncated,
        "skipped": report.skipped_truncated,
    }
    for what in (name for name, truncated in cut.items() if truncated):
        typer.echo(f"more {what} than listed: the service lists the first {MAX_LISTED}")
    found = len(report.imported) + len(report.refused) + len(report.skipped)
    over = {name: "over " if truncated else "" for name, truncated in cut.items()}
    typer.echo(
        f"{over['refused'] or over['skipped']}{_files(found)} found in {directory}: "
        f"{len(report.imported)} imported into project {project}, "
        f"{over['refused']}{len(report.refused)} refused, "
        f"{over['skipped']}{len(report.skipped)} skipped"
    )


class NothingToPush(Exception):
    """The directory holds no file of the layout: there is nothing to send."""

    def __init__(self, skipped: list[SkippedMember]) -> None:
        super().__init__("no file of the archive layout")
        self.skipped = skipped


T = TypeVar("T")

# A 429 says every turn for archives is taken and nothing was done (app/core/limits.py): push
# and pull ask again after the server's Retry-After (at most MOST_BUSY_WAIT_SECONDS), as many
# times in all as this.
BUSY_ATTEMPTS = 5
MOST_BUSY_WAIT_SECONDS = 60.0


def _busy_wait_seconds(error: ContextStoreError) -> float:
    """The server's Retry-After in seconds (5 when it gives none that is a number)."""
    given = error.response.headers.get("retry-after", "")
    # ASCII digits only: str.isdigit takes "²", which float does not.
    seconds = given.isascii() and given.isdigit()
    return min(float(given), MOST_BUSY_WAIT_SECONDS) if seconds else 5.0


def when_not_busy(what: str, attempt: Callable[[], T]) -> T:
    """``attempt``, made again while the server answers 429, saying so on standard error."""
    number = 1
    while True:
        try:
            return attempt()
        except ContextStoreError as exc:
            if exc.status != 429 or number == BUSY_ATTEMPTS:
                raise
            number += 1
            wait = _busy_wait_seconds(exc)
            typer.echo(
                f"{what}: the server is busy ({exc.detail or exc.title}); "
                f"trying again in {wait:g} s ({number} of {BUSY_ATTEMPTS})",
                err=True,
            )
            time.sleep(wait)


def push_directory(store: ContextStoreClient, directory: Path, project: str) -> ArchiveReport:
    """Pack the directory's files of the layout into one archive and import it: one request,
    so the service reports on every file at once and a failed upload changes nothing. The
    files left out of the archive are among the report's skipped, with the reason."""
    packed = pack(directory)
    if not packed.files:
        raise NothingToPush(packed.skipped)
    archive = packed.archive
    with _progress("push") as progress:
        task = progress.add_task("push", total=len(archive), visible=False)

        def chunks() -> Iterator[bytes]:
            for start in range(0, len(archive), UPLOAD_CHUNK_BYTES):
                yield archive[start : start + UPLOAD_CHUNK_BYTES]
                sent = min(start + UPLOAD_CHUNK_BYTES, len(archive))
                progress.update(task, completed=sent, visible=len(archive) >= LONG_TRANSFER_BYTES)

        report = when_not_busy("push", lambda: store.import_archive(project, chunks()))
    return report.model_copy(update={"skipped": [*packed.skipped, *report.skipped]})


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

        def download() -> None:
            spool.seek(0)
            spool.truncate()
            store.download_archive(project, spool.write, advance)

        when_not_busy("pull", download)
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
    """Import a workspace's files into a project.

    The workspace holds the tools' files in the archive layout: mdan/ (the saves),
    memory/agents/<agent>/ (the working context snapshot and the .jsonl memory files),
    .atari/state.json and .atari/runs/<run>/state.json (each with its .backup),
    features/<feature>/context.json, and .autonomous/context/ (the four project memory files).
    It says what happened to each file; everything else is skipped and listed with the reason.
    Exit status 1 when a file was refused, or when the directory holds no file of the layout.
    A busy server (429) is asked again after its Retry-After, five times in all.
    """
    try:
        with ContextStoreClient(url, key) as store:
            report = push_directory(store, directory, project)
    except NothingToPush as exc:
        for line in skipped_lines(ArchiveReport(skipped=exc.skipped)):
            typer.echo(line)
        raise _fail(
            f"nothing to push: {directory} holds no file of the archive layout "
            "(see context-store push --help)"
        ) from exc
    except (ContextStoreError, httpx.TransportError) as exc:
        raise _service_error(exc, url) from exc
    print_report(report, directory, project)
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
    """Write a project's files into a workspace.

    The files land in the tools' layout (see push), each written atomically (a temporary
    file, then a rename) with mode 0600. A busy server (429) is asked again after its
    Retry-After, five times in all.
    """
    try:
        with ContextStoreClient(url, key) as store:
            written = pull_directory(store, directory, project)
    except (ContextStoreError, httpx.TransportError) as exc:
        raise _service_error(exc, url) from exc
    except (tarfile.TarError, EOFError) as exc:
        raise _fail(f"the archive could not be read: {exc}") from exc
    for name in written:
        typer.echo(f"wrote     {name}")


@cli.command("mcp")
def mcp_stdio(url: UrlOption = DEFAULT_URL, key: KeyOption = None) -> None:
    """Serve the store's MCP tools, resources and prompt over standard input and output.

    For an agent on this machine: each tool sends its request to the server at --url with
    --key, as the REST API answers it. Nothing but the protocol is written to standard output.
    For example: claude mcp add context-store -- context-store mcp --url http://127.0.0.1:8000
    """
    # Imported here: the other commands start faster without the MCP SDK.
    from app.mcp_server.stdio import serve_stdio

    serve_stdio(url, key)


def main() -> None:
    cli()
