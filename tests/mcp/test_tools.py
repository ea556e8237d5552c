"""Every MCP tool, called with the SDK's own client over Streamable HTTP, answers what its REST
route answers (on both databases)."""

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult

from tests.mcp_client import call_tool, key_of, list_tools, session
from tests.platform.world import AGENT, BEAD, FEATURE, MARKER, RUN, World, populate, tool_calls

Check = Callable[[CallToolResult, httpx.Client, World], None]


def _rest(client: httpx.Client, path: str, **params: Any) -> Any:
    response = client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def _same_file(result: CallToolResult, response: httpx.Response) -> None:
    """A file tool: the exact file as text, its JSON and ETag as structured content."""
    assert response.status_code == 200, response.text
    assert result.content[0].text.encode() == response.content  # type: ignore[union-attr]
    assert result.structured_content is not None
    assert result.structured_content["document"] == json.loads(response.content)
    assert result.structured_content["etag"] == response.headers["etag"]


def _p(world: World) -> str:
    return f"/v1/projects/{world.project}"


CHECKS: dict[str, Check] = {
    "list_projects": lambda result, client, world: _equal(result, _rest(client, "/v1/projects")),
    "resume_mdan_save": lambda result, client, world: _equal_at(
        result,
        "resume_count",
        _rest(client, f"{_p(world)}/saves/{world.save_id}")["metadata"]["resume_count"],
    ),
    "save_mdan_save": lambda result, client, world: _equal_at(
        result, "id", _rest(client, f"{_p(world)}/saves")["items"][0]["id"]
    ),
    "latest_mdan_save": lambda result, client, world: _same_file(
        result, client.get(f"{_p(world)}/saves/latest")
    ),
    "list_mdan_saves": lambda result, client, world: _equal(
        result, _rest(client, f"{_p(world)}/saves")
    ),
    "put_working_context_snapshot": lambda result, client, world: _equal_at(
        result,
        "message_count",
        len(_rest(client, f"{_p(world)}/agents/{AGENT}/working-context-snapshot")["messages"]),
    ),
    "get_working_context_snapshot": lambda result, client, world: _same_file(
        result, client.get(f"{_p(world)}/agents/{AGENT}/working-context-snapshot")
    ),
    "append_agent_memory": lambda result, client, world: _equal_at(
        result,
        "appended",
        sum(
            item["id"] == "ep-9"
            for item in _rest(client, f"{_p(world)}/agents/{AGENT}/memory/episodic")["items"]
        ),
    ),
    "restore_agent_context": lambda result, client, world: _equal_at(
        result, "snapshot", _rest(client, f"{_p(world)}/agents/{AGENT}/working-context-snapshot")
    ),
    "start_iteration": lambda result, client, world: _equal_at(
        result, "state", _run(client, world) | {"current_bead": BEAD}
    ),
    "end_iteration": lambda result, client, world: _equal_at(result, "state", _run(client, world)),
    "get_run_state": lambda result, client, world: _same_file(
        result, client.get(f"{_p(world)}/runs/{RUN}/state")
    ),
    "get_feature_context": lambda result, client, world: _same_file(
        result, client.get(f"{_p(world)}/features/{FEATURE}/context")
    ),
    "add_handover": lambda result, client, world: _equal_at(
        result,
        "note",
        _context(client, world)["handover_notes"]["history"][_at(result, "index")],
    ),
    "record_review": lambda result, client, world: _equal_at(
        result, "circuit_breaker", _context(client, world)["circuit_breaker"]
    ),
    "reset_circuit_breaker": lambda result, client, world: _equal_at(
        result, "circuit_breaker", _context(client, world)["circuit_breaker"]
    ),
    "list_handovers": lambda result, client, world: _equal(
        result, _rest(client, f"{_p(world)}/handovers", to_agent="b")
    ),
    "add_memory_item": lambda result, client, world: _equal_at(
        result,
        "item",
        _rest(client, f"{_p(world)}/memory/decisions/{_at(result, 'id')}")["item"],
    ),
    "search_memory": lambda result, client, world: _equal(
        result, _rest(client, f"{_p(world)}/memory/decisions", q=MARKER)
    ),
    "get_running_summary": lambda result, client, world: _same_file(
        result, client.get(f"{_p(world)}/memory/running-summary")
    ),
    "put_running_summary": lambda result, client, world: _equal_at(
        result, "etag", client.get(f"{_p(world)}/memory/running-summary").headers["etag"]
    ),
    "get_context_pack": lambda result, client, world: _pack(
        result, _rest(client, f"{_p(world)}/memory/context", feature_id=FEATURE, max_tokens=500)
    ),
}


