"""Bad input on every route that takes it: a clear 4xx problem each time, and nothing stored
changes (everything the owner can read is compared before and after).

`POST .../runs/{run}/state:load` is left out of the malformed-JSON cases: by the contract it
takes any bytes at all (what is not a state is kept verbatim as the backup).
"""

import gzip
import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.core.migrations import upgrade
from app.main import create_app
from tests.conftest import client_for, create_key, make_settings
from tests.helpers import assert_problem
from tests.mcp_client import BASE_URL, key_of
from tests.platform.world import (
    WRITES,
    P,
    Route,
    World,
    api_routes,
    populate,
    readable_state,
    send,
)

LOAD = ("POST", P + "/runs/{run}/state:load")
BODY_ROUTES = sorted(route for route, request in WRITES.items() if "content" in request)
JSON_ROUTES = [
    route
    for route in BODY_ROUTES
    if route != LOAD and WRITES[route]["headers"]["Content-Type"] == "application/json"
]


def assert_refused(response, *statuses: int) -> None:
    assert response.status_code in statuses, response.text
    assert_problem(response, response.status_code)


@pytest.fixture
def world(client, project) -> World:
    return populate(client, project)


@pytest.fixture
def unchanged(app, client, world) -> Iterator[None]:
    """The test's requests change nothing the owner can read."""
    routes = api_routes(app)
    before = readable_state(client, world, routes)
    yield
    assert readable_state(client, world, routes) == before


def _json_with(route, replace: bytes, by: bytes) -> bytes:
    return WRITES[route]["content"].replace(replace, by, 1)


MALFORMED = {
    "nested arrays": lambda route: b"[" * 5000 + b"]" * 5000,
    "nested objects": lambda route: b'{"a":' * 5000 + b"1" + b"}" * 5000,
    "invalid UTF-8": lambda route: _json_with(route, b'"', b'"\xff\xfe'),
    # Python's json.loads(bytes) reads UTF-8 with surrogatepass: a lone surrogate's bytes,
    # which UTF-8 does not allow (its escape, \ud800, is valid JSON).
    "UTF-8 of a lone surrogate": lambda route: _json_with(route, b'"', b'"\xed\xa0\x80'),
    "raw NUL": lambda route: _json_with(route, b'"', b'"\x00'),
    "cut short": lambda route: WRITES[route]["content"][:-2],
    "not JSON": lambda route: b"key=value",
    "empty": lambda route: b"",
}


def test_malformed_json_is_refused_everywhere(client, world, unchanged):
    for case, make in MALFORMED.items():
        for route in JSON_ROUTES:
            response = send(client, world, route, content=make(route))
            assert response.status_code in (400, 422), (case, route, response.text)
            assert_problem(response, response.status_code)


def test_a_number_beyond_any_float_is_refused_everywhere(client, world, unchanged):
    """1e400 parses as infinity, which no document can give back as it was written."""
    for route in JSON_ROUTES:
        body = WRITES[route]["content"]
        wrapped = b'{"n": 1e400, "v": ' + body + b"}" if body.startswith(b"{") else None
        for content in filter(None, [b"1e400", b"[1e400]", wrapped]):
            assert_refused(send(client, world, route, content=content), 400, 422)


HUGE = 10**400
COUNTS = {
    ("POST", P + "/saves:prune"): {"keep_latest": HUGE},
    ("POST", P + "/features/{feature}/reviews"): {
        "phase": "design-l1",
        "outcome": "REJECTED",
        "issues_count": HUGE,
    },
    ("POST", P + "/agents/{agent}/restore"): {"system_prompt": "x", "max_episodic": HUGE},
    ("POST", P + "/runs/{run}/iterations"): {"bead_id": "b", "attempt": HUGE},
    ("POST", P + "/runs/{run}/iterations/end"): {
        "bead_id": "b",
        "outcome": "completed",
        "turns": HUGE,
    },
}


