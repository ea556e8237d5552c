"""Helpers of .ci/container-test: databases, a free port, and the smoke test of a running image.

Run with the project's own interpreter (.venv/bin/python), from the repository's root.
"""

import json
import socket
import sys
import time
from pathlib import Path

import httpx
import psycopg
from sqlalchemy.engine import make_url

GOLDEN = Path("tests/formats/golden")
TIMEOUT = httpx.Timeout(30.0)


def _admin(url: str) -> psycopg.Connection:
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    return psycopg.connect(dsn, autocommit=True, connect_timeout=10)


def createdb(admin_url: str, name: str) -> None:
    with _admin(admin_url) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')


def dropdb(admin_url: str, name: str) -> None:
    with _admin(admin_url) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def database_url(admin_url: str, name: str) -> None:
    url = make_url(admin_url).set(drivername="postgresql+psycopg", database=name)
    print(url.render_as_string(hide_password=False))


def free_port() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        print(probe.getsockname()[1])


def wait_ready(base: str, seconds: str) -> None:
    deadline = time.monotonic() + float(seconds)
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            response = httpx.get(f"{base}/readyz", timeout=2)
            if response.status_code == 200:
                print(f"ready: {response.json()}")
                return
            last = f"{response.status_code} {response.text[:200]}"
        except httpx.TransportError as exc:
            last = repr(exc)
        time.sleep(0.5)
    sys.exit(f"not ready after {seconds}s: {last}")


def expect_auth(base: str) -> None:
    response = httpx.get(f"{base}/v1/projects", timeout=TIMEOUT)
    _expect(response.status_code == 401, f"without a key: {response.status_code}, not 401")
    print("auth is on")


def _expect(condition: bool, message: str) -> None:
    if not condition:
        sys.exit(f"smoke test failed: {message}")


def _save_round_trip(client: httpx.Client) -> None:
    golden = (GOLDEN / "mdan-save-seed-example.json").read_bytes()
    expected = json.dumps(json.loads(golden), indent=2).encode()
    created = client.post(
        "/v1/projects/smoke/saves", content=golden, headers={"Content-Type": "application/json"}
    )
    _expect(created.status_code == 201, f"save import: {created.status_code} {created.text}")
    exported = client.get(created.headers["location"], headers={"Accept-Encoding": "identity"})
    _expect(exported.status_code == 200, f"save export: {exported.status_code}")
    _expect(exported.content == expected, "the exported save differs from the file imported")
    print("save round trip: byte for byte")


def _snapshot_restore(client: httpx.Client) -> None:
    url = "/v1/projects/smoke/agents/agent_123"
    golden = (GOLDEN / "autobyteus" / "working_context_snapshot.json").read_bytes()
    stored = client.put(
        f"{url}/working-context-snapshot",
        content=golden,
        headers={"Content-Type": "application/json"},
    )
    _expect(stored.status_code == 201, f"snapshot PUT: {stored.status_code} {stored.text}")
    exported = client.get(f"{url}/working-context-snapshot")
    _expect(exported.content == golden, "the exported snapshot differs from the file stored")
    restored = client.post(f"{url}/restore", json={"system_prompt": "System prompt"})
    _expect(restored.status_code == 200, f"restore: {restored.status_code} {restored.text}")
    body = restored.json()
    _expect(body["source"] == "cache", f"restore source {body['source']!r}, not 'cache'")
    before = json.loads(golden)
    # autobyteus 1.4.4 restores into a new memory manager (epoch 1) that its bootstrap resets.
    _expect(body["snapshot"]["epoch_id"] == 2, "restore did not give epoch 2, as autobyteus")
    _expect(body["snapshot"]["messages"] == before["messages"], "restore changed the messages")
    cached = client.get(f"{url}/working-context-snapshot")
    _expect(cached.content == json.dumps(body["snapshot"]).encode(), "restore was not stored")
    print("snapshot restore: from the cache, epoch 2, stored")


def smoke(base: str, key: str) -> None:
    headers = {"Authorization": f"Bearer {key}", "X-Request-ID": "container-smoke"}
    with httpx.Client(base_url=base, headers=headers, timeout=TIMEOUT) as client:
        _save_round_trip(client)
        _snapshot_restore(client)
        echoed = client.get("/v1/projects")
        _expect(echoed.headers.get("x-request-id") == "container-smoke", "no X-Request-ID echo")
        metrics = client.get("/metrics").text
        _expect("context_store_db_pool_checked_out" in metrics, "no pool metrics")


def check_logs() -> None:
    """The container's output is JSON lines, and the smoke test's requests are among them."""
    lines = [line for line in sys.stdin.read().splitlines() if line.strip()]
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            sys.exit(f"a log line is not JSON: {line[:200]}")
    requests = [r for r in records if r.get("request_id") == "container-smoke" and "route" in r]
    _expect(bool(requests), "no request log line carries the smoke test's request id")
    print(f"{len(records)} log lines, all JSON; {len(requests)} from the smoke test")


COMMANDS = {
    "createdb": createdb,
    "dropdb": dropdb,
    "database-url": database_url,
    "free-port": free_port,
    "wait-ready": wait_ready,
    "expect-auth": expect_auth,
    "smoke": smoke,
    "check-logs": check_logs,
}

if __name__ == "__main__":
    COMMANDS[sys.argv[1]](*sys.argv[2:])
