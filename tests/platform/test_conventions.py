"""ETags and conditional requests, Idempotency-Key, cursor pagination, gzip, body limits."""

import gzip
import json

import pytest
from fastapi import APIRouter, FastAPI, Response
from fastapi.testclient import TestClient

from app.core.body import ContextStoreRoute, DecodedRequest, raw_body
from app.core.config import MIB
from app.main import create_app
from tests.conftest import create_key, make_settings
from tests.helpers import assert_problem, import_save, python_indent2, seed_save
from tests.platform.world import populate


def _save_with(timestamp: str, **extra: object) -> dict:
    document = seed_save()
    document["timestamp"] = timestamp
    document.update(extra)
    return document


# --- ETag, If-Match, If-None-Match ---------------------------------------------------------


def test_document_get_has_a_strong_etag_and_honours_if_none_match(client, project):
    save_id = import_save(client, project, seed_save()).json()["id"]
    url = f"/v1/projects/{project}/saves/{save_id}"
    first = client.get(url)
    etag = first.headers["etag"]
    assert etag.startswith('"') and not etag.startswith("W/")
    assert client.get(url).headers["etag"] == etag
    unchanged = client.get(url, headers={"If-None-Match": etag})
    assert unchanged.status_code == 304 and unchanged.content == b""
    assert client.get(url, headers={"If-None-Match": '"other"'}).status_code == 200


def test_delete_with_a_stale_if_match_is_412_and_deletes_nothing(client, project):
    save_id = import_save(client, project, seed_save()).json()["id"]
    url = f"/v1/projects/{project}/saves/{save_id}"
    etag = client.get(url).headers["etag"]
    assert_problem(client.delete(url, headers={"If-Match": '"stale"'}), 412)
    assert client.get(url).status_code == 200
    assert client.delete(url, headers={"If-Match": etag}).status_code == 204
    assert_problem(client.get(url), 404)


def test_if_match_on_a_changed_document_is_412(client, project):
    save_id = import_save(client, project, seed_save()).json()["id"]
    url = f"/v1/projects/{project}/saves/{save_id}"
    etag = client.get(url).headers["etag"]
    assert client.post(f"{url}/resume", headers={"If-Match": etag}).status_code == 200
    # The resume changed the document: the old ETag no longer matches.
    assert_problem(client.post(f"{url}/resume", headers={"If-Match": etag}), 412)
    assert client.get(url).json()["metadata"]["resume_count"] == 1


def test_project_delete_honours_if_match(client, project):
    import_save(client, project, seed_save())
    etag = client.get(f"/v1/projects/{project}").headers["etag"]
    assert_problem(client.delete(f"/v1/projects/{project}", headers={"If-Match": '"x"'}), 412)
    assert client.delete(f"/v1/projects/{project}", headers={"If-Match": etag}).status_code == 204


# --- Idempotency-Key -------------------------------------------------------------------------


def test_a_retry_with_the_same_key_replays_without_a_second_effect(client, project):
    headers = {"Idempotency-Key": "retry-1"}
    first = import_save(client, project, seed_save(), headers=headers)
    again = import_save(client, project, seed_save(), headers=headers)
    assert first.status_code == again.status_code == 201
    assert again.content == first.content
    assert again.headers["location"] == first.headers["location"]
    assert again.headers["idempotent-replayed"] == "true"
    assert len(client.get(f"/v1/projects/{project}/saves").json()["items"]) == 1


def test_the_same_key_with_another_body_is_a_422(client, project):
    headers = {"Idempotency-Key": "retry-2"}
    assert import_save(client, project, seed_save(), headers=headers).status_code == 201
    other = _save_with("2024-02-01T00:00:00Z")
    body = assert_problem(import_save(client, project, other, headers=headers), 422)
    assert body["errors"][0]["path"] == "header.idempotency-key"
    assert len(client.get(f"/v1/projects/{project}/saves").json()["items"]) == 1


