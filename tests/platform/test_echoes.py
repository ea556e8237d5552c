"""A value a client sent is never quoted back at its own size: what a request quotes in its
answer is walked for secrets, and a hostile client's single request of megabytes, quoted
whole, held the event loop, and every tenant's requests, for seconds (2026-11-27): a save's
50 MB "version" in its 422 9.5-13.1 s, a 30 MB URI in /mcp's error 6.7-8.8 s. And an answer
of a stored document, already redacted when it was stored, is not walked again on the loop."""

import asyncio
import json

import pytest

from app.core import redaction
from app.mcp_server import server as mcp_server
from app.storage import route
from tests.helpers import assert_problem, golden_bytes, import_save, python_indent2, seed_save
from tests.mcp.test_hostile import _post

LONG = 1_000_000
# What an answer that quotes none of it may hold: its message, its pointers, its headers.
SHORT_ANSWER = 4096


def _described(answer_text: str) -> None:
    assert len(answer_text) < SHORT_ANSWER, answer_text[:300]
    assert f"{LONG // 1000:,}," in answer_text and "characters" in answer_text, answer_text


def test_a_save_of_a_megabyte_version_is_described_not_quoted(client, project):
    document = seed_save()
    document["version"] = "v" * LONG
    answer = client.post(
        f"/v1/projects/{project}/saves",
        content=python_indent2(document),
        headers={"content-type": "application/json"},
    )
    assert_problem(answer, 422)
    _described(answer.text)


def test_a_snapshot_of_a_megabyte_schema_version_is_described_not_quoted(client, project):
    document = json.loads(golden_bytes("autobyteus/working_context_snapshot.json"))
    document["schema_version"] = "9" * LONG
    answer = client.put(
        f"/v1/projects/{project}/agents/{document['agent_id']}/working-context-snapshot",
        content=json.dumps(document),
        headers={"content-type": "application/json"},
    )
    assert_problem(answer, 422)
    _described(answer.text)


def test_an_atari_state_with_a_megabyte_key_twice_is_described_not_quoted(client, project):
    key = "k" * LONG
    body = golden_bytes("atari-state-v2.json").rstrip()
    assert body.endswith(b"}")
    body = body[:-1] + f', "{key}": 1, "{key}": 2}}'.encode()
    answer = client.put(
        f"/v1/projects/{project}/runs/r1/state",
        content=body,
        headers={"content-type": "application/json"},
    )
    assert_problem(answer, 422)
    _described(answer.text)


def test_a_large_write_answer_is_walked_for_secrets_off_the_event_loop(
    client, project, monkeypatch
):
    """A resume answers its whole save: walked in a worker thread when over a small write's
    size, on the loop (no thread hop) when small, as most answers are."""
    on_the_loop: dict[int, bool] = {}

    def recorded(response):
        try:
            asyncio.get_running_loop()
            on_the_loop[len(response.body)] = True
        except RuntimeError:
            on_the_loop[len(response.body)] = False
        return redaction.answer_without_secrets(response)

    monkeypatch.setattr(route, "answer_without_secrets", recorded)
    document = seed_save()
    document["x_padding"] = ["a line\nof text"] * 10_000
    save_id = import_save(client, project, python_indent2(document)).json()["id"]
    resumed = client.post(f"/v1/projects/{project}/saves/{save_id}/resume", json={})
    assert resumed.status_code == 200, resumed.text
    large = {size: loop for size, loop in on_the_loop.items() if size > route.SMALL_WRITE_BYTES}
    small = {size: loop for size, loop in on_the_loop.items() if size <= route.SMALL_WRITE_BYTES}
    assert large and not any(large.values()), on_the_loop
    assert small and all(small.values()), on_the_loop


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("x" * LONG, {}),
        ("resources/read", {"uri": "context-store://" + "x" * LONG}),
    ],
    ids=["method", "uri"],
)
def test_an_mcp_error_describes_a_long_name_it_would_echo(app, client, method, params):
    from tests.mcp_client import key_of

    answer = _post(app, key_of(client), method, params)
    assert "error" in answer, str(answer)[:300]
    _described(json.dumps(answer))


def test_the_resume_prompt_walks_only_its_arguments_and_cuts_long_notes(
    app, client, project, monkeypatch
):
    """The prompt's parts from the store were redacted when stored; only the line that quotes
    the arguments is walked. A handover's message of megabytes is cut, with where to read it."""
    from tests.mcp_client import key_of

    walked: list[int] = []

    def recorded(value):
        walked.append(len(value))
        return redaction_value(value)

    redaction_value = mcp_server.redact_value
    monkeypatch.setattr(mcp_server, "redact_value", recorded)
    created = client.post(f"/v1/projects/{project}/features", json={"feature_id": "f1"})
    assert created.status_code == 201, created.text
    message = "m" * 100_000
    note = {"from_agent": "dev", "to_agent": "qa", "task_completed": "t1", "message": message}
    handed = client.post(f"/v1/projects/{project}/features/f1/handovers", json=note)
    assert handed.status_code == 201, handed.text
    answer = _post(
        app,
        key_of(client),
        "prompts/get",
        {"name": "resume_where_i_left_off", "arguments": {"project": project, "agent": "qa"}},
    )
    text = answer["result"]["messages"][0]["content"]["text"]
    assert message not in text
    assert "m" * mcp_server.PROMPT_NOTE_CHARACTERS in text
    assert f"{len(message) - mcp_server.PROMPT_NOTE_CHARACTERS:,} characters more" in text
    assert walked and max(walked) < 200, walked
