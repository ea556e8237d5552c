"""List cursors are sealed: a client can neither read nor make one (app/core/cursors.py).

A hostile client decoded its cursors (unpadded base64 of JSON such as
``{"k":["timestamp","id"],"v":[1,8]}``): the primary key in them is one sequence shared by every
tenant, so between two of its own writes it jumped by the rows other tenants wrote meanwhile
(8 to 17 after another tenant's seven decisions). Every test here goes through HTTP, on SQLite
and PostgreSQL, and each failed before the seal (see the commit that added it).
"""

import base64
import secrets
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from app.main import create_app
from tests.conftest import client_for, create_key, make_settings
from tests.helpers import assert_problem, golden_bytes, import_save, raw_trace, seed_save

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
P = "/v1/projects/{project}"
# Rows another tenant writes between two of the tenant's own, as the hostile client saw.
BETWEEN = 7


def _decision(i: int) -> dict:
    return {"id": f"d-{i}", "featureId": "f", "decision": f"d {i}", "timestamp": 1734604500000 + i}


def _failure(i: int) -> dict:
    return {
        "id": f"f-{i}",
        "featureId": "f",
        "description": f"f {i}",
        "timestamp": 1734604500000 + i,
    }


def _save(i: int) -> dict:
    document = seed_save()
    document["timestamp"] = f"2024-01-15T10:00:{i:02d}Z"
    return document


def _state() -> bytes:
    return golden_bytes("atari-state-seed-example.json")


def _feature(client: httpx.Client, project: str) -> None:
    """The feature the handovers of ``project`` go to."""
    response = client.post(f"/v1/projects/{project}/features", json={"feature_id": "feat"})
    assert response.status_code in (201, 409), response.text


Write = Callable[[httpx.Client, str, int], httpx.Response]


@dataclass(frozen=True)
class Listed:
    """A list, how a tenant adds its ``i``-th item to it in a project, and the table whose
    primary keys its cursors carried."""

    url: str
    write: Write
    table: str
    prepare: Callable[[httpx.Client, str], None] = field(default=lambda client, project: None)


LISTS = {
    "decisions": Listed(
        P + "/memory/decisions",
        lambda c, p, i: c.post(f"/v1/projects/{p}/memory/decisions", json=_decision(i)),
        "memory_items",
    ),
    "failures": Listed(
        P + "/memory/failures",
        lambda c, p, i: c.post(f"/v1/projects/{p}/memory/failures", json=_failure(i)),
        "memory_items",
    ),
    "features": Listed(
        P + "/features",
        lambda c, p, i: c.post(f"/v1/projects/{p}/features", json={"feature_id": f"feat-{i}"}),
        "feature_contexts",
    ),
    "handovers": Listed(
        P + "/handovers",
        lambda c, p, i: c.post(
            f"/v1/projects/{p}/features/feat/handovers",
            json={"from_agent": "a", "to_agent": "b", "task_completed": "t", "message": f"{i}"},
        ),
        "feature_handovers",
        prepare=_feature,
    ),
    "runs": Listed(
        P + "/runs",
        lambda c, p, i: c.put(
            f"/v1/projects/{p}/runs/run-{i}/state",
            content=_state(),
            headers={"Content-Type": "application/json"},
        ),
        "run_states",
    ),
    "raw traces": Listed(
        P + "/agents/agent-1/memory/raw-traces",
        lambda c, p, i: c.post(
            f"/v1/projects/{p}/agents/agent-1/memory/raw-traces", json=[raw_trace(f"t{i}", 1)]
        ),
        "agent_memory_items",
    ),
    "episodic": Listed(
        P + "/agents/agent-1/memory/episodic",
        lambda c, p, i: c.post(
            f"/v1/projects/{p}/agents/agent-1/memory/episodic",
            json={
                "id": f"ep-{i}",
                "ts": 1.5 + i,
                "turn_ids": ["t1"],
                "summary": "s",
                "salience": 0.5,
            },
        ),
        "agent_memory_items",
    ),
    "saves": Listed(P + "/saves", lambda c, p, i: import_save(c, p, _save(i)), "saves"),
    # A project is made by its first write: the i-th is its own project.
    "projects": Listed(
        "/v1/projects",
        lambda c, p, i: c.put(
            f"/v1/projects/{p}-{i}/memory/running-summary", json={"content": "x"}
        ),
        "projects",
    ),
}


def _write(listed: Listed, client: httpx.Client, project: str, i: int) -> None:
    response = listed.write(client, project, i)
    assert response.status_code in (200, 201), response.text


