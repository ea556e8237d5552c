"""Tenants are isolated on every route and every MCP tool, and a read-only key changes nothing
anywhere.

The routes come from the app's routing table (tests/platform/world.py), so a new route is
covered as soon as it exists, and a new write route fails here until it has a sample request;
the tools come from /mcp's own list, and a new tool fails here until it has a sample call.
"""

import secrets

import pytest

from app.core.security import Scope
from tests.conftest import client_for, create_key
from tests.helpers import assert_problem
from tests.mcp_client import call_tool, error_text, key_of, list_tools
from tests.platform.world import (
    WRITES,
    api_routes,
    is_write,
    populate,
    readable_state,
    send,
    tool_calls,
)


@pytest.fixture
def world(client, project):
    return populate(client, project)


def test_every_write_route_has_a_sample_request(app):
    assert {route for route in api_routes(app) if is_write(route)} == set(WRITES)


def _stranger(app):
    """A tenant of its own for each request: nothing one request did can explain the next."""
    return client_for(app, create_key(app, "t-" + secrets.token_hex(6)))


def test_another_tenant_gets_404_everywhere_and_changes_nothing(app, client, world):
    routes = api_routes(app)
    before = readable_state(client, world, routes)
    for route in routes:
        stranger = _stranger(app)
        response = send(stranger, world, route)
        if "{" not in route[1]:  # the caller's own lists and keys
            assert response.status_code in (200, 201), (route, response.text)
            assert world.project not in response.text and world.key_id not in response.text
        elif response.status_code == 404:
            assert_problem(response, 404)
        else:
            # A write that creates: projects are per tenant, so it made the stranger's own.
            assert is_write(route) and response.status_code in (200, 201), (route, response.text)
            listed = stranger.get("/v1/projects").json()["items"]
            assert [project["name"] for project in listed] == [world.project], route
    assert readable_state(client, world, routes) == before


def test_a_read_only_key_gets_403_on_every_write_and_changes_nothing(app, client, tenant, world):
    routes = api_routes(app)
    reader = client_for(app, create_key(app, tenant, Scope.read))
    before = readable_state(client, world, routes)
    for route in filter(is_write, routes):
        assert_problem(send(reader, world, route), 403)
    assert readable_state(client, world, routes) == before


def test_a_read_only_key_reads_everything(app, client, tenant, world):
    routes = api_routes(app)
    reader = client_for(app, create_key(app, tenant, Scope.read))
    # The admin routes need the admin scope, which a read-only key lacks.
    readable = {
        route
        for route in routes
        if not is_write(route) and not route[1].startswith("/v1/admin/keys")
    }
    assert readable_state(reader, world, sorted(readable)) == readable_state(
        client, world, sorted(readable)
    )


def _writes_tool(app, key) -> dict[str, bool]:
    """Each tool, and whether it writes (its annotations say so, as the server declares it)."""
    return {
        tool.name: not (tool.annotations and tool.annotations.read_only_hint)
        for tool in list_tools(app, key)
    }


def test_every_tool_has_a_sample_call(app, client, world):
    assert set(_writes_tool(app, key_of(client))) == set(tool_calls(world))


def test_another_tenant_gets_not_found_from_every_tool_and_changes_nothing(app, client, world):
    routes = api_routes(app)
    writes = _writes_tool(app, key_of(client))
    before = readable_state(client, world, routes)
    for name, arguments in tool_calls(world).items():
        stranger = create_key(app, "t-" + secrets.token_hex(6))
        result = call_tool(app, stranger, name, arguments)
        text = str(result.content)
        if name == "list_projects":  # the caller's own list
            assert not result.is_error and world.project not in text
        elif result.is_error:
            assert error_text(result).startswith(f"Error executing tool {name}: 404 Not Found")
            assert "world-marker" not in text
        else:
            # A write that creates: projects are per tenant, so it made the stranger's own.
            assert writes[name], (name, text)
            listed = client_for(app, stranger).get("/v1/projects").json()["items"]
            assert [project["name"] for project in listed] == [world.project], name
    assert readable_state(client, world, routes) == before


def test_a_read_only_key_is_refused_every_writing_tool_and_changes_nothing(
    app, client, tenant, world
):
    routes = api_routes(app)
    reader = create_key(app, tenant, Scope.read)
    writes = _writes_tool(app, reader)
    before = readable_state(client, world, routes)
    for name, arguments in tool_calls(world).items():
        result = call_tool(app, reader, name, arguments)
        if writes[name]:
            assert "403 Forbidden" in error_text(result), name
        else:
            assert not result.is_error, (name, result.content)
    assert readable_state(client, world, routes) == before
