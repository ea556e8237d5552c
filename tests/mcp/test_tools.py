"""Every MCP tool, called with the SDK's own client over Streamable HTTP, answers what its REST
route answers (on both databases)."""

import pytest
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from tests.mcp.answers import CHECKS, p, rest, trip_the_breaker
from tests.mcp_client import call_tool, key_of, list_tools, session
from tests.platform.world import FEATURE, MARKER, populate, tool_calls


def test_the_tools_are_listed_with_their_schemas(app, client, tenant):
    key = key_of(client)
    tools = {tool.name: tool for tool in list_tools(app, key)}
    assert set(tools) == set(CHECKS)
    for tool in tools.values():
        assert tool.description and tool.input_schema["type"] == "object", tool.name
        assert tool.output_schema is not None, tool.name
        assert tool.annotations is not None and tool.annotations.read_only_hint is not None


def test_every_tool_answers_as_its_route(app, client, project):
    world = populate(client, project)
    key = key_of(client)
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
    key = key_of(client)
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
    items = rest(client, f"/v1/projects/{project}/memory/failures")["items"]
    assert len(items) == (1 if retry else 2)
    assert (first.structured_content == second.structured_content) is retry


def test_the_resume_prompt_assembles_the_pack_the_save_and_the_handovers(app, client, project):
    world = populate(client, project)
    pack = rest(client, f"{p(world)}/memory/context", feature_id=FEATURE)
    latest = rest(client, f"{p(world)}/saves")["items"][0]

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