def _pages(client: httpx.Client, url: str) -> tuple[list, list[str]]:
    """Every item of the list, a page of one at a time, and the cursors that led there."""
    items, cursors, cursor = [], [], None
    while True:
        page = client.get(url, params={"limit": 1} | ({"cursor": cursor} if cursor else {}))
        assert page.status_code == 200, page.text
        items += page.json()["items"]
        if (cursor := page.json()["next_cursor"]) is None:
            return items, cursors
        cursors.append(cursor)


def _unbase64(cursor: str) -> bytes:
    return base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))


def _primary_keys(engine: Engine, listed: Listed, tenant: str, project: str) -> list[int]:
    with engine.connect() as connection:
        if listed.table == "projects":
            statement = text("SELECT id FROM projects WHERE tenant = :tenant")
        else:
            statement = text(
                f"SELECT id FROM {listed.table} WHERE project_id = "  # noqa: S608 (ours)
                "(SELECT id FROM projects WHERE tenant = :tenant AND name = :project)"
            )
        rows = connection.execute(statement, {"tenant": tenant, "project": project})
        return sorted(row[0] for row in rows)


def _refused(response: httpx.Response) -> None:
    body = assert_problem(response, 422)
    assert body["errors"][0]["path"] == "query.cursor"


@pytest.mark.parametrize("name", list(LISTS))
def test_a_cursor_shows_nothing_of_what_other_tenants_write(
    client, other_client, engine, tenant, project, name
):
    """Tenant A writes three items with another tenant's seven between each two (the ids of
    A's rows jump by them): A's pages hold A's items each once, and its cursors hold no text,
    no JSON, no id in any width, and are all as long as each other."""
    listed = LISTS[name]
    for writer in (client, other_client):
        listed.prepare(writer, project)
    _write(listed, client, project, 0)
    for i in (1, 2):
        for j in range(BETWEEN):
            _write(
                listed, other_client, project + "-v" if name == "projects" else project, i * 10 + j
            )
        _write(listed, client, project, i)
    keys = _primary_keys(engine, listed, tenant, project)
    assert len(keys) == 3
    # The scenario of the report: the shared sequence moved on between A's own writes.
    assert all(later - earlier > BETWEEN for earlier, later in zip(keys, keys[1:], strict=False))

    url = listed.url.format(project=project)
    whole = client.get(url, params={"limit": 500}).json()["items"]
    items, cursors = _pages(client, url)
    assert items == whole and len(items) == 3  # every item once, none of the other tenant's
    assert len(cursors) == 2 and len(set(cursors)) == 2
    assert len({len(cursor) for cursor in cursors}) == 1, cursors
    for cursor in cursors:
        sealed = _unbase64(cursor)
        # 32 random bytes are UTF-8 with a chance of about 5e-8: not text, so no JSON, no digits.
        with pytest.raises(UnicodeDecodeError):
            sealed.decode()
        for key in keys:
            for width in (">q", "<q", ">i", "<i"):
                assert struct.pack(width, key) not in sealed, (key, width)


def _cursor_of(client: httpx.Client, url: str) -> str:
    cursor = client.get(url, params={"limit": 1}).json()["next_cursor"]
    assert cursor is not None
    return cursor


@pytest.mark.parametrize("name", ["decisions", "raw traces", "projects"])
def test_tampering_with_any_character_of_a_cursor_is_a_422(client, project, name):
    """Every character changed (its lowest bit, which base64 ignores in the last one, and its
    highest), every cut, and one character more: each a 422 problem, never a 500, never a
    page. Before, a changed digit of the JSON was another position, and answered 200."""
    listed = LISTS[name]
    for i in range(3):
        _write(listed, client, project, i)
    url = listed.url.format(project=project)
    cursor = _cursor_of(client, url)
    assert client.get(url, params={"limit": 1, "cursor": cursor}).status_code == 200
    tampered = {cursor[:cut] for cut in range(1, len(cursor))} | {cursor + "A", cursor + "AAAA"}
    for place, character in enumerate(cursor):
        for bit in (1, 32):
            changed = ALPHABET[ALPHABET.index(character) ^ bit]
            tampered.add(cursor[:place] + changed + cursor[place + 1 :])
    for text_ in sorted(tampered):
        _refused(client.get(url, params={"limit": 1, "cursor": text_}))


