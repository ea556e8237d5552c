"""What each MCP tool must answer: the REST route's own answer, read back over HTTP (shared by
the in-process and the stdio tests)."""

import json
from collections.abc import Callable
from typing import Any

import httpx
from mcp_types import CallToolResult

from tests.platform.world import AGENT, BEAD, FEATURE, MARKER, RUN, World

Check = Callable[[CallToolResult, httpx.Client, World], None]


def rest(client: httpx.Client, path: str, **params: Any) -> Any:
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


def p(world: World) -> str:
    return f"/v1/projects/{world.project}"


CHECKS: dict[str, Check] = {
    "list_projects": lambda result, client, world: _equal(result, rest(client, "/v1/projects")),
    "resume_mdan_save": lambda result, client, world: _equal_at(
        result,
        "resume_count",
        rest(client, f"{p(world)}/saves/{world.save_id}")["metadata"]["resume_count"],
    ),
    "save_mdan_save": lambda result, client, world: _equal_at(
        result, "id", rest(client, f"{p(world)}/saves")["items"][0]["id"]
    ),
    "latest_mdan_save": lambda result, client, world: _same_file(
        result, client.get(f"{p(world)}/saves/latest")
    ),
    "list_mdan_saves": lambda result, client, world: _equal(
        result, rest(client, f"{p(world)}/saves")
    ),
    "put_working_context_snapshot": lambda result, client, world: _equal_at(
        result,
        "message_count",
        len(rest(client, f"{p(world)}/agents/{AGENT}/working-context-snapshot")["messages"]),
    ),
    "get_working_context_snapshot": lambda result, client, world: _same_file(
        result, client.get(f"{p(world)}/agents/{AGENT}/working-context-snapshot")
    ),
    "append_agent_memory": lambda result, client, world: _equal_at(
        result,
        "appended",
        sum(
            item["id"] == "ep-9"
            for item in rest(client, f"{p(world)}/agents/{AGENT}/memory/episodic")["items"]
        ),
    ),
    "restore_agent_context": lambda result, client, world: _equal_at(
        result, "snapshot", rest(client, f"{p(world)}/agents/{AGENT}/working-context-snapshot")
    ),
    "start_iteration": lambda result, client, world: _equal_at(
        result, "state", _run(client, world) | {"current_bead": BEAD}
    ),
    "end_iteration": lambda result, client, world: _equal_at(result, "state", _run(client, world)),
    "get_run_state": lambda result, client, world: _same_file(
        result, client.get(f"{p(world)}/runs/{RUN}/state")
    ),
    "get_feature_context": lambda result, client, world: _same_file(
        result, client.get(f"{p(world)}/features/{FEATURE}/context")
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
        result, rest(client, f"{p(world)}/handovers", to_agent="b")
    ),
    "add_memory_item": lambda result, client, world: _equal_at(
        result,
        "item",
        rest(client, f"{p(world)}/memory/decisions/{_at(result, 'id')}")["item"],
    ),
    "search_memory": lambda result, client, world: _equal(
        result, rest(client, f"{p(world)}/memory/decisions", q=MARKER)
    ),
    "get_running_summary": lambda result, client, world: _same_file(
        result, client.get(f"{p(world)}/memory/running-summary")
    ),
    "put_running_summary": lambda result, client, world: _equal_at(
        result, "etag", client.get(f"{p(world)}/memory/running-summary").headers["etag"]
    ),
    "get_context_pack": lambda result, client, world: _pack(
        result, rest(client, f"{p(world)}/memory/context", feature_id=FEATURE, max_tokens=500)
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
    runs = rest(client, f"{p(world)}/runs")["items"]
    return next(run for run in runs if run["run"] == RUN)


def _context(client: httpx.Client, world: World) -> Any:
    return rest(client, f"{p(world)}/features/{FEATURE}/context")


def trip_the_breaker(client: httpx.Client, world: World) -> None:
    """Rejections until the phase reaches its limit: a reset refuses anything less (409)."""
    review = {"phase": "design-l1", "outcome": "REJECTED", "rejecting_agents": ["x"]}
    while _context(client, world)["iteration_tracking"]["design-l1"]["status"] != "limit_reached":
        response = client.post(f"{p(world)}/features/{FEATURE}/reviews", json=review)
        assert response.status_code == 201, response.text


def _pack(result: CallToolResult, expected: Any) -> None:
    _equal(result, expected)
    assert result.content[0].text == expected["markdown"]  # type: ignore[union-attr]
