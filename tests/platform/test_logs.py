"""Structured logs: JSON lines, one per request, with its id, and nothing secret."""

import asyncio
import io
import json
import logging
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from app.core import write_turns
from app.core.logs import JsonFormatter
from tests.conftest import client_for, create_key
from tests.helpers import http_scope, import_save, seed_save

LogLines = Callable[[], list[dict[str, Any]]]
SERVER_LOGGERS = ("context_store", "app")


@pytest.fixture
def log_lines() -> Iterator[LogLines]:
    """What the service logs while the test runs, parsed line by line as a collector would."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    levels = {name: logging.getLogger(name).level for name in SERVER_LOGGERS}
    for name in SERVER_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO)
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        root.removeHandler(handler)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def _request_lines(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line["logger"] == "context_store.access"]


def test_each_request_is_one_json_line_with_its_id_route_status_and_tenant(
    client, tenant, project, log_lines
):
    response = client.get(f"/v1/projects/{project}/saves", headers={"X-Request-ID": "req-42.a"})
    assert response.status_code == 404
    assert response.headers["x-request-id"] == "req-42.a"
    [line] = _request_lines(log_lines())
    assert line == {
        "ts": line["ts"],
        "level": "INFO",
        "logger": "context_store.access",
        "message": "GET /v1/projects/{project}/saves 404",
        "request_id": "req-42.a",
        "method": "GET",
        "route": "/v1/projects/{project}/saves",
        "status": 404,
        "duration_ms": line["duration_ms"],
        "tenant": tenant,
    }
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", line["ts"])
    assert isinstance(line["duration_ms"], float) and line["duration_ms"] >= 0


@pytest.mark.parametrize(
    "sent",
    # The last: a key pasted into the wrong header, sane as an id, never echoed nor logged.
    [None, "", "has space", "x" * 129, "a/b", "é", "sk-ant-api03-Zq7Wk2Lm9Xp4Rt6Yv8Bn3Cd5"],
)
def test_a_missing_or_odd_request_id_is_replaced_by_a_new_one(client, log_lines, sent):
    headers = {} if sent is None else {"X-Request-ID": sent.encode()}
    first = client.get("/v1/projects", headers=headers).headers["x-request-id"]
    second = client.get("/v1/projects", headers=headers).headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", first) and first != second
    assert [line["request_id"] for line in _request_lines(log_lines())] == [first, second]


def test_an_unauthenticated_request_is_logged_without_a_tenant(app, log_lines):
    assert TestClient(app).get("/v1/projects").status_code == 401
    [line] = _request_lines(log_lines())
    assert line["status"] == 401 and "tenant" not in line


def test_secrets_in_bodies_headers_and_query_strings_never_reach_the_logs(
    app, client, project, log_lines
):
    api_key_in_body = "sk-proj-" + "Q" * 40
    password = "hunter2-correct-horse"
    save = seed_save()
    save["context"]["conversation_history"][0]["content"] = (
        f"key {api_key_in_body} password={password}"
    )
    assert import_save(client, project, save).status_code == 201
    # A body that is not JSON (400), and a secret where a cursor should be (422).
    broken = f'{{"token": "{api_key_in_body}"'.encode()
    assert import_save(client, project, broken).status_code == 400
    client.get(f"/v1/projects/{project}/saves", params={"cursor": password, "token": password})
    client_key = client.headers["authorization"].removeprefix("Bearer ")

    lines = log_lines()
    text = json.dumps(lines)
    for secret in (api_key_in_body, password, client_key, project):
        assert secret not in text
    assert [line["status"] for line in _request_lines(lines)] == [201, 400, 422]


def test_the_request_id_comes_from_the_request_context(client, log_lines):
    logger = logging.getLogger("context_store.test")
    logger.info("outside")
    client.get("/healthz", headers={"X-Request-ID": "abc"})
    lines = log_lines()
    assert "request_id" not in lines[0]
    assert lines[-1]["request_id"] == "abc"


def test_the_formatter_keeps_extra_fields_and_exceptions():
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord(
            "context_store.test", logging.ERROR, __file__, 1, "failed %s", ("x",), sys.exc_info()
        )
    record.__dict__["route"] = "/r"
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "failed x" and line["level"] == "ERROR" and line["route"] == "/r"
    assert "ValueError: boom" in line["exception"]


def test_the_formatter_writes_any_extra_value_as_json():
    """Whatever a library passes in ``extra``: keys that are not text, an integer past 64 bits
    (which the fast encoder refuses), text beyond ASCII as it is, and objects as their ``str``."""
    record = logging.LogRecord(
        "context_store.test", logging.INFO, __file__, 1, "é %s", ("ü",), None
    )
    record.__dict__ |= {"counts": {1: "one"}, "big": 2**70, "thing": Path("/p")}
    line = JsonFormatter().format(record)
    assert "é ü" in line
    assert json.loads(line) | {"ts": None} == {
        "ts": None,
        "level": "INFO",
        "logger": "context_store.test",
        "message": "é ü",
        "counts": {"1": "one"},
        "big": 2**70,
        "thing": "/p",
    }
    del record.__dict__["big"]
    assert json.loads(JsonFormatter().format(record))["counts"] == {"1": "one"}


@dataclass
class _Credentials:
    user: str
    token: str = field(repr=False)


def test_the_formatter_writes_a_dataclass_or_a_time_as_its_str():
    """Never a dataclass's fields: one its ``repr`` hides may be a secret."""
    record = logging.LogRecord("context_store.test", logging.INFO, __file__, 1, "m", (), None)
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    record.__dict__ |= {"who": _Credentials("u", "cs_secret"), "at": moment}
    line = JsonFormatter().format(record)
    assert "cs_secret" not in line
    assert json.loads(line)["who"] == "_Credentials(user='u')"
    assert json.loads(line)["at"] == str(moment)