def test_a_cursor_is_refused_by_every_other_list_tenant_and_project(client, other_client, project):
    """Lists sorted by columns of the same names took each other's cursors (decisions and
    failures, decisions and handovers, projects and features, raw traces and episodic items,
    one agent's and another's), and so did another project's list or another tenant's."""
    mine, theirs = client, other_client
    for i in range(2):
        for who in (mine, theirs):
            for name in ("decisions", "failures", "features", "raw traces", "projects"):
                _write(LISTS[name], who, project, i)
        _write(LISTS["decisions"], mine, project + "-b", i)
        _write(LISTS["raw traces"], mine, project, 10 + i)
    _feature(mine, project)
    for i in range(2):
        _write(LISTS["handovers"], mine, project, i)
    for i in range(2):
        trace = [raw_trace(f"t{i}", 1)]
        response = mine.post(f"/v1/projects/{project}/agents/agent-2/memory/raw-traces", json=trace)
        assert response.status_code == 201, response.text
    p = f"/v1/projects/{project}"
    cursors = {
        name: _cursor_of(mine, url)
        for name, url in {
            "decisions": f"{p}/memory/decisions",
            "handovers": f"{p}/handovers",
            "features": f"{p}/features",
            "projects": "/v1/projects",
            "raw traces": f"{p}/agents/agent-1/memory/raw-traces",
            "members": f"{p}/archive/members",
        }.items()
    }
    foreign = [
        (mine, f"{p}/memory/failures", "decisions"),
        (mine, f"{p}/memory/decisions", "handovers"),
        (mine, f"{p}-b/memory/decisions", "decisions"),
        (theirs, f"{p}/memory/decisions", "decisions"),
        (mine, f"{p}/features", "projects"),
        (mine, "/v1/projects", "features"),
        (theirs, "/v1/projects", "projects"),
        (mine, f"{p}/agents/agent-1/memory/episodic", "raw traces"),
        (mine, f"{p}/agents/agent-2/memory/raw-traces", "raw traces"),
        (theirs, f"{p}/agents/agent-1/memory/raw-traces", "raw traces"),
        (mine, f"{p}-b/archive/members", "members"),
    ]
    for who, url, name in foreign:
        response = who.get(url, params={"cursor": cursors[name]})
        assert response.status_code == 422, (url, name, response.text)
        _refused(response)
    # Each where it came from: accepted.
    assert mine.get(f"{p}/memory/decisions", params={"cursor": cursors["decisions"]}).is_success


def test_a_cursor_written_by_hand_in_the_former_format_is_refused(client, project):
    """What a client could write before: a position of its choosing, as JSON in base64."""
    for i in range(3):
        import_save(client, project, _save(i))
    forged = base64.urlsafe_b64encode(
        b'{"k":["timestamp","number"],"v":[{"dt":"2024-01-15T10:00:02+00:00"},3]}'
    )
    response = client.get(
        f"/v1/projects/{project}/saves", params={"cursor": forged.decode().rstrip("=")}
    )
    _refused(response)


def test_a_cursor_outlives_a_restart_with_the_key_and_not_a_new_key(database_url, project):
    """Sealed under a key derived from CONTEXT_STORE_FINGERPRINT_KEY: a server restarted with
    the same key (or a replica sharing it) takes the cursor; one with another key, as a process
    that drew its own has after a restart, refuses it with a 422 that says to start again."""
    tenant = "t-" + secrets.token_hex(6)
    url = f"/v1/projects/{project}/memory/decisions"
    key_a, key_b = "a" * 32, "b" * 32
    answers = []
    cursor = None
    for fingerprint_key in (key_a, key_a, key_b):
        application = create_app_with(database_url, fingerprint_key)
        with TestClient(application):
            server = client_for(application, create_key(application, tenant))
            if cursor is None:
                for i in range(3):
                    _write(LISTS["decisions"], server, project, i)
                cursor = _cursor_of(server, url)
            answers.append(server.get(url, params={"limit": 1, "cursor": cursor}))
    first, restarted, other_key = answers
    assert first.status_code == restarted.status_code == 200
    assert restarted.json() == first.json()
    body = assert_problem(other_key, 422)
    assert body["errors"][0]["path"] == "query.cursor"
    assert "without a cursor" in body["detail"]


def create_app_with(database_url: str, fingerprint_key: str) -> FastAPI:
    return create_app(make_settings(database_url, fingerprint_key=fingerprint_key))


def test_base64_ignores_bits_of_the_last_character():
    """The premise of the lowest bit's change in the tampering test: two texts decode to the
    same 32 bytes, so the seal must refuse the one it did not write (it re-encodes)."""
    sealed = bytes(range(32))
    text_ = base64.urlsafe_b64encode(sealed).rstrip(b"=").decode()
    changed = text_[:-1] + ALPHABET[ALPHABET.index(text_[-1]) ^ 1]
    assert changed != text_ and _unbase64(changed) == sealed
