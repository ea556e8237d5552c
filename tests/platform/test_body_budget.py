"""Request bodies held at once, per tenant and per server (``BodyBytes``, app/core/limits.py).

A body is held whole from its first byte until its request ends, and a client may send it as
slowly as the read timeout lets it: 16 save bodies of 60 MB trickled by one tenant held 1 GB
of the server's memory (2026-11-27). The requests here are sent to the app directly, so that
one can stay halfway through its body while the others are answered."""

import gzip
import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient

from app.core import body
from app.core.body import decompress_body
from tests.conftest import client_for, create_key
from tests.helpers import AsgiAnswer, assert_problem, http_scope, python_indent2, seed_save, tar_gz
from tests.mcp_client import BASE_URL as MCP_BASE_URL

MCP_HEADERS = {
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-06-18",
}

DECISIONS = "/v1/projects/{project}/memory/decisions"
JSON = {"content-type": "application/json"}
Receive = Callable[[], Awaitable[dict[str, Any]]]


async def _post(app: Any, key: str, path: str, receive: Receive, **headers: str) -> AsgiAnswer:
    answer = AsgiAnswer()
    sent_headers = [
        (b"host", b"testserver"),
        (b"authorization", f"Bearer {key}".encode()),
        (b"content-type", b"application/json"),
        *((name.replace("_", "-").encode(), value.encode()) for name, value in headers.items()),
    ]

    await app(http_scope("POST", path, sent_headers), receive, answer.send)
    return answer


def _whole(body: bytes) -> Receive:
    arriving = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return arriving.pop(0) if arriving else {"type": "http.disconnect"}

    return receive


def _decision(item_id: str, size: int) -> bytes:
    """A decision's body of exactly ``size`` bytes."""
    head = json.dumps({"id": item_id, "decision": ""})[:-2]
    return (head + "x" * (size - len(head) - 2) + '"}').encode()


@pytest.fixture
def budget(app, monkeypatch):
    """The app's ``BodyBytes`` made small: 1,000 bytes a tenant, 1,500 for the server (set on
    the object: starlette's State loses an attribute monkeypatch sets on it)."""
    body_bytes = app.state.body_bytes
    monkeypatch.setattr(body_bytes, "per_tenant", 1000)
    monkeypatch.setattr(body_bytes, "per_server", 1500)
    return body_bytes


def test_a_body_still_arriving_holds_its_tenants_share_until_its_request_ends(app, budget, project):
    """A body of 800 bytes of which 10 have come: the same tenant's next body of 300 is a 429
    at once (problem+json, Retry-After) and nothing of it is stored; another tenant's is
    served; once the first has arrived and been answered, the tenant's next is served."""
    slow_key = create_key(app, "t-slow", "read", "write")
    other_key = create_key(app, "t-other", "write")
    path = DECISIONS.format(project=project)
    slow_body = _decision("slow", 800)
    started, go_on = anyio.Event(), anyio.Event()
    pieces = [slow_body[:10], slow_body[10:]]

    async def trickled() -> dict[str, Any]:
        if len(pieces) == 1:
            started.set()
            await go_on.wait()
        piece = pieces.pop(0)
        return {"type": "http.request", "body": piece, "more_body": bool(pieces)}

    answers: dict[str, AsgiAnswer] = {}

    async def scenario() -> None:
        async def slow() -> None:
            answers["slow"] = await _post(app, slow_key, path, trickled, content_length="800")

        async with anyio.create_task_group() as group:
            group.start_soon(slow)
            await started.wait()
            assert budget.held == {"t-slow": 800}
            answers["refused"] = await _post(
                app, slow_key, path, _whole(_decision("next", 300)), content_length="300"
            )
            answers["other"] = await _post(
                app, other_key, path, _whole(_decision("other", 300)), content_length="300"
            )
            go_on.set()
        answers["after"] = await _post(
            app, slow_key, path, _whole(_decision("next", 300)), content_length="300"
        )

    client = client_for(app, slow_key)
    anyio.run(scenario)
    problem = json.loads(answers["refused"].body)
    assert answers["refused"].status == 429, answers["refused"].body
    assert answers["refused"].headers["content-type"] == "application/problem+json"
    assert answers["refused"].headers["retry-after"] == "5"
    assert "this tenant's" in problem["detail"]
    assert answers["other"].status == 201, answers["other"].body
    assert answers["slow"].status == 201, answers["slow"].body
    assert answers["after"].status == 201, answers["after"].body
    stored = client.get(path).json()["items"]
    assert sorted(item["id"] for item in stored) == ["next", "slow"]  # "other": its tenant's
    assert budget.held == {}


