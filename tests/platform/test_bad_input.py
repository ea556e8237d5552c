"""Input a client can send that once reached the database unchecked: each is a clear 4xx."""

import base64
import json
import struct

import pytest
from sqlalchemy import Engine, text

from app.archive.service import MEMBER_LIST
from app.core.pagination import list_name_of
from app.saves.repository import NEWEST_FIRST
from tests.conftest import client_for
from tests.helpers import assert_problem, import_save, python_indent2, seed_save

INT64_MAX = 2**63 - 1


def _cursor(payload: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")


@pytest.mark.parametrize("save_id", [INT64_MAX + 1, 10**30, -(2**63) - 1, 0])
def test_ids_beyond_64_bits_are_422(client, project, save_id):
    import_save(client, project, seed_save())
    base = f"/v1/projects/{project}/saves/{save_id}"
    assert_problem(client.get(base), 422)
    assert_problem(client.delete(base), 422)
    assert_problem(client.post(f"{base}/resume"), 422)


@pytest.mark.parametrize("keep_latest", [False, True, "0", 1.0])
def test_a_prune_count_that_is_not_an_integer_is_422_and_prunes_nothing(
    client, project, keep_latest
):
    """Found by the fuzzer: `false` passed as 0 and deleted every save."""
    import_save(client, project, seed_save())
    url = f"/v1/projects/{project}/saves:prune"
    assert_problem(client.post(url, json={"keep_latest": keep_latest}), 422)
    assert len(client.get(f"/v1/projects/{project}/saves").json()["items"]) == 1


def test_a_prune_count_beyond_64_bits_is_422(client, project):
    import_save(client, project, seed_save())
    url = f"/v1/projects/{project}/saves:prune"
    assert_problem(client.post(url, json={"keep_latest": INT64_MAX + 1}), 422)
    assert client.post(url, json={"keep_latest": INT64_MAX}).json() == {"deleted": 0}


@pytest.mark.parametrize(
    "values",
    [
        [{"dt": "2020-01-01T00:00:00"}, 1],  # no zone
        [{"dt": "0001-01-01T00:00:00+01:00"}, 1],  # before year 1 in UTC
        [{"dt": "2020-01-01T00:00:00+00:00"}, INT64_MAX + 1],
        [{"dt": "2020-01-01T00:00:00+00:00"}, "1"],
        [{"dt": "not a date"}, 1],
        [None, 1],
    ],
)
def test_tampered_cursors_are_422(client, project, values):
    """Cursors in the former format (JSON in base64, which a client could read and write; the
    saves list's keys are ``timestamp`` and ``number``), holding values its checks refused: the
    seal refuses them all now (tests/platform/test_cursors.py), and those checks' successors
    are the next test's."""
    import_save(client, project, seed_save())
    cursor = _cursor({"k": ["timestamp", "number"], "v": values})
    response = client.get(f"/v1/projects/{project}/saves", params={"cursor": cursor})
    assert_problem(response, 422)


def _project_id(engine: Engine, tenant: str, project: str) -> int:
    with engine.connect() as connection:
        statement = text("SELECT id FROM projects WHERE tenant = :tenant AND name = :name")
        return int(connection.execute(statement, {"tenant": tenant, "name": project}).scalar_one())


@pytest.mark.parametrize(
    "position",
    [
        b"\0" * 15,  # cut short
        b"\0" * 17,  # a byte too many
        struct.pack(">qq", 2**63 - 1, 1),  # microseconds past year 9999
        struct.pack(">qq", -(2**63), 1),  # and before year 1
    ],
)
def test_a_sealed_position_the_server_never_makes_is_422(
    app, engine, client, tenant, project, position
):
    """Should a position ever be sealed wrong, unpacking it is a 422 too, never a 500: sealed
    here with the server's own seal, for the list it is sent to."""
    import_save(client, project, seed_save())
    scope = (_project_id(engine, tenant, project),)

    def sealed(position: bytes) -> str:
        return app.state.database.cursors.seal(position, list_name_of(NEWEST_FIRST), scope)

    url = f"/v1/projects/{project}/saves"
    # Sealed alike, a position of the right shape is taken: what is refused is its bytes.
    assert client.get(url, params={"cursor": sealed(struct.pack(">qq", 0, 1))}).status_code == 200
    assert_problem(client.get(url, params={"cursor": sealed(position)}), 422)


@pytest.mark.parametrize(
    "position",
    [
        struct.pack(">I", 5) + b"abcd",  # a text cut short
        struct.pack(">I", 2) + b"\xff\xfe",  # not UTF-8
        struct.pack(">I", 3) + b"a\0b",  # NUL, which no column holds
        struct.pack(">I", 1) + b"ab",  # a byte after the text
    ],
)
def test_a_sealed_path_the_server_never_makes_is_422(app, client, tenant, project, position):
    client.put(f"/v1/projects/{project}/memory/running-summary", json={"content": "x"})

    def sealed(position: bytes) -> str:
        return app.state.database.cursors.seal(position, MEMBER_LIST, (tenant, project))

    url = f"/v1/projects/{project}/archive/members"
    assert client.get(url, params={"cursor": sealed(b"\0\0\0\1a")}).status_code == 200
    assert_problem(client.get(url, params={"cursor": sealed(position)}), 422)


@pytest.mark.parametrize("moment", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_instants_outside_utc_are_422_in_queries(client, project, moment):
    import_save(client, project, seed_save())
    response = client.get(f"/v1/projects/{project}/saves", params={"since": moment})
    body = assert_problem(response, 422)
    assert body["errors"][0]["path"] == "query.since"


@pytest.mark.parametrize("moment", ["0.5", "1700000000", "-1", "1e9"])
@pytest.mark.parametrize("route", ["saves", "handovers"])
def test_numbers_are_not_instants_in_queries(client, project, moment, route):
    """Found by the fuzzer: a number was read as unix seconds where ISO 8601 is documented."""
    import_save(client, project, seed_save())
    response = client.get(f"/v1/projects/{project}/{route}", params={"since": moment})
    body = assert_problem(response, 422)
    assert body["errors"][0]["path"] == "query.since"


@pytest.mark.parametrize("moment", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_handover_instants_outside_utc_are_422(client, project, moment):
    import_save(client, project, seed_save())
    response = client.get(f"/v1/projects/{project}/handovers", params={"since": moment})
    body = assert_problem(response, 422)
    assert body["errors"][0]["path"] == "query.since"


@pytest.mark.parametrize("moment", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_timestamps_outside_utc_in_a_save_get_the_default(client, project, moment):
    document = seed_save()
    document["timestamp"] = moment
    document["metadata"]["created_at"] = moment
    receipt = import_save(client, project, document)
    assert receipt.status_code == 201
    paths = {w["path"] for w in receipt.json()["warnings"]}
    assert paths == {"/timestamp", "/metadata/created_at"}


@pytest.mark.parametrize("text", ["nul\u0000inside", "lone \ud800 surrogate"])
def test_unstorable_text_in_a_save_is_kept_exactly_and_still_listed(client, project, text):
    document = seed_save()
    document["project"]["name"] = text
    document["phases"]["current"] = text
    document["phases"]["status"][text] = "pending"
    receipt = import_save(client, project, document)
    assert receipt.status_code == 201, receipt.text
    exported = client.get(f"/v1/projects/{project}/saves/{receipt.json()['id']}")
    assert exported.content == python_indent2(document)
    listed = client.get(f"/v1/projects/{project}/saves").json()["items"]
    assert [item["id"] for item in listed] == [receipt.json()["id"]]
    if "\u0000" in text:  # a lone surrogate cannot travel in a URL; NUL can
        found = client.get(f"/v1/projects/{project}/saves", params={"phase": text}).json()
        assert [item["id"] for item in found["items"]] == [receipt.json()["id"]]


def test_unstorable_text_in_a_filter_finds_nothing_and_fails_nothing(client, project):
    import_save(client, project, seed_save())
    response = client.get(f"/v1/projects/{project}/saves", params={"phase": "a\u0000b"})
    assert response.status_code == 200 and response.json()["items"] == []


@pytest.mark.parametrize("name", ["a\u0000b", "\ud800"])
def test_unstorable_key_names_are_422(client, name):
    body = json.dumps({"scopes": ["read"], "name": name}).encode()
    response = client.post(
        "/v1/admin/keys", content=body, headers={"Content-Type": "application/json"}
    )
    assert_problem(response, 422)


@pytest.mark.parametrize("key_id", ["a%00b", "ZZZZ", "0" * 40, "%ED%A0%80"])
def test_malformed_key_ids_are_422(client, key_id):
    assert_problem(client.delete(f"/v1/admin/keys/{key_id}"), 422)


@pytest.mark.parametrize("depth", [300, 990, 5000])
def test_deep_nesting_is_refused_without_a_server_error(client, project, depth):
    document = seed_save()
    document["context"]["conversation_history"][0]["content"] = "PLACEHOLDER"
    raw = python_indent2(document).replace(b'"PLACEHOLDER"', b"[" * depth + b"]" * depth)
    response = import_save(client, project, raw)
    assert response.status_code in (400, 422)
    assert_problem(response, response.status_code)


def test_a_percentage_that_would_be_infinite_gets_zero(client, project):
    document = seed_save()
    document["context"]["token_usage"] = {"total": 1e308, "limit": 1e-10}
    receipt = import_save(client, project, document)
    assert receipt.status_code == 201
    exported = client.get(f"/v1/projects/{project}/saves/{receipt.json()['id']}")
    assert json.loads(exported.content)["context"]["token_usage"]["percentage"] == 0.0


@pytest.mark.parametrize(
    ("headers", "content"),
    [
        ({"Content-Type": "text/plain"}, b"x"),
        ({"Content-Type": "application/json", "Content-Encoding": "gzip"}, b"not gzip"),
        ({"Content-Type": "application/json", "Content-Length": str(2**40)}, b"{}"),
    ],
)
def test_an_anonymous_body_gets_401_before_it_is_read(app, project, headers, content):
    anonymous = client_for(app, None)
    response = anonymous.post(f"/v1/projects/{project}/saves", content=content, headers=headers)
    assert_problem(response, 401)
