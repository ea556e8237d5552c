"""``context-store mcp``: the same server over standard input and output, for an agent on this
machine; its tools send their requests to a server's URL with one key."""

import anyio

from app.client import AsyncContextStoreClient
from app.mcp_server.server import build_server


def serve_stdio(url: str, key: str | None) -> None:
    async def run() -> None:
        async with AsyncContextStoreClient(url, key) as store:
            await build_server(store).run_stdio_async()

    anyio.run(run)