def test_counts_that_are_not_64_bit_integers_are_422(client, world, unchanged):
    for value in (HUGE, -HUGE, 2**63, True, "1", 1.5):
        for route, body in COUNTS.items():
            body = {key: value if item == HUGE else item for key, item in body.items()}
            content = json.dumps(body).encode()
            assert_refused(send(client, world, route, content=content), 422)


def test_numbers_past_64_bits_in_atari_state_are_422(client, world, unchanged):
    """atari's writer is Go: its int fields are 64-bit, and it could not have written more."""
    route = ("PUT", P + "/runs/{run}/state")
    for value in (HUGE, -HUGE, 2**63):
        content = _json_with(route, b'"iteration": 5', b'"iteration": ' + str(value).encode())
        assert_refused(send(client, world, route, content=content), 422)


@pytest.mark.parametrize(
    "document",
    [
        ("PUT", P + "/agents/{agent}/working-context-snapshot", b'"epoch_id": 4', b'"epoch_id": '),
        ("POST", P + "/memory/decisions", b'"timestamp": 1734604500000', b'"timestamp": '),
    ],
    ids=["snapshot epoch", "memory timestamp"],
)
def test_huge_numbers_in_python_written_documents_are_kept(client, world, document):
    """Python's int and json have no bound: the document keeps the value (an indexed column
    holds it clamped), never a 500."""
    method, path, field, replacement = document
    content = _json_with((method, path), field, replacement + str(HUGE).encode())
    # A new item, not the world's own (whose id exists already).
    content = content.replace(b'"item-1"', b'"item-huge"')
    response = send(client, world, (method, path), content=content)
    assert response.status_code in (200, 201), response.text


WRONG_MEDIA_TYPES = [
    "text/plain",
    "application/xml",
    "multipart/form-data; boundary=x",
    "application/jsonx",
    None,
]


def test_wrong_media_types_are_415_everywhere(client, world, unchanged):
    for content_type in WRONG_MEDIA_TYPES:
        headers = {"Content-Type": content_type} if content_type else {}
        for route in BODY_ROUTES:
            assert_refused(send(client, world, route, headers=headers), 415)


def test_unknown_content_codings_are_415_everywhere(client, world, unchanged):
    for route in BODY_ROUTES:
        headers = WRITES[route]["headers"] | {"Content-Encoding": "br"}
        assert_refused(send(client, world, route, headers=headers), 415)


# A literal ".." segment never reaches the server: clients remove dot segments (RFC 3986) and
# send another, legitimate request. Encoded, it arrives as a name.
BAD_NAMES = [
    "..%2F..%2Fetc%2Fpasswd",
    "%2e%2e",
    "a%2Fb",
    "a%5Cb",
    "a%00b",
    "%C3%A9t%C3%A9",  # été
    "%E5%90%8D%E5%89%8D",  # 名前
    "a%E2%80%AEb",  # right-to-left override
    "x" * 129,
    "-leading",
]
NAMED = ("project", "agent", "run", "feature")


BAD_IDS = ["%2e%2e", "%2e%2e%2fx", "-1", "1e3", "%C3%A9", "0x10", "99" * 20]


def _with_each(app, parameters: tuple[str, ...], values: list[str]):
    """Every route with each of its ``parameters`` in turn set to each value."""
    for route in api_routes(app):
        for parameter in parameters:
            if "{" + parameter + "}" in route[1]:
                for value in values:
                    yield (route[0], route[1].replace("{" + parameter + "}", value))


def test_bad_identifiers_in_paths_are_4xx_everywhere(app, client, world, unchanged):
    for route in _with_each(app, NAMED, BAD_NAMES):
        assert_refused(send(client, world, route), 404, 405, 422)


def test_bad_row_ids_and_file_names_are_4xx(app, client, world, unchanged):
    for route in _with_each(app, ("save_id", "key_id", "name", "memory"), BAD_IDS):
        assert_refused(send(client, world, route), 404, 405, 422)


