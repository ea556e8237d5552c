"""A document over the body limit is downloaded in an export turn (``download``,
app/core/responses.py), taken before its bytes are read and held until its response ends.

A hostile client (2026-11-27) grew an atari run state to 48 MB with `iterations/end` errors,
then had 16 clients request it and never read: 1.2-1.8 GB of the server's memory held until
the send timeout. The requests here are sent to the app directly, so that one download can
stay unsent while the others are answered."""

import json
import re
from typing import Any

import anyio
import pytest
from sqlalchemy import event

from tests.conftest import client_for, create_key
from tests.helpers import (
    AsgiAnswer,
    assert_problem,
    http_scope,
    import_save,
    one_turn_without_wait,
    seed_save,
)
from tests.mcp.test_large_calls import post_mcp
from tests.platform.world import populate

# The body limit the test lowers to, after the documents are written: the large states are
# over it, a fresh one is not.
LIMIT = 2000


async def _get(
    app: Any,
    key: str,
    path: str,
    *,
    started: anyio.Event | None = None,
    held: anyio.Event | None = None,
    **headers: str,
) -> AsgiAnswer:
    """``GET path``; ``started`` set when the response starts; with ``held``, its body is not
    taken until ``held`` is set (a client that does not read)."""
    answer = AsgiAnswer(started, held)
    sent_headers = [
        (b"host", b"testserver"),
        (b"authorization", f"Bearer {key}".encode()),
        (b"accept-encoding", b"identity"),
        *((name.replace("_", "-").encode(), value.encode()) for name, value in headers.items()),
    ]

    async def receive() -> dict[str, Any]:
        await anyio.sleep_forever()
        raise AssertionError  # never reached

    await app(http_scope("GET", path, sent_headers), receive, answer.send)
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
    client = client_for(app, key)
    other = client_for(app, other_key)
    large = _grown_state(client, project, "grown")
    other_large = _grown_state(other, project, "grown")
    small_run = f"/v1/projects/{project}/runs/fresh/iterations"
    assert client.post(small_run, json={"bead_id": "bd-1"}).status_code == 200
    etag = client.get(_state_url(project, "grown")).headers["etag"]

    turns = app.state.archive_exports
    one_turn_without_wait(turns, monkeypatch)
    monkeypatch.setattr(app.state.settings, "max_body_bytes", LIMIT)
    path = _state_url(project, "grown")
    answers: dict[str, AsgiAnswer] = {}
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


def test_an_mcp_call_holds_the_turn_of_a_large_document_until_its_answer_is_sent(
    app, project, monkeypatch
):
    """An MCP tool reads a document through its route in process and holds it whole until the
    MCP answer has been sent: the route's export turn is held as long (it was given back when
    the route's own answer ended, and the MCP answer held the document with no turn)."""
    key = create_key(app, "t-mcp-large", "read", "write")
    client = client_for(app, key)
    large = _grown_state(client, project, "grown")
    turns = app.state.archive_exports
    monkeypatch.setattr(app.state.settings, "max_body_bytes", LIMIT)
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "get_run_state", "arguments": {"project": project, "run": "grown"}},
    }
    held_while_unsent: dict[str, int] = {}

    async def scenario() -> AsgiAnswer:
        started, let_go = anyio.Event(), anyio.Event()
        answers: list[AsgiAnswer] = []

        async def unread() -> None:
            body = json.dumps(call).encode()
            answered = await post_mcp(
                app, key, [body], started=started, held=let_go, content_length=str(len(body))
            )
            answers.append(answered)

        async with anyio.create_task_group() as group:
            group.start_soon(unread)
            await started.wait()  # the tool's route has answered: the MCP answer is sent
            held_while_unsent.update(turns.held)
            let_go.set()
        return answers[0]

    answer = anyio.run(scenario)
    assert held_while_unsent == {"t-mcp-large": 1}
    assert answer.status == 200
    result = json.loads(answer.body)["result"]
    assert json.loads(large) in (
        result.get("structuredContent"),
        json.loads(result["content"][0]["text"]),
    )
    assert turns.total == 0


