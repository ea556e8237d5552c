"""The client, and every domain's schemas, load without the server's frameworks: a program that
only talks to the service does not pay for FastAPI, SQLAlchemy and the ORM models (issue 18)."""

import subprocess
import sys
from pathlib import Path

APP = Path(__file__).parents[2] / "app"
SERVER_ONLY = {"alembic", "fastapi", "sqlalchemy", "sqlmodel", "starlette"}


def test_the_client_and_the_schemas_load_no_server_framework() -> None:
    client = sorted(f"app.client.{path.stem}" for path in (APP / "client").glob("*.py"))
    schemas = sorted(f"app.{path.parent.name}.schemas" for path in APP.glob("*/schemas.py"))
    assert "app.client.workspace" in client and "app.core.schemas" in schemas
    # A fresh interpreter: this one has the app loaded already.
    program = (
        "import importlib, sys\n"
        f"for name in {client + schemas!r}:\n"
        "    importlib.import_module(name)\n"
        "print(' '.join(sorted({name.partition('.')[0] for name in sys.modules})))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "httpx" in loaded and "pydantic" in loaded
    assert SERVER_ONLY.isdisjoint(loaded), sorted(SERVER_ONLY.intersection(loaded))