@pytest.fixture(scope="module")
def small_app(backend) -> Iterator[FastAPI]:
    """The app with 4 KiB limits (8 KiB for saves), on a database of its own."""
    url = backend.new_database_url()
    upgrade(url)
    application = create_app(make_settings(url, max_body_bytes=4096, max_bulk_body_bytes=8192))
    with TestClient(application):
        yield application


@pytest.fixture
def small_client(small_app):
    return client_for(small_app, create_key(small_app, "t-" + secrets.token_hex(6)))


def _chunks(data: bytes) -> Iterator[bytes]:
    for start in range(0, len(data), 1000):
        yield data[start : start + 1000]


# The routes of BulkBodyRoute: save files and archives.
BULK_ROUTES = {("POST", P + "/saves"), ("POST", P + "/archive")}


def test_bodies_over_the_limit_are_413_everywhere(small_app, small_client, project):
    world = populate(small_client, project)
    routes = api_routes(small_app)
    before = readable_state(small_client, world, routes)
    for route in BODY_ROUTES:
        limit = 8192 if route in BULK_ROUTES else 4096
        # Valid JSON, so that nothing but the size is wrong with it.
        oversized = json.dumps({"pad": "x" * limit}).encode()
        headers = WRITES[route]["headers"]
        for request in (
            {"content": oversized},  # Content-Length says so
            {"content": _chunks(oversized)},  # chunked: counted as it arrives
            {
                "content": gzip.compress(oversized),
                "headers": headers | {"Content-Encoding": "gzip"},
            },
        ):
            assert_refused(send(small_client, world, route, **request), 413)
    assert readable_state(small_client, world, routes) == before


# Valid JSON that neither database can store as text: NUL, and lone surrogates (a low one
# before a high one, so that the two never pair). Each is tried on its own, so that a field
# refusing one cannot hide a failure on the other.
UNSTORABLE = {"NUL": "\x00", "lone surrogates": "\udc00\ud800"}
# What the app logs when the database refuses a value the route let through (app/core/errors.py).
UNSTORABLE_LOG = "unstorable value on"
EVERYWHERE = ("every string",)


def _marked(value: Any, mark: str, at: tuple[Any, ...], path: tuple[Any, ...] = ()) -> Any:
    """``value`` with ``mark`` appended to the string (or object key) at path ``at``, or to
    every string (not key: that would only rename fields) when ``at`` is EVERYWHERE."""

    if isinstance(value, dict):
        return {
            key + mark if at == (*path, key, "key") else key: _marked(item, mark, at, (*path, key))
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_marked(item, mark, at, (*path, index)) for index, item in enumerate(value)]
    return value + mark if isinstance(value, str) and at in (EVERYWHERE, path) else value


