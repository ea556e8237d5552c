"""Assertions and builders the tests share."""

import json
import os
from pathlib import Path
from typing import Any

import httpx

GOLDEN = Path(__file__).parent / "formats" / "golden"

# How many times over the reliability tests run their generated cases and their load:
# 1 in the suite, more under `make soak`.
SOAK = max(1, int(os.environ.get("CONTEXT_STORE_SOAK", "1")))


def golden_bytes(name: str) -> bytes:
    return (GOLDEN / name).read_bytes()


def seed_save() -> dict[str, Any]:
    """The example save of seed 000, as a document."""
    document: dict[str, Any] = json.loads(golden_bytes("mdan-save-seed-example.json"))
    return document


def python_indent2(document: Any) -> bytes:
    return json.dumps(document, indent=2).encode()


def assert_problem(response: httpx.Response, status: int) -> dict[str, Any]:
    """The response is an RFC 9457 problem with this status, and leaks no internals."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert body["type"].startswith("urn:context-store:problem:")
    assert isinstance(body["title"], str) and body["title"]
    assert isinstance(body["detail"], str) and body["detail"]
    text = response.text
    for leak in ("Traceback", 'File "', "sqlalchemy", "psycopg", "SELECT ", "INSERT "):
        assert leak not in text, f"{leak!r} leaked into a problem: {text}"
    return body


def import_save(client: httpx.Client, project: str, document: Any, **kwargs: Any) -> httpx.Response:
    content = document if isinstance(document, bytes) else python_indent2(document)
    headers = {"Content-Type": "application/json", **kwargs.pop("headers", {})}
    return client.post(f"/v1/projects/{project}/saves", content=content, headers=headers, **kwargs)
