"""`context-store serve` as a real process on a loopback port, for the crash and concurrency
tests: started, waited for, killed with SIGKILL or stopped, always cleaned up."""

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from app.core.config import Settings
from app.core.db import create_database, session_scope
from app.core.security import ALL_SCOPES, Scope
from app.keys import service as keys

COMMAND = Path(sys.executable).parent / "context-store"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def create_key_in(database_url: str, tenant: str, scopes: frozenset[Scope] = ALL_SCOPES) -> str:
    """A key (of every scope unless told), written straight into the database the servers use."""
    database = create_database(Settings(database_url=database_url))
    try:
        with session_scope(database.write_session()) as session:
            return keys.create_key(session, tenant, scopes).secret
    finally:
        database.dispose()


class Server:
    def __init__(
        self, database_url: str, log: Path, settings: dict[str, str] | None = None
    ) -> None:
        """``settings``: more CONTEXT_STORE_ variables, by name without the prefix."""
        self.database_url = database_url
        self.log = log
        self.settings = settings or {}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> None:
        environment = (
            os.environ
            | {
                "CONTEXT_STORE_DATABASE_URL": self.database_url,
                "CONTEXT_STORE_HOST": "127.0.0.1",
                "CONTEXT_STORE_PORT": str(self.port),
                "CONTEXT_STORE_AUTH": "on",
            }
            | {f"CONTEXT_STORE_{name}": value for name, value in self.settings.items()}
        )
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [str(COMMAND), "serve"], env=environment, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited: {self.log.read_text()[-2000:]}")
            try:
                if httpx.get(self.url + "/readyz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the server did not become ready: {self.log.read_text()[-2000:]}")

    def rss_bytes(self) -> int:
        """The server process's resident memory, from /proc."""
        assert self.process is not None
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        match = re.search(r"^VmRSS:\s+(\d+) kB$", status, re.MULTILINE)
        assert match is not None, status
        return int(match.group(1)) * 1024

    def kill(self) -> None:
        """SIGKILL: no shutdown handler, no flush, no goodbye."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        assert self.process.wait(timeout=10) == -signal.SIGKILL

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


@contextmanager
def running(
    database_url: str, log: Path, settings: dict[str, str] | None = None
) -> Iterator[Server]:
    server = Server(database_url, log, settings)
    try:
        server.start()
        yield server
    finally:
        server.stop()