def test_the_same_key_on_another_route_is_a_422(client, project):
    headers = {"Idempotency-Key": "retry-3"}
    assert import_save(client, project, seed_save(), headers=headers).status_code == 201
    assert_problem(import_save(client, project + "-b", seed_save(), headers=headers), 422)


def test_idempotency_keys_belong_to_one_tenant(client, other_client, project):
    headers = {"Idempotency-Key": "shared-name"}
    mine = import_save(client, project, seed_save(), headers=headers)
    theirs = import_save(other_client, project, seed_save(), headers=headers)
    assert mine.status_code == theirs.status_code == 201
    assert "idempotent-replayed" not in theirs.headers


def test_a_failed_request_does_not_burn_its_key(client, project):
    headers = {"Idempotency-Key": "after-failure"}
    assert_problem(import_save(client, project, b"{", headers=headers), 400)
    assert import_save(client, project, b"{", headers=headers).status_code == 400
    fixed = import_save(client, project, seed_save(), headers={"Idempotency-Key": "after-failure"})
    assert fixed.status_code == 201


def test_a_resume_retry_counts_once(client, project):
    save_id = import_save(client, project, seed_save()).json()["id"]
    url = f"/v1/projects/{project}/saves/{save_id}/resume"
    first = client.post(url, headers={"Idempotency-Key": "resume-1"})
    again = client.post(url, headers={"Idempotency-Key": "resume-1"})
    assert first.json()["resume_count"] == again.json()["resume_count"] == 1


# --- Cursor pagination -----------------------------------------------------------------------


