"""A revoked key stops working at once on every server process of the database, however it
was revoked: through the API of another process, or with the command line.

Two real `context-store serve` processes share one database (both backends). The key is first
used on the second server, so that the server knows it (it remembers who a key stands for);
then it is revoked elsewhere, and the very next request on the second server must be a 401:
a read, and a write that must leave nothing behind.
"""

import os
import secrets
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from tests.helpers import assert_problem
from tests.platform.servers import COMMAND, Server, create_key_in, running

P = "/v1/projects/revoke"
DECISIONS = P + "/memory/decisions"


@pytest.fixture(scope="module")
def servers(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Server]]:
    logs = tmp_path_factory.mktemp("revoke-servers")
    with ExitStack() as stack:
        yield [stack.enter_context(running(database_url, logs / f"{n}.log")) for n in (1, 2)]


def _client(server: Server, key: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=30)


def _decision(name: str) -> dict[str, object]:
    return {"id": name, "decision": name, "timestamp": 1}


def _key_id(admin: httpx.Client, key: str) -> str:
    listed = admin.get("/v1/admin/keys", params={"limit": 500}).json()["items"]
    (found,) = [item["id"] for item in listed if key.startswith(item["prefix"])]
    return str(found)


def _known_to(server: Server, key: str) -> httpx.Client:
    """A client of ``server`` whose key the server has just used, for a read and a write."""
    client = _client(server, key)
    assert client.get("/v1/projects").status_code == 200
    assert (
        client.post(DECISIONS, json=_decision("before-" + secrets.token_hex(4))).status_code == 201
    )
    return client


def _assert_refused_at_once(client: httpx.Client, admin: httpx.Client) -> None:
    assert_problem(client.get("/v1/projects"), 401)
    name = "after-" + secrets.token_hex(4)
    assert_problem(client.post(DECISIONS, json=_decision(name)), 401)
    stored = admin.get(DECISIONS, params={"limit": 500}).json()["items"]
    assert name not in [item["id"] for item in stored]


def test_a_revoke_through_one_servers_api_applies_at_once_on_the_other(
    servers: list[Server], database_url: str
) -> None:
    tenant = "t-" + secrets.token_hex(6)
    admin_key = create_key_in(database_url, tenant)
    key = create_key_in(database_url, tenant)
    first, second = servers
    admin_on_first, admin_on_second = _client(first, admin_key), _client(second, admin_key)
    client = _known_to(second, key)

    assert (
        admin_on_first.delete(f"/v1/admin/keys/{_key_id(admin_on_first, key)}").status_code == 204
    )
    _assert_refused_at_once(client, admin_on_second)


def test_a_revoke_with_the_command_line_applies_at_once_on_a_running_server(
    servers: list[Server], database_url: str, tmp_path: Path
) -> None:
    tenant = "t-" + secrets.token_hex(6)
    admin = _client(servers[1], create_key_in(database_url, tenant))
    key = create_key_in(database_url, tenant)
    client = _known_to(servers[1], key)

    revoked = subprocess.run(
        [str(COMMAND), "keys", "revoke", _key_id(admin, key)],
        env=os.environ | {"CONTEXT_STORE_DATABASE_URL": database_url},
        capture_output=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert revoked.returncode == 0, revoked.stderr
    _assert_refused_at_once(client, admin)
