"""The ``context-store`` command, run as a user runs it."""

import os
import socket
import subprocess
import sys
import time

import httpx
import pytest

from tests.conftest import client_for

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


def test_migrate_then_serve_like_make_run(tmp_path):
    """What `make run` does, on a fresh SQLite file: migrate, serve, probe."""
    url = f"sqlite:///{tmp_path / 'data' / 'context-store.db'}"
    assert _run(["migrate"], url).returncode == 0
    port = _free_port()
    environment = os.environ | {
        "CONTEXT_STORE_DATABASE_URL": url,
        "CONTEXT_STORE_AUTH": "off",
        "CONTEXT_STORE_PORT": str(port),
    }
    server = subprocess.Popen(CLI + ["serve"], env=environment, stderr=subprocess.PIPE)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{base}/healthz").status_code == 200:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert httpx.get(f"{base}/readyz").json()["database"] == "sqlite"
        assert httpx.get(f"{base}/docs").status_code == 200
        assert "context_store_http_requests_total" in httpx.get(f"{base}/metrics").text
        assert httpx.get(f"{base}/v1/projects").status_code == 200
    finally:
        server.terminate()
        server.wait(timeout=20)
