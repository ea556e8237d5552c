"""Settings, read from the environment with the prefix ``CONTEXT_STORE_``."""

import ipaddress
import os
import secrets
import tempfile
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from typing import Literal
from urllib.parse import parse_qsl, unquote_to_bytes

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy.engine import make_url

MIB = 1024 * 1024
MIN_FINGERPRINT_KEY_CHARS = 32


@dataclass(frozen=True)
class AllowedCallers:
    """The ``Host`` values a request may name and the ``Origin`` values a browser request may
    come from (``name:*``: any port), against DNS rebinding (app/core/rebinding.py)."""

    hosts: tuple[str, ...]
    origins: tuple[str, ...]


class AuthMode(StrEnum):
    on = "on"
    off = "off"


def sqlite_file(database_url: str) -> str | None:
    """The file a SQLite database lives in: the name the driver is given for the URL (the
    dialect's own ``create_connect_args``: a path made absolute, or with ``uri=true`` the name
    with the URL's other parameters appended), read as SQLite reads it. None for another
    database, or one in memory."""
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite":
        return None
    (name,), options = url.get_dialect()().create_connect_args(url)
    if name == ":memory:":
        return None
    # With uri=true a name not starting with "file:" is still a plain file name, "?" and all.
    return _uri_file(name) if options.get("uri") and name.startswith("file:") else name