def test_database_errors_name_the_statement_but_not_its_values(app):
    """They are logged; their bound values would be documents and keys."""
    with pytest.raises(DBAPIError) as raised, app.state.database.reader.connect() as connection:
        connection.execute(text("SELECT * FROM no_such_table WHERE x = :v"), {"v": "s3cret-v"})
    assert "no_such_table" in str(raised.value) and "s3cret-v" not in str(raised.value)


def test_a_client_that_hangs_up_mid_body_is_logged_as_such_and_changes_nothing(
    app, client, tenant, project, log_lines
):
    """What uvicorn delivers when a client closes its connection halfway through a body: the
    first bytes, then ``http.disconnect``. That is the client's doing, not a server error."""
    key = client.headers["authorization"].removeprefix("Bearer ")
    path = f"/v1/projects/{project}/memory/decisions"
    scope = http_scope(
        "POST",
        path,
        [
            (b"host", b"testserver"),
            (b"authorization", f"Bearer {key}".encode()),
            (b"content-type", b"application/json"),
            (b"content-length", b"1000"),
        ],
    )
    arriving = [
        {"type": "http.request", "body": b'{"id": "dec-1", "decis', "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return arriving.pop(0) if arriving else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    # The session app, started once: its lifespan entered again would give it a database of
    # its own, and its deleter, stopped at the block's end, would delete no project's rows after.
    anyio.run(app, scope, receive, send)

    [start] = [message for message in sent if message["type"] == "http.response.start"]
    assert start["status"] == 400
    lines = log_lines()
    assert not [line for line in lines if line["level"] in ("ERROR", "CRITICAL")], lines
    [access] = _request_lines(lines)
    assert access["status"] == 400 and access["tenant"] == tenant
    assert any("disconnected" in line["message"] for line in lines)
    assert client.get(path).status_code == 404  # nothing stored, not even the project


def test_a_cancelled_error_not_the_requests_own_cancellation_stays_a_500(app, monkeypatch):
    """Only a request whose own task is being cancelled (the shutdown's grace period run out)
    is answered 503: a CancelledError from a future cancelled elsewhere is a failure."""

    async def cancelled_elsewhere(self: write_turns.WriteTurns, *_args: Any) -> None:
        future = asyncio.get_running_loop().create_future()
        future.cancel()
        await future

    monkeypatch.setattr(write_turns.WriteTurns, "run", cancelled_elsewhere)
    client = client_for(app, create_key(app, "t-cancelled"), raise_server_exceptions=False)
    decision = {"id": "dec-1", "decision": "Keep it", "rationale": "Measured"}
    answer = client.post("/v1/projects/elsewhere/memory/decisions", json=decision)
    assert answer.status_code == 500
