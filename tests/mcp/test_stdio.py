"""`context-store mcp` over stdio, and /mcp of a live `context-store serve`: the SDK's own client,
against real processes, calls every tool and reads every resource as the REST API answers."""

import base64
import gzip
import os
import secrets

import anyio
import httpx
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import TextResourceContents

from tests.helpers import untar
from tests.mcp.answers import CHECKS, trip_the_breaker
from tests.platform.servers import COMMAND, create_key_in, running
from tests.platform.world import populate, tool_calls


@pytest.fixture
def server(database_url, tmp_path):
    with running(database_url, tmp_path / "server.log") as live:
        yield live


def test_context_store_mcp_serves_every_tool_and_file_over_stdio(server, database_url):
    key = create_key_in(database_url, "t-" + secrets.token_hex(6))
    rest = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"})
    world = populate(rest, "proj-" + secrets.token_hex(4))
    # The key from the environment, as the other client commands take it.
    parameters = StdioServerParameters(
        command=str(COMMAND),
        args=["mcp", "--url", server.url],
        env={"PATH": os.environ["PATH"], "CONTEXT_STORE_KEY": key},
    )

    async def run() -> None:
        async with (
            stdio_client(parameters) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            tools = await client.list_tools()
            assert {tool.name for tool in tools.tools} == set(CHECKS)
            for name, arguments in tool_calls(world).items():
                if name == "reset_circuit_breaker":
                    trip_the_breaker(rest, world)
                result = await client.call_tool(name, arguments)
                assert not result.is_error, (name, result.content)
                CHECKS[name](result, rest, world)
            archive = untar(rest.get(f"/v1/projects/{world.project}/archive").content)
            listed = (await client.list_resources()).resources
            assert {str(resource.uri) for resource in listed} == {
                f"context-store://{world.project}/{path.removesuffix('.gz')}" for path in archive
            }
            for path, content in archive.items():
                uri = f"context-store://{world.project}/{path.removesuffix('.gz')}"
                (contents,) = (await client.read_resource(uri)).contents
                got = (
                    contents.text.encode()
                    if isinstance(contents, TextResourceContents)
                    else base64.b64decode(contents.blob)
                )
                assert got == (gzip.decompress(content) if path.endswith(".gz") else content)
            stolen = await client.call_tool(
                "get_run_state", {"project": "someone-elses", "run": "default"}
            )
            assert stolen.is_error and "404" in stolen.content[0].text  # type: ignore[union-attr]

    anyio.run(run)


def test_a_live_server_serves_mcp_over_streamable_http(server, database_url):
    key = create_key_in(database_url, "t-" + secrets.token_hex(6))

    async def run() -> None:
        headers = {"Authorization": f"Bearer {key}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            assert {tool.name for tool in (await client.list_tools()).tools} == set(CHECKS)
            result = await client.call_tool("list_projects", {})
            assert result.structured_content == {"items": [], "next_cursor": None}

    anyio.run(run)


def test_context_store_mcp_says_when_the_server_cannot_be_reached():
    parameters = StdioServerParameters(
        command=str(COMMAND),
        args=["mcp", "--url", "http://127.0.0.1:9", "--key", "cs_whatever"],
        env={"PATH": os.environ["PATH"]},
    )

    async def run() -> str:
        async with (
            stdio_client(parameters) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            result = await client.call_tool("list_projects", {})
            assert result.is_error
            return result.content[0].text  # type: ignore[union-attr]

    assert "could not be reached" in anyio.run(run)