def test_a_list_file_that_could_be_written_past_the_limit_is_sent_in_an_export_turn(
    app, project, monkeypatch
):
    """A list file is rendered from its items with two-space indents, so that its size is
    known only once it is rendered; its items' stored size bounds it (``items_file``: items of
    nested arrays were written 30 times their stored size and sent without a turn). One whose
    items could be written past the limit takes an export turn: with the tenant's one turn
    held by another download, it is the 429."""
    key = create_key(app, "t-list", "read", "write")
    client = client_for(app, key)
    _grown_state(client, project, "grown")
    decisions = f"/v1/projects/{project}/memory/decisions"
    assert client.post(decisions, json={"decision": "d" * 100}).status_code == 201
    turns = app.state.archive_exports
    one_turn_without_wait(turns, monkeypatch)
    monkeypatch.setattr(app.state.settings, "max_body_bytes", LIMIT)
    listed = f"/v1/projects/{project}/memory/files/key-decisions.json"
    answers: dict[str, AsgiAnswer] = {}

    async def scenario() -> None:
        started, let_go = anyio.Event(), anyio.Event()

        async def unread() -> None:
            path = _state_url(project, "grown")
            answers["state"] = await _get(app, key, path, started=started, held=let_go)

        async with anyio.create_task_group() as group:
            group.start_soon(unread)
            await started.wait()
            answers["refused"] = await _get(app, key, listed)
            let_go.set()
        answers["after"] = await _get(app, key, listed)

    anyio.run(scenario)
    assert answers["refused"].status == 429, answers["refused"].body
    assert (
        answers["after"].status == 200
        and json.loads(answers["after"].body)[0]["decision"] == "d" * 100
    )
    assert turns.total == 0


def test_a_documents_read_loads_none_of_its_rows_other_documents(app, engine, project):
    """A run's row holds its state and its backup: a GET of the one never reads the other
    (a state of a few hundred bytes loaded a backup of 40 MB)."""
    key = create_key(app, "t-columns", "read", "write")
    statements: list[str] = []

    def record(_c, _cursor, statement, *_args) -> None:
        if "run_states" in statement:
            statements.append(statement)

    client = client_for(app, key)
    assert (
        client.post(
            f"/v1/projects/{project}/runs/r1/iterations", json={"bead_id": "bd-1"}
        ).status_code
        == 200
    )
    reader = app.state.database.reader
    event.listen(reader, "before_cursor_execute", record)
    try:
        assert client.get(_state_url(project, "r1")).status_code == 200
        assert client.get(_state_url(project, "r1") + "/backup").status_code == 404
    finally:
        event.remove(reader, "before_cursor_execute", record)
    state_read, backup_read = statements
    assert not re.search(r"run_states\.backup\b", state_read), state_read
    assert not re.search(r"run_states\.content\b", backup_read), backup_read


# Every whole-document download, under the project (``World.url`` fills the names in).
DOWNLOADS = [
    "/saves/{save_id}",
    "/saves/latest",
    "/agents/{agent}/working-context-snapshot",
    "/runs/{run}/state",
    "/runs/{run}/state/backup",
    "/features/{feature}/context",
    "/features/{feature}/workflow",
    "/memory/running-summary",
    "/memory/running-summary?style=snake",
    "/memory/files/running-summary.json",
    "/memory/files/key-decisions.json",
]


@pytest.mark.parametrize("suffix", DOWNLOADS)
def test_every_download_over_the_limit_is_read_and_sent_in_an_export_turn(
    app, client, tenant, project, monkeypatch, suffix
):
    """Each route that sends a whole document goes through ``download``: over the body limit,
    with the tenant's one export turn held, it is the 429; with the turn given back, the same
    bytes and ETag as a small download's."""
    world = populate(client, project)
    path = world.url("/v1/projects/{project}" + suffix)
    identity = {"accept-encoding": "identity"}
    whole = client.get(path, headers=identity)
    assert whole.status_code == 200, whole.text
    turns = app.state.archive_exports
    one_turn_without_wait(turns, monkeypatch)
    monkeypatch.setattr(app.state.settings, "max_body_bytes", 10)
    held = anyio.run(turns.take, tenant)
    try:
        assert_problem(client.get(path, headers=identity), 429)
    finally:
        held.release()
    again = client.get(path, headers=identity)
    assert again.status_code == 200, again.text
    assert again.content == whole.content
    assert again.headers["etag"] == whole.headers["etag"]
    assert turns.total == 0


def test_a_resume_of_a_save_over_the_limit_runs_and_is_sent_in_an_export_turn(
    app, client, tenant, project, monkeypatch
):
    """A resume answers its whole save: over the body limit it waits for one of the tenant's
    export turns before it reads the save (with the one turn held, a 429 that counts no
    resume), and holds it until its answer has been sent; under it, it needs none."""
    save_id = import_save(client, project, seed_save()).json()["id"]
    resume = f"/v1/projects/{project}/saves/{save_id}/resume"
    assert client.post(resume).json()["resume_count"] == 1
    turns = app.state.archive_exports
    one_turn_without_wait(turns, monkeypatch)
    held = anyio.run(turns.take, tenant)
    try:
        assert client.post(resume).json()["resume_count"] == 2  # under the limit: no turn
        monkeypatch.setattr(app.state.settings, "max_body_bytes", 1000)
        assert_problem(client.post(resume), 429)
    finally:
        held.release()
    saved = client.get(f"/v1/projects/{project}/saves/{save_id}").json()
    assert saved["metadata"]["resume_count"] == 2  # the refused resume changed nothing
    resumed = client.post(resume)
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["resume_count"] == 3 and len(resumed.content) > 1000
    assert turns.total == 0
