"""A /mcp body over the body limit (``MAX_BODY_BYTES``) is parsed by the MCP SDK in one of its
tenant's bulk-import turns, as a REST import is, held until the MCP answer has been sent; the
tool's own import route takes no second one (app/mcp_server/http.py).

A hostile client (2026-11-27) sent `tools/call list_projects` with 60 MB of `[0,0,...]` as its
arguments, four at once, within the bulk limit that /mcp takes for every tool: the server grew
to 2 GB and another tenant's requests waited seconds, with no bound on how many ran at once.
The requests here are sent to the app directly, so that a body can arrive in pieces and an
answer stay unsent while the turns are looked at."""

import gzip
import json
from typing import Any

import anyio
import pytest

from app.core.limits import Turns
from tests.conftest import client_for, create_key
from tests.helpers import AsgiAnswer, http_scope, one_turn_without_wait, seed_save

# The body limit the tests lower to: a call over it is large.
LIMIT = 4096


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def _list_projects(size: int) -> bytes:
    """`tools/call list_projects` of exactly ``size`` bytes, padded by an argument the tool
    does not take (the hostile client's was 60 MB of zeros)."""
    empty = _compact(_call("list_projects", {"junk": ""}))
    padded = _compact(_call("list_projects", {"junk": "0" * (size - len(empty))}))
    assert len(padded) == size
    return padded


def _compact(document: Any) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


async def post_mcp(
    app: Any,
    key: str,
    pieces: list[bytes],
    *,
    started: anyio.Event | None = None,
    held: anyio.Event | None = None,
    **headers: str,
) -> AsgiAnswer:
    """POST /mcp, its body arriving in ``pieces``; ``started`` set when the answer starts, whose
    body, with ``held``, is not taken until ``held`` is set (a client that does not read)."""
    answer = AsgiAnswer(started, held)
    sent_headers = [
        (b"host", b"127.0.0.1:8000"),
        (b"authorization", f"Bearer {key}".encode()),
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"mcp-protocol-version", b"2025-06-18"),
        *((name.replace("_", "-").encode(), value.encode()) for name, value in headers.items()),
    ]
    arriving = list(pieces)

    async def receive() -> dict[str, Any]:
        if arriving:
            piece = arriving.pop(0)
            return {"type": "http.request", "body": piece, "more_body": bool(arriving)}
        await anyio.sleep_forever()
        raise AssertionError  # never reached

    await app(http_scope("POST", "/mcp", sent_headers), receive, answer.send)
    return answer


def _whole(app: Any, key: str, body: bytes) -> AsgiAnswer:
    return anyio.run(lambda: post_mcp(app, key, [body], content_length=str(len(body))))


def _answered(answer: AsgiAnswer) -> dict[str, Any]:
    """The JSON-RPC result of a call its tool answered."""
    assert answer.status == 200, answer.body
    result: dict[str, Any] = answer.json()["result"]
    assert not result.get("isError"), result
    return result


def _refused_for_the_tenants_turns(answer: AsgiAnswer) -> None:
    assert answer.status == 429, answer.body
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.headers["retry-after"] == "5"
    assert answer.json()["detail"].startswith("This tenant's imports under the bulk limit")


@pytest.fixture
def turns(app, monkeypatch) -> Turns:
    """The app's bulk-import turns, one a tenant and no wait, with the body limit at LIMIT."""
    bulk_imports: Turns = app.state.bulk_imports
    one_turn_without_wait(bulk_imports, monkeypatch)
    monkeypatch.setattr(app.state.settings, "max_body_bytes", LIMIT)
    return bulk_imports


def _as_sent(body: bytes, way: str) -> tuple[list[bytes], dict[str, str]]:
    """The body's pieces and headers: with its length, chunked (no length: what arrives), or
    gzip (its size on the wire within the limit: what it inflates to)."""
    if way == "length":
        return [body], {"content_length": str(len(body))}
    if way == "chunked":
        middle = len(body) // 2
        return [body[:middle], body[middle:]], {"transfer_encoding": "chunked"}
    compressed = gzip.compress(body)
    assert len(compressed) < LIMIT
    return [compressed], {"content_length": str(len(compressed)), "content_encoding": "gzip"}