def test_pages_cover_every_item_once_newest_first(client, project):
    stamps = [f"2024-01-{day:02d}T00:00:00Z" for day in range(1, 8)]
    ids = [import_save(client, project, _save_with(stamp)).json()["id"] for stamp in stamps]
    seen: list[int] = []
    cursor = None
    while True:
        params = {"limit": 3} | ({"cursor": cursor} if cursor else {})
        page = client.get(f"/v1/projects/{project}/saves", params=params).json()
        assert len(page["items"]) <= 3
        seen += [item["id"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(ids))


def test_a_page_is_stable_when_newer_items_arrive(client, project):
    for day in (1, 2, 3):
        import_save(client, project, _save_with(f"2024-01-0{day}T00:00:00Z"))
    first = client.get(f"/v1/projects/{project}/saves", params={"limit": 2}).json()
    import_save(client, project, _save_with("2024-01-09T00:00:00Z"))
    rest = client.get(
        f"/v1/projects/{project}/saves", params={"limit": 2, "cursor": first["next_cursor"]}
    ).json()
    assert [i["timestamp"] for i in rest["items"]] == ["2024-01-01T00:00:00Z"]


@pytest.mark.parametrize("cursor", ["garbage", "eyJrIjpbXX0", "e30", "!!!"])
def test_a_bad_cursor_is_a_422(client, project, cursor):
    import_save(client, project, seed_save())
    body = assert_problem(
        client.get(f"/v1/projects/{project}/saves", params={"cursor": cursor}), 422
    )
    assert body["errors"][0]["path"] == "query.cursor"


def test_a_cursor_from_another_list_is_a_422(client, project):
    for name in ("a", "b"):
        import_save(client, f"{project}-{name}", seed_save())
    cursor = client.get("/v1/projects", params={"limit": 1}).json()["next_cursor"]
    assert cursor is not None
    response = client.get(f"/v1/projects/{project}-a/saves", params={"cursor": cursor})
    assert_problem(response, 422)


def _paged_lists(app: FastAPI) -> list[str]:
    """Every GET route that takes a cursor, from the served OpenAPI document."""
    return [
        path
        for path, operations in app.openapi()["paths"].items()
        if any(
            parameter["name"] == "cursor"
            for parameter in operations.get("get", {}).get("parameters", [])
        )
    ]


def test_every_list_pages_through_with_its_own_cursors(app, client, project):
    """Each list, one item a page, following ``next_cursor`` to the end: the same items as one
    page of them all. The admin's list of keys answered 500 at its second page (its id's
    column type named no Python type, and the cursor's check asserted one)."""
    world = populate(client, project)
    paged = []
    for path in _paged_lists(app):
        url = world.url(path)
        whole = client.get(url, params={"limit": 500})
        assert whole.status_code == 200, (url, whole.text)
        items, cursor = [], None
        for _ in range(len(whole.json()["items"]) + 1):
            page = client.get(url, params={"limit": 1} | ({"cursor": cursor} if cursor else {}))
            assert page.status_code == 200, (url, page.text)
            items += page.json()["items"]
            cursor = page.json()["next_cursor"]
            if cursor is None:
                break
        assert items == whole.json()["items"], url
        if len(items) > 1:
            paged.append(path)
    # The world holds one of most things: two keys, and the archive's many members.
    assert "/v1/admin/keys" in paged, paged


@pytest.mark.parametrize("limit", [0, -1, 501, "many"])
def test_limit_out_of_range_is_a_422(client, limit):
    assert_problem(client.get("/v1/projects", params={"limit": limit}), 422)


# --- gzip in and out -------------------------------------------------------------------------


def test_a_gzip_request_body_is_decoded(client, project):
    response = client.post(
        f"/v1/projects/{project}/saves",
        content=gzip.compress(python_indent2(seed_save())),
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    assert response.status_code == 201, response.text
    exported = client.get(f"/v1/projects/{project}/saves/{response.json()['id']}")
    assert exported.content == python_indent2(seed_save())


def test_a_gzip_json_model_body_is_decoded(client, project):
    import_save(client, project, seed_save())
    response = client.post(
        f"/v1/projects/{project}/saves:prune",
        content=gzip.compress(b'{"keep_latest": 0}'),
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    assert response.status_code == 200, response.text
    assert response.json() == {"deleted": 1}


def test_a_route_reading_its_own_body_must_declare_it():
    """A route that reads its body from the request (``DecodedRequest.received``) is refused
    when it is declared without a body: the route class would never read one for it."""
    router = APIRouter(route_class=ContextStoreRoute)

    def undeclared(request: DecodedRequest) -> Response:
        return Response(request.received)

    with pytest.raises(TypeError, match="declares no request body"):
        router.add_api_route("/undeclared", undeclared, methods=["POST"])
    router.add_api_route(
        "/declared", undeclared, methods=["POST"], openapi_extra=raw_body("application/json")
    )


def test_a_route_without_a_body_reads_an_absent_one_as_empty(client, project):
    """Sent without a body, a route that parses its own gets empty bytes to refuse (400), as
    when it read the body through a dependency."""
    for headers in ({}, {"Content-Length": "0"}, {"Content-Type": "application/json"}):
        response = client.post(f"/v1/projects/{project}/memory/decisions", headers=headers)
        assert_problem(response, 400)


def test_a_corrupt_gzip_body_is_a_400(client, project):
    response = client.post(
        f"/v1/projects/{project}/saves",
        content=gzip.compress(b'{"a": 1}')[:-6],
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    assert_problem(response, 400)


def _prune_with_gzip(client, project, body):
    return client.post(
        f"/v1/projects/{project}/saves:prune",
        content=body,
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )


def test_a_gzip_body_of_many_members_is_read_as_their_concatenation(client, project):
    """A gzip stream may hold many members, read in turn and joined (RFC 1952): the JSON may
    be split across them, and 200,000 empty ones may come first. Read one member at a time,
    each member's rest of the body was copied: those 4 MB took 34 s of the server's CPU, on
    its event loop, every tenant waiting (a helper's live run, 2026-11-27)."""
    import_save(client, project, seed_save())
    split = gzip.compress(b'{"keep_', mtime=0) + gzip.compress(b'latest": 0}', mtime=0)
    answer = _prune_with_gzip(client, project, split)
    assert answer.status_code == 200 and answer.json() == {"deleted": 1}, answer.text
    empty = gzip.compress(b"", mtime=0) * 200_000
    answer = _prune_with_gzip(client, project, empty + gzip.compress(b'{"keep_latest": 0}'))
    assert answer.status_code == 200 and answer.json() == {"deleted": 0}, answer.text


@pytest.mark.parametrize(
    "after", [b"garbage", b"\x1f\x8b", gzip.compress(b"x")[:-3]], ids=["garbage", "magic", "cut"]
)
def test_what_follows_a_gzip_member_must_be_another_whole_member(client, project, after):
    body = gzip.compress(b'{"keep_latest": 0}') + after
    assert_problem(_prune_with_gzip(client, project, body), 400)


def test_an_unsupported_content_encoding_is_a_415(client, project):
    response = client.post(
        f"/v1/projects/{project}/saves",
        content=b"{}",
        headers={"Content-Type": "application/json", "Content-Encoding": "br"},
    )
    assert_problem(response, 415)


def test_responses_are_gzipped_when_accepted(client, project):
    for day in range(1, 10):
        import_save(client, project, _save_with(f"2024-01-0{day}T00:00:00Z"))
    response = client.get(f"/v1/projects/{project}/saves", headers={"Accept-Encoding": "gzip"})
    assert response.headers["content-encoding"] == "gzip"
    assert len(response.json()["items"]) == 9
    plain = client.get(f"/v1/projects/{project}/saves", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers


# --- body limits -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_limits(database_url):
    app: FastAPI = create_app(
        make_settings(database_url, max_body_bytes=1024, max_bulk_body_bytes=4096)
    )
    with TestClient(app):
        yield app


def test_a_body_over_the_limit_is_a_413_and_stores_nothing(small_limits, tenant, project):
    client = TestClient(
        small_limits, headers={"Authorization": f"Bearer {create_key(small_limits, tenant)}"}
    )
    document = seed_save()
    document["context"]["artifacts"]["big"] = {"file": "x", "content": "x" * 5000}
    assert_problem(import_save(client, project, document), 413)
    assert_problem(client.get(f"/v1/projects/{project}"), 404)
    prune = json.dumps({"keep_latest": 1, "padding": "x" * 2000}).encode()
    response = client.post(
        f"/v1/projects/{project}/saves:prune",
        content=prune,
        headers={"Content-Type": "application/json"},
    )
    assert_problem(response, 413)


def test_a_gzip_bomb_is_a_413(small_limits, tenant, project):
    client = TestClient(
        small_limits, headers={"Authorization": f"Bearer {create_key(small_limits, tenant)}"}
    )
    bomb = gzip.compress(b"[" + b"0," * MIB + b"0]")
    assert len(bomb) < 4096
    response = client.post(
        f"/v1/projects/{project}/saves",
        content=bomb,
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    assert_problem(response, 413)


def test_a_gzip_bomb_split_over_members_is_a_413(small_limits, tenant, project):
    """The limit holds for the members' output together, not for each."""
    client = TestClient(
        small_limits, headers={"Authorization": f"Bearer {create_key(small_limits, tenant)}"}
    )
    part = gzip.compress(b" " * 3000, mtime=0)
    body = gzip.compress(b'{"keep_latest": 0', mtime=0) + part + part + gzip.compress(b"}")
    assert len(body) < 1024
    assert_problem(_prune_with_gzip(client, project, body), 413)


def test_saves_have_the_larger_bulk_limit(small_limits, tenant, project):
    client = TestClient(
        small_limits, headers={"Authorization": f"Bearer {create_key(small_limits, tenant)}"}
    )
    document = seed_save()
    document["context"]["artifacts"]["medium"] = {"file": "x", "content": "x" * 500}
    assert len(python_indent2(document)) > 1024
    assert import_save(client, project, document).status_code == 201
