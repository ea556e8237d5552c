"""The client, and every domain's schemas, load without the server's frameworks: a program that
only talks to the service does not pay for FastAPI, SQLAlchemy and the ORM models (issue 18)."""

import subprocess
import sys
from pathlib import Path

APP = Path(__file__).parents[2] / "app"
SERVER_ONLY = {"alembic", "fastapi", "sqlalchemy", "sqlmodel", "starlette"}
# The MCP SDK (0.6 s and 30 MB more at import on this project's machine): for `context-store
# mcp` and /mcp only.
MCP_SDK = {"mcp", "mcp_types", "httpx2"}


def _loaded(modules: list[str]) -> list[str]:
    """The top-level packages a fresh interpreter holds after importing ``modules``."""
    program = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(' '.join(sorted({name.partition('.')[0] for name in sys.modules})))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    ).stdout.split()


def test_the_client_and_the_schemas_load_no_server_framework() -> None:
    client = sorted(f"app.client.{path.stem}" for path in (APP / "client").glob("*.py"))
    schemas = sorted(f"app.{path.parent.name}.schemas" for path in APP.glob("*/schemas.py"))
    assert "app.client.workspace" in client and "app.core.schemas" in schemas
    # A fresh interpreter: this one has the app loaded already.
    loaded = _loaded(client + schemas)
    assert "httpx" in loaded and "pydantic" in loaded
    assert SERVER_ONLY.isdisjoint(loaded), sorted(SERVER_ONLY.intersection(loaded))
    assert MCP_SDK.isdisjoint(loaded), sorted(MCP_SDK.intersection(loaded))


def test_the_stdio_mcp_server_loads_no_server_framework_but_the_sdks():
    """`context-store mcp` talks to a server through the client: neither FastAPI nor the ORM
    (the SDK brings Starlette, for its own HTTP transport)."""
    loaded = _loaded(["app.mcp_server.stdio"])
    assert "mcp" in loaded
    assert {"alembic", "fastapi", "sqlalchemy", "sqlmodel"}.isdisjoint(loaded)