@pytest.mark.parametrize("way", ["length", "chunked", "gzip"])
def test_a_large_call_is_parsed_only_in_one_of_its_tenants_bulk_import_turns(app, turns, way):
    """With the tenant's one turn held (by an import of its own), its large call is the 429 a
    REST import gets, however its body arrives; another tenant's large call is answered; once
    the turn is given back, the tenant's call is answered, and gives its own turn back."""
    key = create_key(app, "t-mcp-large-call", "read", "write")
    other_key = create_key(app, "t-mcp-other", "read", "write")
    pieces, headers = _as_sent(_list_projects(LIMIT * 4), way)
    held = anyio.run(turns.take, "t-mcp-large-call")
    try:
        refused = anyio.run(lambda: post_mcp(app, key, pieces, **headers))
        other = anyio.run(lambda: post_mcp(app, other_key, pieces, **headers))
        held_meanwhile = dict(turns.held)
    finally:
        held.release()
    _refused_for_the_tenants_turns(refused)
    _answered(other)
    assert held_meanwhile == {"t-mcp-large-call": 1}
    _answered(anyio.run(lambda: post_mcp(app, key, pieces, **headers)))
    assert turns.total == 0


def test_a_call_within_the_body_limit_takes_no_turn(app, turns, monkeypatch):
    """Every bulk-import turn of the server held: a call of exactly the limit is answered (the
    hot path takes no turn), one byte more is the 429."""
    monkeypatch.setattr(turns, "per_server", 1)
    key = create_key(app, "t-mcp-small-call", "read", "write")
    held = anyio.run(turns.take, "t-mcp-small-call")
    try:
        within = _whole(app, key, _list_projects(LIMIT))
        over = _whole(app, key, _list_projects(LIMIT + 1))
        assert turns.held == {"t-mcp-small-call": 1}
    finally:
        held.release()
    _answered(within)
    _refused_for_the_tenants_turns(over)


def _large_save() -> dict[str, Any]:
    save = seed_save()
    save["context"]["notes"] = "n" * LIMIT * 2
    return save


def test_a_large_save_holds_one_turn_its_import_route_shares_until_the_answer_is_sent(
    app, turns, project
):
    """One turn a tenant, no wait: a save over the body limit through `save_mdan_save` takes
    the turn for its call, and its import route (in process, in the same call) uses that turn
    rather than wait for a second, which it would never get; the turn is held until the MCP
    answer has been sent, then given back, and a second such save is stored as well."""
    key = create_key(app, "t-mcp-large-save", "read", "write")
    body = json.dumps(_call("save_mdan_save", {"project": project, "save": _large_save()}))
    held_while_unsent: list[dict[str, int]] = []

    async def saved() -> AsgiAnswer:
        started, let_go = anyio.Event(), anyio.Event()
        answers: list[AsgiAnswer] = []

        async def unread() -> None:
            answers.append(
                await post_mcp(
                    app,
                    key,
                    [body.encode()],
                    started=started,
                    held=let_go,
                    content_length=str(len(body)),
                )
            )

        async with anyio.create_task_group() as group:
            group.start_soon(unread)
            await started.wait()
            held_while_unsent.append(dict(turns.held))
            let_go.set()
        return answers[0]

    first = _answered(anyio.run(saved))
    second = _answered(anyio.run(saved))
    assert held_while_unsent == [{"t-mcp-large-save": 1}] * 2
    assert turns.total == 0
    stored = client_for(app, key).get(f"/v1/projects/{project}/saves").json()["items"]
    ids = {first["structuredContent"]["id"], second["structuredContent"]["id"]}
    assert {item["id"] for item in stored} == ids
