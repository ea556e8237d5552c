"""What a benchmark run stands up and tears down: databases, API keys and pinned servers.

The servers run on one core and everything that measures them on the other, so that the load
generator never competes with what it measures (``taskset``; on a one-core machine nothing is
pinned and the results say so).
"""

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psycopg
from alembic import command
from sqlalchemy.engine import make_url

from app.core.config import Settings
from app.core.db import create_database, session_scope
from app.core.migrations import alembic_config
from app.core.security import ALL_SCOPES
from app.keys import service as keys

ROOT = Path(__file__).resolve().parents[2]
POSTGRES_ADMIN_URL = os.environ.get(
    "CONTEXT_STORE_BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
TENANT = "bench"


@dataclass(frozen=True)
class Cores:
    """The core the servers run on and the one the load comes from (None: not pinned)."""

    server: int | None
    client: int | None

    @classmethod
    def pick(cls) -> "Cores":
        available = sorted(os.sched_getaffinity(0))
        if len(available) < 2:
            return cls(None, None)
        return cls(available[0], available[1])

    def pin_this_process(self) -> None:
        if self.client is not None:
            os.sched_setaffinity(0, {self.client})

    def server_prefix(self) -> list[str]:
        return [] if self.server is None else ["taskset", "-c", str(self.server)]


def _dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def postgres_reachable() -> bool:
    try:
        with psycopg.connect(_dsn(POSTGRES_ADMIN_URL), connect_timeout=3):
            return True
    except psycopg.OperationalError:
        return False


def _parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _postgres_processes() -> tuple[int, list[int]] | None:
    """The local PostgreSQL server's postmaster and its children now; None when its processes
    are not this machine's to see (a remote server, another namespace)."""
    with psycopg.connect(_dsn(POSTGRES_ADMIN_URL)) as connection:
        row = connection.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    try:
        postmaster = _parent_of(row[0])
    except OSError:
        return None
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if _parent_of(int(entry.name)) == postmaster:
                    children.append(int(entry.name))
            except OSError:
                continue  # ended meanwhile
    return postmaster, children


@contextmanager
def postgres_on_the_server_core(cores: Cores) -> Iterator[str]:
    """PostgreSQL's processes on the servers' core while the block runs (new ones inherit it
    from the postmaster), their affinity restored after: the work a request makes the database
    do is the server side's, and on the load generator's core it made requests go out late.
    Yields what the results say about it."""
    found = _postgres_processes() if cores.server is not None else None
    if found is None:
        yield "PostgreSQL's processes not pinned (not this machine's, or one core)"
        return
    postmaster, children = found
    restored = os.sched_getaffinity(postmaster)
    try:
        os.sched_setaffinity(postmaster, {cores.server})
    except PermissionError:
        yield "PostgreSQL's processes not pinned (not permitted)"
        return
    try:
        _set_affinity(children, {cores.server})
        yield f"PostgreSQL's processes on core {cores.server} too"
    finally:
        os.sched_setaffinity(postmaster, restored)
        again = _postgres_processes()
        _set_affinity(again[1] if again else children, restored)


def _set_affinity(pids: list[int], cpus: set[int]) -> None:
    for pid in pids:
        try:
            os.sched_setaffinity(pid, cpus)
        except (ProcessLookupError, PermissionError):
            continue  # ended meanwhile, or not ours to move


@dataclass
class BenchDatabase:
    """A fresh, migrated database with one API key; ``drop`` removes it."""

    backend: str
    url: str
    key: str = ""
    _postgres_name: str | None = field(default=None, repr=False)

    @classmethod
    def create(cls, backend: str, workdir: Path) -> "BenchDatabase":
        if backend == "sqlite":
            path = workdir / f"bench-{secrets.token_hex(4)}.db"
            database = cls(backend, f"sqlite:///{path}")
        else:
            name = f"cs_bench_{secrets.token_hex(4)}"
            with psycopg.connect(_dsn(POSTGRES_ADMIN_URL), autocommit=True) as connection:
                connection.execute(f'CREATE DATABASE "{name}"')
            url = make_url(POSTGRES_ADMIN_URL).set(database=name)
            database = cls(backend, url.render_as_string(hide_password=False), _postgres_name=name)
        config = alembic_config(database.url)
        config.attributes["configure_logging"] = False  # keep the tables' output readable
        command.upgrade(config, "head")
        database.key = database._create_key()
        return database

    def settings(self) -> Settings:
        return Settings(database_url=self.url)

    def _create_key(self) -> str:
        database = create_database(self.settings())
        try:
            with session_scope(database.write_session()) as session:
                return keys.create_key(session, TENANT, ALL_SCOPES, "bench").secret
        finally:
            database.dispose()

    def drop(self) -> None:
        if self._postgres_name is None:
            path = Path(make_url(self.url).database or "")
            for suffix in ("", "-wal", "-shm"):
                Path(str(path) + suffix).unlink(missing_ok=True)
            return
        with psycopg.connect(_dsn(POSTGRES_ADMIN_URL), autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{self._postgres_name}" WITH (FORCE)')


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Server:
    """A server process on the server core, started by ``command``, stopped with SIGTERM."""

    def __init__(self, command: list[str], env: dict[str, str], port: int, log: Path) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self._log = log.open("ab")
        self.process = subprocess.Popen(
            command, env=env, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT
        )
        self._wait_until_up()

    @property
    def pid(self) -> int:
        return self.process.pid

    def _wait_until_up(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited ({self.process.returncode}); see the log")
            try:
                httpx.get(self.url + "/healthz", timeout=1)
                return
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError("the server did not start within 30 s")

    def wait_until_idle(self, window: float = 0.1, timeout: float = 5.0) -> None:
        """Return once the server has used (almost) no CPU over ``window`` (or after
        ``timeout``, saying so): a closed-loop pass stops with a request in flight on each of
        its connections, and the server went on with them for 60-130 ms, on the core where the
        next pass is measured."""
        deadline = time.monotonic() + timeout
        before = cpu_seconds(self.pid)
        while time.monotonic() < deadline:
            time.sleep(window)
            after = cpu_seconds(self.pid)
            if after - before <= window / 10:
                return
            before = after
        # Measured anyway, and said: the next pass shares the core with whatever kept it busy.
        print(f"the server at {self.url} was still busy after {timeout} s", file=sys.stderr)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def _server_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXT_STORE_")}
    env.update(extra)
    return env


def app_server(database: BenchDatabase, cores: Cores, log: Path) -> Server:
    """The service itself, exactly as ``context-store serve`` runs it, with auth on."""
    port = free_port()
    env = _server_env(
        {
            "CONTEXT_STORE_DATABASE_URL": database.url,
            "CONTEXT_STORE_PORT": str(port),
            "CONTEXT_STORE_AUTH": "on",
        }
    )
    command = [*cores.server_prefix(), str(Path(sys.executable).parent / "context-store"), "serve"]
    return Server(command, env, port, log)


def ceiling_server(cores: Cores, log: Path) -> Server:
    """A bare FastAPI endpoint returning a constant, on the same uvicorn settings."""
    port = free_port()
    env = _server_env({"CONTEXT_STORE_PORT": str(port)})
    command = [*cores.server_prefix(), sys.executable, "-m", "tests.bench.ceiling"]
    return Server(command, env, port, log)


def peak_rss_reset(pid: int) -> bool:
    """Reset the process's peak resident size (Linux: clear_refs 5); False if not allowed."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def rss_bytes(pid: int) -> tuple[int, int]:
    """(current, peak) resident set size of ``pid``."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            values[name] = int(rest.split()[0]) * 1024
    return values["VmRSS"], values["VmHWM"]


def cpu_seconds(pid: int) -> float:
    """User and system CPU time ``pid`` has used: unlike wall time, barely moved by what
    else the machine runs."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
