"""The MCP SDK's own client (``ClientSession``) over Streamable HTTP, against the app in process:
what the /mcp tests and the platform tests that cover every route use."""

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import httpx2
from fastapi import FastAPI
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, Tool

T = TypeVar("T")

# A loopback host: what /mcp's DNS-rebinding check answers when the server listens on one.
BASE_URL = "http://127.0.0.1:8000"
URL = f"{BASE_URL}/mcp"


def key_headers(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def session(app: FastAPI, key: str | None, body: Callable[[ClientSession], Awaitable[T]]) -> T:
    """Run ``body`` with a session initialised against /mcp with ``key``."""

    async def run() -> T:
        transport = httpx2.ASGITransport(app=app)
        async with (
            httpx2.AsyncClient(transport=transport, headers=key_headers(key)) as http,
            streamable_http_client(URL, http_client=http) as (read, write),
            ClientSession(read, write) as client,
        ):
            await client.initialize()
            return await body(client)

    return anyio.run(run)


def call_tool(
    app: FastAPI, key: str | None, name: str, arguments: dict[str, Any]
) -> CallToolResult:
    async def call(client: ClientSession) -> CallToolResult:
        return await client.call_tool(name, arguments)

    return session(app, key, call)


def list_tools(app: FastAPI, key: str | None) -> list[Tool]:
    async def tools(client: ClientSession) -> list[Tool]:
        return (await client.list_tools()).tools

    return session(app, key, tools)


def error_text(result: CallToolResult) -> str:
    assert result.is_error, result
    return "\n".join(getattr(block, "text", "") for block in result.content)


def key_of(client: Any) -> str:
    """The key a test client sends (``client_for``'s bearer token)."""
    return str(client.headers["Authorization"]).removeprefix("Bearer ")