def test_the_servers_share_bounds_every_tenant_together(app, budget, project):
    """Two tenants' bodies still arriving, 800 bytes each, would pass the server's 1,500: the
    second is refused, naming the server's limit."""
    first, second = create_key(app, "t-one", "write"), create_key(app, "t-two", "write")
    path = DECISIONS.format(project=project)
    started, go_on = anyio.Event(), anyio.Event()
    answers: dict[str, AsgiAnswer] = {}

    async def first_piece_then_wait() -> dict[str, Any]:
        started.set()
        await go_on.wait()
        return {"type": "http.disconnect"}

    async def scenario() -> None:
        async def held() -> None:
            answers["held"] = await _post(
                app, first, path, first_piece_then_wait, content_length="800"
            )

        async with anyio.create_task_group() as group:
            group.start_soon(held)
            await started.wait()
            answers["refused"] = await _post(
                app, second, path, _whole(_decision("two", 800)), content_length="800"
            )
            go_on.set()

    anyio.run(scenario)
    assert answers["refused"].status == 429
    assert "the server's" in answers["refused"].json()["detail"]
    assert answers["held"].status == 400  # the client went away mid-body
    assert budget.held == {}


def test_a_body_without_a_length_is_held_as_it_arrives(app, budget, project):
    """Chunked, no Content-Length: held piece by piece, refused once it passes the tenant's
    share, and given back."""
    key = create_key(app, "t-chunked", "write")
    body = _decision("chunked", 1200)
    pieces = [body[:600], body[600:]]

    async def chunked() -> dict[str, Any]:
        piece = pieces.pop(0)
        return {"type": "http.request", "body": piece, "more_body": bool(pieces)}

    answer = anyio.run(
        lambda: _post(
            app, key, DECISIONS.format(project=project), chunked, transfer_encoding="chunked"
        )
    )
    assert answer.status == 429, answer.body
    assert budget.held == {}


def test_a_gzip_body_inflates_only_as_far_as_the_room_left(app, budget, project, monkeypatch):
    """A body of a few dozen bytes that inflates past the tenant's share is refused, its
    inflation stopped where the share ends (not after it has taken the route's limit); one
    within the share is served."""
    key = create_key(app, "t-gzip", "write")
    inflated_within: list[int] = []

    def recorded(raw: bytes, limit: int) -> bytes:
        inflated_within.append(limit)
        return decompress_body(raw, limit)

    monkeypatch.setattr(body, "decompress_body", recorded)
    compressed = gzip.compress(_decision("inflated", 1200))
    assert len(compressed) < 200
    client = client_for(app, key)
    answer = client.post(
        DECISIONS.format(project=project),
        content=compressed,
        headers={"content-type": "application/json", "content-encoding": "gzip"},
    )
    assert "this tenant's" in assert_problem(answer, 429)["detail"]
    assert inflated_within == [1000]  # the share, not the route's limit of 4 MiB
    small = gzip.compress(_decision("small", 400))
    served = client.post(
        DECISIONS.format(project=project),
        content=small,
        headers={"content-type": "application/json", "content-encoding": "gzip"},
    )
    assert served.status_code == 201, served.text
    assert budget.held == {}


@pytest.fixture
def larger_budget(budget, monkeypatch):
    """Room for a save and a tar of one record (tarfile pads a tar to 10,240 bytes)."""
    monkeypatch.setattr(budget, "per_tenant", 15_000)
    monkeypatch.setattr(budget, "per_server", 20_000)
    return budget


def _padded_save(padding: int) -> bytes:
    document = seed_save()
    document["x_padding"] = "y" * padding
    return python_indent2(document)