def _uri_file(uri: str) -> str | None:
    """The file of a SQLite URI filename, by SQLite's rules ("URI Filenames in SQLite"): after
    ``file:``, an optional ``//`` and authority (empty or ``localhost``), then the path up to
    ``?`` or ``#``, its percent-escapes decoded as bytes and cut at the first NUL. None for a
    database in memory (``mode=memory``, ``vfs=memdb``, the path ``:memory:``)."""
    path, _, query = uri.removeprefix("file:").partition("#")[0].partition("?")
    if path.startswith("//"):
        authority_end = path.find("/", 2)
        path = "" if authority_end < 0 else path[authority_end:]
    parameters = dict(parse_qsl(query, keep_blank_values=True))
    if parameters.get("mode") == "memory" or parameters.get("vfs") == "memdb":
        return None
    name = os.fsdecode(unquote_to_bytes(path).split(b"\0", 1)[0])
    return None if name in ("", ":memory:") else name


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CONTEXT_STORE_", extra="ignore")

    database_url: str = "sqlite:///./data/context-store.db"
    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=1, le=65535)
    auth: AuthMode = AuthMode.on
    # Saves and archives carry whole agent histories; everything else is small.
    max_body_bytes: int = Field(default=4 * MIB, ge=1)
    max_bulk_body_bytes: int = Field(default=64 * MIB, ge=1)
    # A request's line and headers together (`serve` answers 431 beyond it). Keys and request
    # ids are short; this leaves room for what proxies add, and bounds what a client can make
    # the server hold before a request even starts.
    max_header_bytes: int = Field(default=64 * 1024, ge=4096)
    # zlib level for gzip responses. Starlette's default of 9 costs ~15x level 1 on
    # large documents for a few percent of size.
    gzip_level: int = Field(default=5, ge=1, le=9)
    gzip_minimum_bytes: int = Field(default=1024, ge=0)
    # Seed 000: "Delete old saves after successful completion".
    saves_auto_prune: bool = True
    # Secrets replaced by [REDACTED:<kind>] in every document before it is stored (every
    # format). Off stores what the tools wrote; warnings, problems and logs are redacted anyway.
    redact: bool = True
    # Seed 004: the running summary is at most 2000 tokens (cl100k_base, the service's count).
    memory_summary_max_tokens: int = Field(default=2000, ge=1)
    idempotency_ttl_hours: int = Field(default=24, ge=24)
    # The key of the HMAC that recognises a retried request's body (Idempotency-Key). Bodies
    # hold secrets the service redacts; a plain digest of them would let anyone holding the
    # database test a guessed secret. The seal of the lists' cursors is keyed from it too, by
    # a key derived for that alone (app/core/cursors.py). Every replica must share it and it
    # must outlive restarts (a changed key makes a retry look like another request, and
    # refuses the cursors handed out before with a 422): set it where the other secrets of the
    # deployment live. Unset, a SQLite database keeps one in a file beside it
    # (``<database>.fingerprint-key``, mode 0600: not in the database, so a copy of the
    # database alone cannot test guesses); any other database's process draws its own.
    fingerprint_key: SecretStr | None = None
    # Threads that run route code and every database call (anyio's limiter). A request that
    # finds them all busy waits in the event loop, with no time limit and at no cost but its
    # socket, the tenants waiting served in turn (app/core/fair.py); the connection pools are
    # sized from this, so that a thread never waits long for a connection (which would fail
    # after db_pool_timeout_seconds with a 503).
    worker_threads: int = Field(default=16, ge=1)
    # Connections kept open per pool. Each pool opens up to worker_threads + DB_POOL_MARGIN;
    # SQLite's writer always has exactly one.
    db_pool_size: int = Field(default=10, ge=1)
    db_pool_timeout_seconds: float = Field(default=30.0, gt=0)
    sqlite_busy_timeout_ms: int = Field(default=10_000, ge=0)
    # On SIGTERM the server stops accepting and lets requests in flight finish for this long
    # before cancelling them. Orchestrators wait 10 (docker) to 30 (Kubernetes) seconds before
    # a SIGKILL; give them more than this (compose sets stop_grace_period: 30s).
    shutdown_grace_seconds: float = Field(default=20.0, ge=0)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # How long a server remembers who an API key stands for (0: look the key up every time).
    # Not whether it is revoked: every request checks that in its own first transaction, so a
    # revoke applies at once on every process, through the API or the command line.
    auth_cache_seconds: float = Field(default=5.0, ge=0)
    # Archive exports running at once (each builds its archive with a worker thread and a
    # connection, then streams it from a spool file): per tenant, so that no tenant takes
    # them all, and per server (below worker_threads, so that other requests keep threads).
    # Beyond them an export waits up to archive_export_wait_seconds for a turn, then gets a
    # 429 with Retry-After.
    archive_exports_per_tenant: int = Field(default=4, ge=1)
    archive_exports_per_server: int = Field(default=8, ge=1)
    # Below the Python client's 60 s timeout: a client gives up waiting no sooner than this.
    archive_export_wait_seconds: float = Field(default=45.0, ge=0)
    # Imports under the bulk limit (a save's, an archive's) running at once, alike: each
    # holds a worker thread while it parses, redacts and compresses up to 64 MiB, and 18
    # archive imports at once from one tenant took every thread (2026-11-27). Beyond them an
    # import waits up to bulk_import_wait_seconds for a turn, then gets a 429.
    bulk_imports_per_tenant: int = Field(default=2, ge=1)
    bulk_imports_per_server: int = Field(default=4, ge=1)
    bulk_import_wait_seconds: float = Field(default=45.0, ge=0)
    # Request bodies held at once (app/core/limits.py ``BodyBytes``), from their first byte (or
    # their Content-Length, when they declare one) to the end of their request: for one tenant
    # four bodies at the bulk limit, for the server sixteen. Beyond them, a 429.
    body_bytes_per_tenant: int = Field(default=4 * 64 * MIB, ge=1)
    body_bytes_per_server: int = Field(default=16 * 64 * MIB, ge=1)
    # How much of an export's spool stays in memory before it moves to a temporary file.
    archive_spool_memory_bytes: int = Field(default=1 * MIB, ge=0)
    # A response is sent in slices of 256 KiB (app/core/sending.py): a client that has not
    # taken a slice within this long is dropped (its export's turn and memory are freed).
    send_timeout_seconds: float = Field(default=30.0, gt=0)
    # A request's head must arrive within this long of its first byte, and its body must not
    # pause this long (app/core/http_server.py): else 408, or the connection closed.
    read_timeout_seconds: float = Field(default=30.0, gt=0)
    # The DNS-rebinding check (app/core/rebinding.py): Host values (`name:port`, `name:*` for
    # any port) and Origin values (`http://name:port`) the server answers besides its own
    # address and the loopback names, comma-separated.
    allowed_hosts: str = ""
    allowed_origins: str = ""

    @field_validator("database_url")
    @classmethod
    def use_psycopg3(cls, url: str) -> str:
        """``postgresql://`` would select psycopg2, which is not a dependency."""
        for scheme in ("postgresql://", "postgres://"):
            if url.startswith(scheme):
                return "postgresql+psycopg://" + url.removeprefix(scheme)
        return url

    @field_validator("fingerprint_key")
    @classmethod
    def long_enough(cls, key: SecretStr | None) -> SecretStr | None:
        # Empty means unset: docker-compose passes an unset variable on as "".
        if key is None or not key.get_secret_value():
            return None
        if len(key.get_secret_value()) < MIN_FINGERPRINT_KEY_CHARS:
            raise ValueError(
                f"CONTEXT_STORE_FINGERPRINT_KEY must be at least {MIN_FINGERPRINT_KEY_CHARS} "
                "characters (e.g. `openssl rand -hex 32`)"
            )
        return key

    @cached_property
    def fingerprint_key_file(self) -> str | None:
        """Where the key lives when none is set: beside a SQLite database file."""
        if self.fingerprint_key is not None:
            return None
        path = sqlite_file(self.database_url)
        return None if path is None else f"{path}.fingerprint-key"

    @cached_property
    def fingerprint_secret(self) -> bytes:
        if self.fingerprint_key is not None:
            return self.fingerprint_key.get_secret_value().encode()
        if self.fingerprint_key_file is None:
            return secrets.token_bytes(32)
        return _key_in_file(self.fingerprint_key_file)

    @model_validator(mode="after")
    def hold_a_whole_body(self) -> "Settings":
        # An MCP call holds its body, and the request its tool sends to its route in process
        # holds that body again (a second copy): below twice the bulk limit, a save sent
        # through MCP could never be received.
        least = 2 * self.max_bulk_body_bytes
        for name in ("body_bytes_per_tenant", "body_bytes_per_server"):
            if getattr(self, name) < least:
                raise ValueError(
                    f"CONTEXT_STORE_{name.upper()} must be at least twice CONTEXT_STORE_MAX_BULK_"
                    f"BODY_BYTES ({least})"
                )
        return self

    @model_validator(mode="after")
    def refuse_open_unauthenticated(self) -> "Settings":
        if self.auth is AuthMode.off and not is_loopback(self.host):
            raise ValueError(
                f"CONTEXT_STORE_AUTH=off is only allowed on a loopback address, not {self.host!r}"
            )
        return self

    @cached_property
    def allowed_callers(self) -> AllowedCallers | None:
        """The Host and Origin values requests may carry, or None to check neither.

        Checked when serving on a loopback address (where a page that rebinds its own name to
        127.0.0.1 would otherwise reach the server, and AUTH=off needs no key) or when hosts or
        origins are set; not on another address without them, where the server is reached by
        names only its deployment knows and every request carries its key itself."""
        hosts = [host.strip() for host in self.allowed_hosts.split(",") if host.strip()]
        origins = [item.strip() for item in self.allowed_origins.split(",") if item.strip()]
        if not (is_loopback(self.host) or hosts or origins):
            return None
        # This server's own address (bracketed when IPv6, as a Host header writes it).
        own = f"[{self.host}]" if ":" in self.host else self.host
        names = list(dict.fromkeys(["127.0.0.1", "localhost", "[::1]", own]))
        return AllowedCallers(
            hosts=(*names, *(f"{name}:*" for name in names), *hosts),
            origins=(
                *(f"http://{name}" for name in names),
                *(f"http://{name}:*" for name in names),
                *origins,
            ),
        )

    @cached_property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")


def _key_in_file(path: str) -> bytes:
    """The key kept in ``path``, made (32 random bytes, hex, mode 0600) when there is none.
    The file appears whole or not at all (written aside, then linked into place), so that
    processes starting together agree on one key."""
    try:
        with open(path, "rb") as existing:
            key = existing.read().strip()
    except FileNotFoundError:
        key = secrets.token_hex(32).encode()
        descriptor, aside = tempfile.mkstemp(dir=os.path.dirname(path) or ".")
        try:
            with os.fdopen(descriptor, "wb") as written:
                written.write(key + b"\n")
                written.flush()
                os.fsync(written.fileno())
            os.link(aside, path)
        except FileExistsError:
            return _key_in_file(path)
        finally:
            os.unlink(aside)
        return key
    if len(key) < MIN_FINGERPRINT_KEY_CHARS:
        raise ValueError(f"{path} holds no usable key: delete it, or set the key")
    return key
