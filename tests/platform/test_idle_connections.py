"""Pooled PostgreSQL connections that died while the service held them: a server restart, an
administrator's pg_terminate_backend. The pool pings only a connection that sat idle
(``app/core/db.py``), so these check both sides of that rule."""

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.core import db
from app.main import create_app
from tests.conftest import client_for, end_server_processes, make_settings
from tests.helpers import assert_problem
from tests.platform.servers import create_key_in

pytestmark = pytest.mark.postgresql

POOLED = 4
DECISION = {"id": "dec-001", "decision": "Keep the pool warm", "rationale": "speed"}


@pytest.fixture
def fresh_client(own_postgres_url) -> Iterator[tuple[TestClient, str]]:
    """A client of an app on a PostgreSQL database of its own (its connections are the only
    ones there), whose pool holds several connections, and that database's URL."""
    url = own_postgres_url
    key = create_key_in(url, "idle")
    app = create_app(make_settings(url))
    with TestClient(app), client_for(app, key) as client:
        engine = app.state.database.writer
        held = [engine.connect() for _ in range(POOLED)]
        for connection in held:
            connection.close()
        assert engine.pool.checkedin() >= POOLED
        yield client, url


def _append(client: TestClient, number: int) -> int:
    body = DECISION | {"id": f"dec-{number:03d}"}
    return client.post("/v1/projects/idle/memory/decisions", json=body).status_code


def test_a_connection_that_died_while_idle_is_replaced_unseen(fresh_client, monkeypatch):
    client, database_url = fresh_client
    assert _append(client, 1) == 201
    assert end_server_processes(database_url) >= POOLED
    monkeypatch.setattr(db, "PING_AFTER_IDLE_SECONDS", 0.0)  # every checkout counts as idle
    assert _append(client, 2) == 201
    assert client.get("/v1/projects/idle/memory/decisions").json()["items"][0]["id"] == "dec-002"


def test_a_connection_that_died_in_use_costs_one_retryable_answer(fresh_client, monkeypatch):
    client, database_url = fresh_client
    assert _append(client, 1) == 201
    assert end_server_processes(database_url) >= POOLED
    monkeypatch.setattr(db, "PING_AFTER_IDLE_SECONDS", 3600.0)  # no checkout is pinged
    answer = client.post("/v1/projects/idle/memory/decisions", json=DECISION | {"id": "dec-002"})
    problem = assert_problem(answer, 503)
    assert "retry" in problem["detail"]
    assert answer.headers["Retry-After"]
    # The failure replaced every connection the pool held before it, not only its own: each
    # retry succeeds, though the pool held more dead connections than one.
    for number in range(2, 2 + POOLED):
        assert _append(client, number) == 201