def _at(result: CallToolResult, name: str) -> Any:
    assert result.structured_content is not None
    return result.structured_content[name]


def _equal(result: CallToolResult, expected: Any) -> None:
    assert result.structured_content == expected


def _equal_at(result: CallToolResult, name: str, expected: Any) -> None:
    assert _at(result, name) == expected


def _run(client: httpx.Client, world: World) -> Any:
    runs = _rest(client, f"{_p(world)}/runs")["items"]
    return next(run for run in runs if run["run"] == RUN)


def _context(client: httpx.Client, world: World) -> Any:
    return _rest(client, f"{_p(world)}/features/{FEATURE}/context")


def trip_the_breaker(client: httpx.Client, world: World) -> None:
    """Rejections until the phase reaches its limit: a reset refuses anything less (409)."""
    review = {"phase": "design-l1", "outcome": "REJECTED", "rejecting_agents": ["x"]}
    while _context(client, world)["iteration_tracking"]["design-l1"]["status"] != "limit_reached":
        response = client.post(f"{_p(world)}/features/{FEATURE}/reviews", json=review)
        assert response.status_code == 201, response.text


def _pack(result: CallToolResult, expected: Any) -> None:
    _equal(result, expected)
    assert result.content[0].text == expected["markdown"]  # type: ignore[union-attr]


def test_the_tools_are_listed_with_their_schemas(app, client, tenant):
    key = client.headers["Authorization"].removeprefix("Bearer ")
    tools = {tool.name: tool for tool in list_tools(app, key)}
    assert set(tools) == set(CHECKS)
    for tool in tools.values():
        assert tool.description and tool.input_schema["type"] == "object", tool.name
        assert tool.output_schema is not None, tool.name
        assert tool.annotations is not None and tool.annotations.read_only_hint is not None


def test_every_tool_answers_as_its_route(app, client, project):
    world = populate(client, project)
    key = client.headers["Authorization"].removeprefix("Bearer ")
    calls = tool_calls(world)
    assert list(calls) == list(CHECKS)
    for name, arguments in calls.items():
        if name == "reset_circuit_breaker":
            trip_the_breaker(client, world)
        result = call_tool(app, key, name, arguments)
        assert not result.is_error, (name, result.content)
        CHECKS[name](result, client, world)


@pytest.mark.parametrize("retry", [False, True])
def test_a_writing_tool_with_an_idempotency_key_writes_once(app, client, project, retry):
    key = client.headers["Authorization"].removeprefix("Bearer ")
    arguments = {
        "project": project,
        "kind": "failures",
        "item": {"description": MARKER, "severity": "high"},
        "idempotency_key": "retry-1",
    }
    first = call_tool(app, key, "add_memory_item", arguments)
    second = call_tool(
        app,
        key,
        "add_memory_item",
        arguments if retry else arguments | {"idempotency_key": "other"},
    )
    assert not first.is_error and not second.is_error
    items = _rest(client, f"/v1/projects/{project}/memory/failures")["items"]
    assert len(items) == (1 if retry else 2)
    assert (first.structured_content == second.structured_content) is retry


def test_the_resume_prompt_assembles_the_pack_the_save_and_the_handovers(app, client, project):
    world = populate(client, project)
    pack = _rest(client, f"{_p(world)}/memory/context", feature_id=FEATURE)
    latest = _rest(client, f"{_p(world)}/saves")["items"][0]

    async def resume(mcp: ClientSession) -> str:
        arguments = {"project": project, "agent": "b", "feature": FEATURE}
        (message,) = (await mcp.get_prompt("resume_where_i_left_off", arguments)).messages
        return message.content.text  # type: ignore[union-attr]

    text = session(app, key_of(client), resume)
    assert pack["markdown"] in text
    assert latest["filename"] in text and MARKER in text  # the save, and the note to agent b

    async def refused(mcp: ClientSession) -> str:
        try:
            await mcp.get_prompt("resume_where_i_left_off", {"project": "no", "agent": "b"})
        except MCPError as error:
            return error.error.message
        raise AssertionError("a prompt for a project the tenant does not have")

    assert session(app, key_of(client), refused) == "404 Not Found: No project 'no'."
