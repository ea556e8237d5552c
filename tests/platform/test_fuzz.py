"""Schemathesis over every operation of the served OpenAPI document, on both databases.

Each operation gets generated requests, valid and invalid (seeded and derandomized, so a run
is repeatable), sent through the ASGI app with a key of every scope. Every response must be
documented (status, content type, body schema, headers), no response may be a 5xx, and every
error must be a problem+json document. The suite sends a dozen examples per operation and
mode; ``make soak`` (``CONTEXT_STORE_SOAK``) many times more.

Not checked: that every request the schema allows is accepted. The schema says what JSON a
route takes, not the formats' own rules (a save's required fields, an opaque cursor handed out
by a list), which the routes enforce with 422s the checks below see as documented.
"""

import gzip
import json
import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from schemathesis.config import SchemathesisConfig
from schemathesis.python import asgi

from app.core.config import AuthMode, Settings
from app.core.errors import PROBLEM_MEDIA_TYPE, PROBLEM_TYPE_PREFIX
from app.core.migrations import upgrade
from app.main import create_app
from tests.conftest import Backend, create_key, make_settings
from tests.helpers import SOAK

EXAMPLES = 12 * SOAK

CONFIG = SchemathesisConfig.from_dict(
    {
        "seed": 20240115,
        "generation": {
            "mode": "all",
            "max-examples": EXAMPLES,
            "deterministic": True,
            "database": "none",
            # The key is the test's own (below); generated Authorization headers would be
            # replaced by it, turning an invalid request into a valid one behind the checks.
            "with-security-parameters": False,
        },
        "checks": {"positive_data_acceptance": {"enabled": False}},
        "operations": [
            {
                # DELETE .../saves/latest reaches DELETE .../saves/{save_id}, whose id is not
                # an integer: a 422 naming path.save_id, where the check expects a 405.
                "include-path": "/v1/projects/{project}/saves/latest",
                "checks": {"unsupported_method": {"enabled": False}},
            }
        ],
    }
)


@schemathesis.check
def problem_details(ctx: object, response: schemathesis.Response, case: schemathesis.Case) -> None:
    """Every error is an RFC 9457 problem whose status is the response's."""
    if response.status_code < 400:
        return
    content_type = response.headers.get("content-type", [""])[0]
    assert content_type.startswith(PROBLEM_MEDIA_TYPE), f"error as {content_type!r}"
    body = response.json()
    assert body["status"] == response.status_code, body
    assert body["type"].startswith(PROBLEM_TYPE_PREFIX), body
    assert body["title"] and body["detail"], body


@schemathesis.serializer("application/gzip")
def gzip_json(ctx: object, value: object) -> bytes:
    """A `.json.gz` save file."""
    return gzip.compress(json.dumps(value).encode())


@schemathesis.serializer("application/x-ndjson")
def ndjson(ctx: object, value: object) -> bytes:
    return (value if isinstance(value, str) else json.dumps(value)).encode()


# The document the service serves, fetched through the app like any client would.
schema = schemathesis.openapi.from_asgi(
    "/openapi.json",
    create_app(Settings(database_url="sqlite://", auth=AuthMode.on)),
    config=CONFIG,
)


@dataclass
class FuzzTarget:
    app: FastAPI
    headers: dict[str, str]
    requests: int = 0


@pytest.fixture(scope="session")
def fuzz_target(backend: Backend) -> Iterator[FuzzTarget]:
    """An app on a database of its own: what the fuzzer stores stays out of other tests."""
    url = backend.new_database_url()
    upgrade(url)
    app = create_app(make_settings(url))
    with TestClient(app):
        key = create_key(app, "fuzz-" + secrets.token_hex(4))
    yield FuzzTarget(app, {"Authorization": f"Bearer {key}"})
    asgi.shutdown_lifespans()  # schemathesis started the app; its engines close before the drop


@pytest.fixture(autouse=True)
def _count_requests(request: pytest.FixtureRequest, fuzz_target: FuzzTarget) -> Iterator[None]:
    before = fuzz_target.requests
    yield
    request.node.user_properties.append(("fuzzed_requests", fuzz_target.requests - before))


@schema.parametrize()
def test_every_operation_answers_as_documented(case, fuzz_target):
    fuzz_target.requests += 1
    case.call_and_validate(app=fuzz_target.app, headers=fuzz_target.headers)
