"""A document over the body limit is downloaded in an export turn (``download``,
app/core/responses.py), taken before its bytes are read and held until its response ends.

A hostile client (2026-11-27) grew an atari run state to 48 MB with `iterations/end` errors,
then had 16 clients request it and never read: 1.2-1.8 GB of the server's memory held until
the send timeout. The requests here are sent to the app directly, so that one download can
stay unsent while the others are answered."""

import json
from typing import Any

import anyio

from tests.conftest import client_for, create_key
from tests.helpers import http_scope, one_turn_without_wait

# The body limit the test lowers to, after the documents are written: the large states are
# over it, a fresh one is not.
LIMIT = 2000


class Answer:
    def __init__(self) -> None:
        self.status = 0
        self.headers: dict[str, str] = {}
        self.body = b""


async def _get(
    app: Any,
    key: str,
    path: str,
    *,
    started: anyio.Event | None = None,
    held: anyio.Event | None = None,
    **headers: str,
) -> Answer:
    """``GET path``; ``started`` set when the response starts; with ``held``, its body is not
    taken until ``held`` is set (a client that does not read)."""
    answer = Answer()
    sent_headers = [
        (b"host", b"testserver"),
        (b"authorization", f"Bearer {key}".encode()),
        (b"accept-encoding", b"identity"),
        *((name.replace("_", "-").encode(), value.encode()) for name, value in headers.items()),
    ]

    async def receive() -> dict[str, Any]:
        await anyio.sleep_forever()
        raise AssertionError  # never reached

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = {k.decode(): v.decode() for k, v in message["headers"]}
            if started is not None:
                started.set()
        elif message["type"] == "http.response.body":
            if held is not None:
                await held.wait()
            answer.body += message.get("body", b"")

    await app(http_scope("GET", path, sent_headers), receive, send)
    return answer


def _state_url(project: str, run: str) -> str:
    return f"/v1/projects/{project}/runs/{run}/state"


def _grown_state(client, project: str, run: str) -> bytes:
    """A run whose state an `iterations/end` error grew past ``LIMIT``; its bytes."""
    base = f"/v1/projects/{project}/runs/{run}/iterations"
    assert client.post(base, json={"bead_id": "bd-1"}).status_code == 200
    ended = client.post(
        base + "/end",
        json={"bead_id": "bd-1", "outcome": "failed", "error": "e" * 3 * LIMIT},
    )
    assert ended.status_code == 200, ended.text
    state = client.get(_state_url(project, run))
    assert len(state.content) > LIMIT
    return state.content


def test_a_large_download_holds_an_export_turn_until_it_is_sent(app, project, monkeypatch):
    """One export turn a tenant, no wait: a large state held unsent; the same tenant's next
    large download is a 429 (problem+json, Retry-After), its 304 and its small download are
    served, another tenant's large download is served; once the first is sent, the turn is
    given back and the tenant's next large download is served."""
    key, other_key = create_key(app, "t-large", "read", "write"), create_key(app, "t-other")
    with client_for(app, key) as client, client_for(app, other_key) as other:
        large = _grown_state(client, project, "grown")
        other_large = _grown_state(other, project, "grown")
        small_run = f"/v1/projects/{project}/runs/fresh/iterations"
        assert client.post(small_run, json={"bead_id": "bd-1"}).status_code == 200
        etag = client.get(_state_url(project, "grown")).headers["etag"]

        turns = app.state.archive_exports
        one_turn_without_wait(turns, monkeypatch)
        monkeypatch.setattr(app.state.settings, "max_body_bytes", LIMIT)
        path = _state_url(project, "grown")
        answers: dict[str, Answer] = {}
        held_meanwhile: dict[str, int] = {}

        async def scenario() -> None:
            started, let_go = anyio.Event(), anyio.Event()

            async def unread() -> None:
                answers["unread"] = await _get(app, key, path, started=started, held=let_go)

            async with anyio.create_task_group() as group:
                group.start_soon(unread)
                await started.wait()
                answers["refused"] = await _get(app, key, path)
                answers["unchanged"] = await _get(app, key, path, if_none_match=etag)
                answers["small"] = await _get(app, key, _state_url(project, "fresh"))
                answers["other"] = await _get(app, other_key, path)
                held_meanwhile.update(turns.held)
                let_go.set()
            assert turns.total == 0
            answers["after"] = await _get(app, key, path)

        anyio.run(scenario)

    assert held_meanwhile == {"t-large": 1}
    refused = answers["refused"]
    assert refused.status == 429, refused.body
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.headers["retry-after"] == "5"
    assert json.loads(refused.body)["detail"].startswith("This tenant's exports")
    assert answers["unchanged"].status == 304
    assert answers["small"].status == 200 and len(answers["small"].body) < LIMIT
    assert answers["other"].status == 200 and answers["other"].body == other_large
    assert answers["unread"].status == 200 and answers["unread"].body == large
    assert answers["after"].status == 200 and answers["after"].body == large
    assert turns.total == 0
