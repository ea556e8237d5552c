"""The ``context-store`` command, run as a user runs it."""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import client_for
from tests.helpers import python_indent2, seed_save

CLI = [sys.executable, "-m", "app"]


def _run(args: list[str], database_url: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = os.environ | {"CONTEXT_STORE_DATABASE_URL": database_url} | env
    return subprocess.run(
        CLI + args, env=environment, capture_output=True, text=True, timeout=60, check=False
    )


def test_keys_create_prints_the_key_alone_on_the_last_line(app, database_url, tenant):
    result = _run(["keys", "create", "--tenant", tenant, "--scopes", "read,write"], database_url)
    assert result.returncode == 0, result.stderr
    key = result.stdout.strip().splitlines()[-1]
    assert key.startswith("cs_") and " " not in key
    client = client_for(app, key)
    assert client.get("/v1/projects").status_code == 200
    assert client.post("/v1/admin/keys", json={"scopes": ["read"]}).status_code == 403


def test_keys_list_and_revoke(app, database_url, tenant):
    created = _run(["keys", "create", "--tenant", tenant, "--scopes", "read"], database_url)
    key = created.stdout.strip().splitlines()[-1]
    key_id = created.stdout.split("id=", 1)[1].split()[0]
    listed = _run(["keys", "list", "--tenant", tenant], database_url)
    assert key_id in listed.stdout and key not in listed.stdout
    assert _run(["keys", "revoke", key_id], database_url).returncode == 0
    assert client_for(app, key).get("/v1/projects").status_code == 401
    assert "revoked" in _run(["keys", "list", "--tenant", tenant], database_url).stdout


@pytest.mark.parametrize(
    "args", [["--scopes", "read,root"], ["--scopes", ""], ["--tenant", "../x"]]
)
def test_keys_create_refuses_bad_input(database_url, args):
    base = {"--tenant": "valid", "--scopes": "read"}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    result = _run(
        ["keys", "create", *[part for pair in base.items() for part in pair]], database_url
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr


def test_serve_refuses_auth_off_on_a_public_address(tmp_path):
    result = _run(
        ["serve"],
        f"sqlite:///{tmp_path / 'x.db'}",
        CONTEXT_STORE_AUTH="off",
        CONTEXT_STORE_HOST="0.0.0.0",
    )
    assert result.returncode != 0
    assert "loopback" in result.stderr and "Traceback" not in result.stderr


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _serve(url: str, port: int, log: Path, **env: str) -> subprocess.Popen[bytes]:
    """`context-store serve` on a migrated database, auth off, once it answers."""
    environment = (
        os.environ
        | {
            "CONTEXT_STORE_DATABASE_URL": url,
            "CONTEXT_STORE_AUTH": "off",
            "CONTEXT_STORE_PORT": str(port),
        }
        | env
    )
    server = subprocess.Popen(CLI + ["serve"], env=environment, stderr=log.open("wb"))
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200:
                return server
        except httpx.TransportError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise
            time.sleep(0.2)


def _migrated_sqlite(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'data' / 'context-store.db'}"
    assert _run(["migrate"], url).returncode == 0
    return url


def test_migrate_then_serve_like_make_run(tmp_path):
    """What `make run` does, on a fresh SQLite file: migrate, serve, probe."""
    port = _free_port()
    server = _serve(_migrated_sqlite(tmp_path), port, tmp_path / "server.log")
    try:
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{base}/readyz").json()["database"] == "sqlite"
        assert httpx.get(f"{base}/docs").status_code == 200
        assert "context_store_http_requests_total" in httpx.get(f"{base}/metrics").text
        assert httpx.get(f"{base}/v1/projects").status_code == 200
    finally:
        server.terminate()
        server.wait(timeout=20)


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        time.sleep(0.05)


def _posts_in_flight(base: str) -> bool:
    metrics = httpx.get(f"{base}/metrics").text
    return 'context_store_http_requests_in_progress{method="POST"} 1.0' in metrics


def _refuses_connections(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return True
    return False


class StalledImport:
    """A save import whose body stops after its first bytes until ``finish`` is called."""

    def __init__(self, base: str) -> None:
        self.body = python_indent2(seed_save())
        self.rest_may_go = threading.Event()
        self.responses: list[httpx.Response] = []
        self.errors: list[httpx.HTTPError] = []
        self.thread = threading.Thread(target=self._send, args=(base,))
        self.thread.start()
        _wait_for(lambda: _posts_in_flight(base), "the import to reach the app")

    def _chunks(self) -> Iterator[bytes]:
        yield self.body[:100]
        self.rest_may_go.wait(timeout=60)
        yield self.body[100:]

    def _send(self, base: str) -> None:
        try:
            self.responses.append(
                httpx.post(
                    f"{base}/v1/projects/p/saves",
                    content=self._chunks(),
                    headers={"Content-Type": "application/json", "X-Request-ID": "in-flight"},
                    timeout=60,
                )
            )
        except httpx.HTTPError as exc:
            self.errors.append(exc)

    def finish(self) -> None:
        self.rest_may_go.set()
        self.thread.join(timeout=60)


def _stop(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        server.kill()
        server.wait()


def _log_lines(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_sigterm_finishes_the_request_in_flight_then_exits_0(tmp_path):
    """A save import whose body is still arriving when SIGTERM comes is completed and answered;
    the server stops taking connections meanwhile, and exits 0 once it is done."""
    port, log = _free_port(), tmp_path / "server.log"
    base = f"http://127.0.0.1:{port}"
    server = _serve(
        _migrated_sqlite(tmp_path), port, log, CONTEXT_STORE_SHUTDOWN_GRACE_SECONDS="60"
    )
    upload: StalledImport | None = None
    try:
        upload = StalledImport(base)
        server.send_signal(signal.SIGTERM)
        _wait_for(lambda: _refuses_connections(port), "the server to stop accepting")
        assert server.poll() is None, "the server exited with a request in flight"
        upload.finish()
        assert server.wait(timeout=30) == 0
    finally:
        if upload is not None:
            upload.finish()
        _stop(server)
    [response] = upload.responses
    assert response.status_code == 201, response.text
    assert response.json()["filename"] == "mdan-save-1705314225.json"
    lines = _log_lines(log)
    [logged] = [line for line in lines if line.get("request_id") == "in-flight"]
    assert logged["status"] == 201 and logged["route"] == "/v1/projects/{project}/saves"
    assert "Shutting down" in [line["message"] for line in lines]


def test_sigterm_cancels_what_outlasts_the_grace_period_and_still_exits_0(tmp_path):
    port, log = _free_port(), tmp_path / "server.log"
    server = _serve(
        _migrated_sqlite(tmp_path), port, log, CONTEXT_STORE_SHUTDOWN_GRACE_SECONDS="0.5"
    )
    upload: StalledImport | None = None
    try:
        upload = StalledImport(f"http://127.0.0.1:{port}")
        server.send_signal(signal.SIGTERM)
        # The body never completes before the server is done with it.
        assert server.wait(timeout=30) == 0
    finally:
        if upload is not None:
            upload.finish()
        _stop(server)
    # uvicorn answers a cancelled request 500 (or the connection just ends): never a success.
    assert upload.responses or upload.errors
    assert not any(response.is_success for response in upload.responses)
    messages = [str(line["message"]) for line in _log_lines(log)]
    assert any("timeout graceful shutdown exceeded" in message for message in messages)


def test_a_key_sent_to_a_server_with_auth_off_is_flagged(tmp_path):
    port, log = _free_port(), tmp_path / "server.log"
    server = _serve(_migrated_sqlite(tmp_path), port, log)
    base = f"http://127.0.0.1:{port}"
    try:
        plain = httpx.get(f"{base}/v1/projects")
        keyed = [
            httpx.get(f"{base}/v1/projects", headers={"Authorization": "Bearer cs_mine"}),
            httpx.get(f"{base}/v1/projects", headers={"X-API-Key": "cs_mine"}),
        ]
    finally:
        server.terminate()
        server.wait(timeout=20)
    assert plain.status_code == 200 and "warning" not in plain.headers
    for response in keyed:
        assert response.status_code == 200
        assert response.headers["warning"].startswith('299 - "')
        assert "auth" in response.headers["warning"].lower()
    warnings = [line for line in _log_lines(log) if line["level"] == "WARNING"]
    assert len(warnings) == 1, warnings
    assert "CONTEXT_STORE_AUTH=off" in str(warnings[0]["message"])
    assert "cs_mine" not in log.read_text()