def _string_positions(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every string in a document, and of every object key (ending in "key")."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*path, key, "key")
            yield from _string_positions(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _string_positions(item, (*path, index))
    elif isinstance(value, str):
        yield path


def _unstorable_bodies(route: Route) -> Iterator[tuple[str, bytes]]:
    """Every string marked at once, then each string and key on its own: one request each
    (cheap: the checks that read everything back run once per route). As JSON escapes:
    json.dumps writes \\u0000 and \\udc00."""
    document = json.loads(WRITES[route]["content"])
    for name, mark in UNSTORABLE.items():
        for at in [EVERYWHERE, *_string_positions(document)]:
            marked = json.dumps(_marked(document, mark, at)).encode()
            yield f"{name} in {'/'.join(map(str, at))}", marked


# Where a route's document is read back.
EXPORTS = {
    ("PUT", P + "/agents/{agent}/working-context-snapshot"): P
    + "/agents/{agent}/working-context-snapshot",
    ("PUT", P + "/runs/{run}/state"): P + "/runs/{run}/state",
    ("PUT", P + "/features/{feature}/context"): P + "/features/{feature}/context",
    ("POST", P + "/saves"): P + "/saves/{save_id}",
}


def _same_json(one: bytes, other: bytes) -> bool:
    """The same values, strings exactly, keys in the same order (layouts differ by format)."""
    return json.dumps(json.loads(one)) == json.dumps(json.loads(other))


def test_strings_no_database_can_store_are_kept_or_refused_everywhere(app, client, world, caplog):
    """NUL and lone surrogates are valid JSON in any string. A route either keeps the document
    as sent (a column copy holds the searchable form), and everything stays readable, or it
    refuses it with a problem; never a 500. The route decides, never the database (which
    would refuse on PostgreSQL what SQLite stores): both databases answer alike.

    What was refused is sent again to a world of its own, which must not change: a refusal
    stores nothing. (Checking that after each request would read everything back hundreds of
    times.)"""
    routes = api_routes(app)
    refused: list[tuple[Route, str, bytes]] = []
    for route in JSON_ROUTES:
        for case, content in _unstorable_bodies(route):
            response = send(client, world, route, content=content)
            assert response.status_code < 500, (route, case, response.text)
            if response.status_code >= 400:
                assert_problem(response, response.status_code)
                refused.append((route, case, content))
            # Kept byte for byte unless a marked key renamed a field (formats move fields they
            # do not know) or the save format warned that it replaced a value it cannot read.
            elif route in EXPORTS and not case.endswith("/key"):
                if route == ("POST", P + "/saves"):
                    world.save_id = response.json()["id"]
                    if response.json()["warnings"]:
                        continue
                exported = client.get(world.url(EXPORTS[route])).content
                assert _same_json(exported, content), (route, case)
        for read, (status, _) in readable_state(client, world, routes).items():
            assert status < 500, (route, read)

    assert UNSTORABLE_LOG not in caplog.text, "the database, not the route, refused a value"

    untouched = populate(client, world.project + "-refusals")
    before = readable_state(client, untouched, routes)
    for route, case, content in refused:
        response = send(client, untouched, route, content=content)
        assert 400 <= response.status_code < 500, (route, case, response.text)
    assert readable_state(client, untouched, routes) == before


def _string_query_parameters(app: FastAPI) -> Iterator[tuple[str, str]]:
    """(GET path format, name) of every query parameter that takes free text."""
    for path_format, operations in app.openapi()["paths"].items():
        for parameter in operations.get("get", {}).get("parameters", []):
            schemas = parameter["schema"].get("anyOf", [parameter["schema"]])
            if parameter["in"] == "query" and any(
                schema.get("type") == "string" and "format" not in schema for schema in schemas
            ):
                yield path_format, parameter["name"]


# A query string is percent-decoded as UTF-8 with errors replaced, so NUL is the one character
# of the two that arrives as sent: %ED%A0%80 (a surrogate's would-be UTF-8) arrives as U+FFFD.
UNSTORABLE_QUERY_VALUES = ["%00", "a%00b", "%ED%A0%80", "%EF%BF%BD", "%C0%80"]


def test_query_filters_with_unstorable_characters_are_never_a_500(app, client, world):
    for path_format, name in _string_query_parameters(app):
        for value in UNSTORABLE_QUERY_VALUES:
            url = f"{world.url(path_format)}?{name}={value}"
            response = client.get(url)
            assert response.status_code < 500, (url, response.text)
            if response.status_code >= 400:
                assert_problem(response, response.status_code)


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_bodies_at_mcp_are_4xx_and_change_nothing(app, client, world, unchanged, case):
    # A loopback host: /mcp refuses any other before it reads a body (DNS-rebinding check).
    mcp = client_for(app, key_of(client), base_url=BASE_URL)
    accept = {"Accept": "application/json, text/event-stream"}
    listed = mcp.post(
        "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=accept
    )
    assert listed.status_code == 200, listed.text  # the same request, well formed, is answered
    body = MALFORMED[case](("POST", P + "/saves"))
    for content_type in ("application/json", "text/plain"):
        headers = accept | {"Content-Type": content_type}
        response = mcp.post("/mcp", content=body, headers=headers)
        assert 400 <= response.status_code < 500, (case, content_type, response.text)