def test_a_gzip_save_file_inflates_only_as_far_as_the_room_left(
    app, larger_budget, project, monkeypatch
):
    """A ``.json.gz`` save sent as ``application/gzip`` (its route inflates it) is held in the
    tenant's share as a gzip-encoded body is: one that inflates past the share is refused,
    its inflation stopped where the share ends (not at the bulk limit); a save within the
    share is stored, and nothing stays held."""
    key = create_key(app, "t-gzip-save", "read", "write")
    inflated_within: list[int] = []

    def recorded(raw: bytes, limit: int) -> bytes:
        inflated_within.append(limit)
        return decompress_body(raw, limit)

    monkeypatch.setattr(body, "decompress_body", recorded)
    client = client_for(app, key)
    path = f"/v1/projects/{project}/saves"
    gz = {"content-type": "application/gzip"}
    large = gzip.compress(_padded_save(40_000), mtime=0)
    assert len(large) < 2000
    refused = client.post(path, content=large, headers=gz)
    assert "this tenant's" in assert_problem(refused, 429)["detail"]
    assert inflated_within == [15_000]  # the share, not the bulk limit
    assert client.get(f"/v1/projects/{project}").status_code == 404
    stored = client.post(path, content=gzip.compress(_padded_save(100), mtime=0), headers=gz)
    assert stored.status_code == 201, stored.text
    assert larger_budget.held == {}


@pytest.mark.parametrize("inflating", ["tar", "save"])
def test_a_gzip_archive_inflates_only_as_far_as_the_room_left(
    app, larger_budget, project, inflating
):
    """An archive's ``.tar.gz``, and each ``.json.gz`` save in it, are held in the tenant's
    share as they inflate: either inflating past it refuses the import (a 429) and imports
    nothing, however small the body sent."""
    key = create_key(app, f"t-gzip-{inflating}", "read", "write")
    if inflating == "tar":
        members = {"notes/zeros.txt": b"\0" * 30_000}
    else:
        saved = gzip.compress(_padded_save(40_000), mtime=0)
        members = {"mdan/mdan-save-1705314225.json.gz": saved}
    archive = tar_gz(members)
    assert len(archive) < 2000
    client = client_for(app, key)
    refused = client.post(
        f"/v1/projects/{project}/archive",
        content=archive,
        headers={"content-type": "application/gzip"},
    )
    assert "this tenant's" in assert_problem(refused, 429)["detail"]
    assert client.get(f"/v1/projects/{project}").status_code == 404
    assert larger_budget.held == {}


def test_failed_requests_give_their_share_back(app, budget, project, monkeypatch):
    """A body held in part, then refused: over the route's limit (413, chunked: refused as it
    arrives), not a decision (422), not gzip at all (400); each gives back what it held."""
    key = create_key(app, "t-failing", "write")
    path = DECISIONS.format(project=project)
    monkeypatch.setattr(app.state.settings, "max_body_bytes", 900)
    pieces = [b"x" * 500, b"x" * 500]

    async def over_the_limit() -> dict[str, Any]:
        piece = pieces.pop(0)
        return {"type": "http.request", "body": piece, "more_body": bool(pieces)}

    client = client_for(app, key)
    too_large = anyio.run(
        lambda: _post(app, key, path, over_the_limit, transfer_encoding="chunked")
    )
    assert too_large.status == 413, too_large.body
    assert budget.held == {}
    not_a_decision = client.post(path, content=b"[" + b"1," * 300 + b"1]", headers=JSON)
    assert_problem(not_a_decision, 422)
    assert budget.held == {}
    not_gzip = client.post(path, content=b"x" * 600, headers=JSON | {"content-encoding": "gzip"})
    assert_problem(not_gzip, 400)
    assert budget.held == {}


def test_an_mcp_request_holds_its_body_in_the_same_share(app, budget):
    """/mcp's body is read by the service as every route's is: with the tenant's share held by
    its other bodies, an MCP call is the same 429 problem; given back, the call is answered."""
    key = create_key(app, "t-mcp", "read", "write")
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {**MCP_HEADERS, "authorization": f"Bearer {key}"}
    client = TestClient(app, base_url=MCP_BASE_URL)
    budget.hold("t-mcp", 990)  # what the tenant's other bodies hold meanwhile
    try:
        refused = client.post("/mcp", json=call, headers=headers)
    finally:
        budget.give_back("t-mcp", 990)
    assert_problem(refused, 429)
    answered = client.post("/mcp", json=call, headers=headers)
    assert answered.status_code == 200, answered.text
    assert answered.json()["result"]["tools"]
    assert budget.held == {}
