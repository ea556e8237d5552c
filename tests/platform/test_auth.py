"""API keys: hashed, scoped, bound to one tenant; another tenant's data is a 404."""

import secrets

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import text

from app.core.config import AuthMode, Settings
from app.core.db import session_scope
from app.core.security import Scope, hash_key
from app.keys import service as keys
from app.keys.repository import ApiKeyRepository
from app.main import create_app
from tests.conftest import client_for, create_key, make_settings
from tests.helpers import LOOPBACK, assert_problem, import_save, seed_save
from tests.platform.world import api_routes, populate, readable_state, send


def test_missing_key_is_401_with_a_challenge(app: FastAPI, project):
    response = client_for(app, None).get("/v1/projects")
    problem = assert_problem(response, 401)
    assert response.headers["www-authenticate"] == "Bearer"
    # Whole: the redaction every problem takes once read its example header as a credential.
    assert "REDACTED" not in problem["detail"] and "X-API-Key" in problem["detail"]


def test_unknown_key_is_401(app: FastAPI):
    assert_problem(client_for(app, "cs_not-a-real-key").get("/v1/projects"), 401)


def test_x_api_key_header_is_accepted(app: FastAPI, tenant):
    key = create_key(app, tenant, Scope.read)
    response = client_for(app, None).get("/v1/projects", headers={"X-API-Key": key})
    assert response.status_code == 200


@pytest.mark.parametrize("padding", [" ", "\t", "  \t "])
def test_both_key_headers_ignore_surrounding_whitespace(app: FastAPI, tenant, padding):
    key = create_key(app, tenant, Scope.read)
    anonymous = client_for(app, None)
    for headers in (
        {"X-API-Key": f"{padding}{key}{padding}"},
        {"Authorization": f"Bearer {padding}{key}{padding}"},
    ):
        assert anonymous.get("/v1/projects", headers=headers).status_code == 200, headers


def test_keys_are_stored_hashed(app: FastAPI, engine, tenant):
    key = create_key(app, tenant)
    with engine.connect() as connection:
        stored = connection.execute(
            text("SELECT key_hash, prefix FROM api_keys WHERE tenant = :t"), {"t": tenant}
        ).all()
    assert len(stored) == 1
    assert key not in stored[0].key_hash and len(stored[0].key_hash) == 64
    assert key.startswith(stored[0].prefix) and len(stored[0].prefix) < len(key) // 2


def test_a_read_key_cannot_write(app: FastAPI, tenant, project):
    reader = client_for(app, create_key(app, tenant, Scope.read))
    assert_problem(import_save(reader, project, seed_save()), 403)
    assert_problem(reader.delete(f"/v1/projects/{project}"), 403)
    assert reader.get("/v1/projects").status_code == 200


def test_a_write_key_cannot_read(app: FastAPI, tenant, project):
    writer = client_for(app, create_key(app, tenant, Scope.write))
    assert import_save(writer, project, seed_save()).status_code == 201
    assert_problem(writer.get("/v1/projects"), 403)


def test_another_tenant_sees_nothing_and_changes_nothing(client, other_client, project):
    save_id = import_save(client, project, seed_save()).json()["id"]
    base = f"/v1/projects/{project}"
    assert_problem(other_client.get(base), 404)
    assert_problem(other_client.get(f"{base}/saves"), 404)
    assert_problem(other_client.get(f"{base}/saves/{save_id}"), 404)
    assert_problem(other_client.get(f"{base}/saves/latest"), 404)
    assert_problem(other_client.delete(f"{base}/saves/{save_id}"), 404)
    assert_problem(other_client.post(f"{base}/saves/{save_id}/resume"), 404)
    assert_problem(other_client.delete(base), 404)
    assert other_client.get("/v1/projects").json()["items"] == []
    # The other tenant writing to the same name gets a project of its own.
    assert import_save(other_client, project, seed_save()).status_code == 201
    assert client.get(f"{base}/saves").json()["items"][0]["id"] == save_id
    assert len(client.get(f"{base}/saves").json()["items"]) == 1
    assert client.get(f"{base}/saves/{save_id}").status_code == 200


def test_admin_creates_lists_and_revokes_keys(client, app: FastAPI, tenant):
    created = client.post("/v1/admin/keys", json={"scopes": ["read"], "name": "ci"})
    assert created.status_code == 201
    body = created.json()
    assert body["tenant"] == tenant and body["scopes"] == ["read"]
    new_key = body["key"]
    new_client = client_for(app, new_key)
    assert new_client.get("/v1/projects").status_code == 200

    listed = client.get("/v1/admin/keys").json()["items"]
    assert body["id"] in [key["id"] for key in listed]
    assert new_key not in str(listed)

    assert client.delete(f"/v1/admin/keys/{body['id']}").status_code == 204
    assert_problem(new_client.get("/v1/projects"), 401)


def test_a_revoke_honours_if_match_as_every_delete_does(client, app: FastAPI):
    """A key's GET gives its version; a revoke naming another version changes nothing (412),
    one naming it revokes, and the revoke gives the key a new version."""
    created = client.post("/v1/admin/keys", json={"scopes": ["read"], "name": "ci"}).json()
    url = f"/v1/admin/keys/{created['id']}"
    got = client.get(url)
    assert got.status_code == 200
    etag = got.headers["ETag"]
    assert got.json() == {name: value for name, value in created.items() if name != "key"}
    assert created["key"] not in got.text
    assert client.get(url, headers={"If-None-Match": etag}).status_code == 304

    assert_problem(client.delete(url, headers={"If-Match": '"stale"'}), 412)
    assert client_for(app, created["key"]).get("/v1/projects").status_code == 200
    assert client.delete(url, headers={"If-Match": etag}).status_code == 204
    assert_problem(client_for(app, created["key"]).get("/v1/projects"), 401)

    revoked = client.get(url)
    assert revoked.json()["revoked_at"] is not None and revoked.headers["ETag"] != etag
    assert_problem(client.delete(url, headers={"If-Match": etag}), 412)
    assert client.delete(url, headers={"If-Match": revoked.headers["ETag"]}).status_code == 204
    assert_problem(client.delete("/v1/admin/keys/0123456789abcdef", headers={"If-Match": "*"}), 412)
    assert_problem(client.get("/v1/admin/keys/0123456789abcdef"), 404)


def test_admin_routes_need_the_admin_scope(app: FastAPI, tenant):
    writer = client_for(app, create_key(app, tenant, Scope.read, Scope.write))
    assert_problem(writer.post("/v1/admin/keys", json={"scopes": ["read"]}), 403)
    assert_problem(writer.get("/v1/admin/keys"), 403)
    assert_problem(writer.get("/v1/admin/keys/0123456789abcdef"), 403)


def test_admin_cannot_revoke_another_tenants_key(client, other_client):
    other_key = other_client.post("/v1/admin/keys", json={"scopes": ["read"]}).json()
    assert_problem(client.delete(f"/v1/admin/keys/{other_key['id']}"), 404)
    assert_problem(client.get(f"/v1/admin/keys/{other_key['id']}"), 404)


def test_a_key_for_another_tenant_cannot_be_asked_for(client, tenant):
    """The tenant is the caller's own; a field naming one is refused, not silently ignored."""
    response = client.post("/v1/admin/keys", json={"scopes": ["read"], "tenant": "t-other"})
    body = assert_problem(response, 422)
    assert [error["path"] for error in body["errors"]] == ["/tenant"]
    assert [key["tenant"] for key in client.get("/v1/admin/keys").json()["items"]] == [tenant]


def test_unknown_scope_is_a_422(client):
    body = assert_problem(client.post("/v1/admin/keys", json={"scopes": ["root"]}), 422)
    assert body["errors"][0]["path"] == "/scopes/0"


def test_auth_off_acts_as_the_default_tenant(database_url):
    from fastapi.testclient import TestClient

    with TestClient(_auth_off(database_url), base_url=LOOPBACK) as anonymous:
        assert anonymous.get("/v1/projects").status_code == 200
        project = "auth-off-" + __import__("secrets").token_hex(4)
        assert import_save(anonymous, project, seed_save()).status_code == 201
        names = [
            p["name"] for p in anonymous.get("/v1/projects", params={"limit": 500}).json()["items"]
        ]
        assert project in names


def _auth_off(database_url: str, **settings: object) -> FastAPI:
    return create_app(make_settings(database_url, auth=AuthMode.off, **settings))


def _decision(project: str) -> tuple[str, dict[str, str]]:
    return f"/v1/projects/{project}/memory/decisions", {"id": "dec-1", "decision": "x"}


@pytest.mark.parametrize(
    ("base_url", "headers", "status"),
    [
        # A page that pointed its own name at 127.0.0.1: its browser sends that name.
        ("http://attacker.example", {}, 421),
        ("http://attacker.example:8000", {"Origin": "http://attacker.example:8000"}, 421),
        ("http://127.0.0.1.attacker.example:8000", {}, 421),
        # A page on another site posting to the loopback address.
        (LOOPBACK, {"Origin": "http://attacker.example"}, 403),
        (LOOPBACK, {"Origin": "http://127.0.0.1.attacker.example"}, 403),
        (LOOPBACK, {"Origin": "null"}, 403),
    ],
)
def test_auth_off_refuses_a_rebound_host_or_a_foreign_origin(
    database_url, base_url, headers, status
):
    """With no key to stop it, a browser page could otherwise read and write the whole store."""
    project = "rebound-" + secrets.token_hex(4)
    path, body = _decision(project)
    with TestClient(_auth_off(database_url), base_url=base_url) as page:
        assert_problem(page.post(path, json=body, headers=headers), status)
        assert_problem(page.get("/v1/projects", headers=headers), status)
    with TestClient(_auth_off(database_url), base_url=LOOPBACK) as local:
        assert_problem(local.get(path), 404)  # nothing was written: not even the project


@pytest.mark.parametrize(
    "headers",
    [
        # `name:*` is the name on a port, a number: not a longer name that starts alike.
        {"Host": "localhost:8000.attacker.example"},
        {"Host": "127.0.0.1:8000@attacker.example"},
        {"Host": "localhost:"},
        {"Origin": "http://localhost:8000.attacker.example"},
        {"Origin": "http://127.0.0.1:8000@attacker.example"},
        {"Origin": "http://localhost:"},
    ],
)
def test_auth_off_takes_any_port_of_a_loopback_name_but_no_longer_name(database_url, headers):
    with TestClient(_auth_off(database_url), base_url=LOOPBACK) as page:
        response = page.get("/v1/projects", headers=headers)
        assert_problem(response, 421 if "Host" in headers else 403)


@pytest.mark.parametrize(
    "path", ["/v1/projects", "/docs", "/openapi.json", "/metrics", "/healthz", "/mcp", "/nowhere"]
)
def test_auth_off_checks_the_host_on_every_path(database_url, path):
    with TestClient(_auth_off(database_url), base_url="http://attacker.example") as page:
        assert_problem(page.get(path), 421)
        assert_problem(page.post(path, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}), 421)


@pytest.mark.parametrize(
    ("base_url", "headers"),
    [
        (LOOPBACK, {}),
        ("http://localhost:8000", {"Origin": "http://localhost:8000"}),  # Swagger UI's calls
        ("http://[::1]:8000", {}),
        ("http://127.0.0.1", {"Origin": "http://127.0.0.1"}),
    ],
)
def test_auth_off_answers_the_loopback_names(database_url, base_url, headers):
    with TestClient(_auth_off(database_url), base_url=base_url) as local:
        assert local.get("/v1/projects", headers=headers).status_code == 200


def test_the_allowed_hosts_and_origins_extend_the_loopback_names(database_url):
    app = _auth_off(
        database_url, allowed_hosts="store.local:*", allowed_origins="https://ide.example"
    )
    with TestClient(app, base_url="http://store.local:9000") as named:
        assert (
            named.get("/v1/projects", headers={"Origin": "https://ide.example"}).status_code == 200
        )
        assert_problem(named.get("/v1/projects", headers={"Origin": "https://x.example"}), 403)
    with TestClient(app, base_url="http://store.local") as portless:  # `name:*` needs a port
        assert_problem(portless.get("/v1/projects"), 421)


def test_with_auth_on_a_foreign_host_meets_the_key_check(client):
    """The rebinding check is for AUTH=off: with auth on, a page holds no key."""
    assert (
        client.get("/v1/projects", headers={"Origin": "http://attacker.example"}).status_code == 200
    )


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.4", "example.org", "::"])
def test_auth_off_is_refused_off_loopback(host):
    with pytest.raises(ValueError, match="loopback"):
        Settings(auth=AuthMode.off, host=host)


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "localhost", "127.0.0.2"])
def test_auth_off_is_allowed_on_loopback(host):
    assert Settings(auth=AuthMode.off, host=host).host == host


def _revoke_in_the_database(app: FastAPI, key: str) -> None:
    """As the command line does, from outside the server's request path."""
    with session_scope(app.state.database.write_session()) as session:
        record = ApiKeyRepository(session).get_active_by_hash(hash_key(key))
        assert record is not None
        keys.revoke_key(session, None, record.id)


def test_a_known_key_revoked_elsewhere_is_refused_at_once(app: FastAPI, tenant):
    key = create_key(app, tenant)
    client = client_for(app, key)
    assert client.get("/v1/projects").status_code == 200  # now the server knows the key
    _revoke_in_the_database(app, key)
    assert_problem(client.get("/v1/projects"), 401)


def test_a_known_key_revoked_elsewhere_is_refused_on_every_route(app: FastAPI, client, tenant):
    """Each route's sample request, with a key the server knows and another process revoked:
    401 everywhere (archive exports and imports, replays and key routes included), and nothing
    changes."""
    routes = api_routes(app)
    world = populate(client, "revoked-" + secrets.token_hex(4))
    # The key listing grows with the keys made here; the world's own key is checked below.
    documents = [route for route in routes if route != ("GET", "/v1/admin/keys")]
    before = readable_state(client, world, documents)
    for route in routes:
        key = create_key(app, tenant)
        known = client_for(app, key)
        assert known.get("/v1/projects").status_code == 200
        _revoke_in_the_database(app, key)
        assert_problem(send(known, world, route), 401)
    assert readable_state(client, world, documents) == before
    listed = client.get("/v1/admin/keys", params={"limit": 500}).json()["items"]
    assert [key["revoked_at"] for key in listed if key["id"] == world.key_id] == [None]


def test_a_known_key_revoked_elsewhere_is_not_told_whether_a_project_exists(app: FastAPI, tenant):
    """A prune (a write that never creates its project) by a revoked key: 401 for a project
    that does not exist, as for one that does, not the 404 that would say which (from a
    review: the project was looked for before the key was confirmed)."""
    key = create_key(app, tenant)
    known = client_for(app, key)
    assert known.get("/v1/projects").status_code == 200  # now the server knows the key
    _revoke_in_the_database(app, key)
    missing = f"/v1/projects/missing-{secrets.token_hex(3)}/saves:prune"
    assert_problem(known.post(missing, json={"keep_latest": 1}), 401)


def test_a_known_key_revoked_elsewhere_creates_no_project(app: FastAPI, client, tenant):
    """A write confirms its remembered key in the statement that creates or touches the
    project: revoked, the write is a 401 that leaves no project behind, nor a touched one."""
    decision = {"id": "dec-001", "decision": "d", "timestamp": 1}
    keys_by_project = {project: create_key(app, tenant) for project in ("new-project", "touched")}
    knowns = {project: client_for(app, key) for project, key in keys_by_project.items()}
    # Both keys known to the server (a refused key is forgotten: one key a project, so that
    # each write below is refused by its own upsert, not by a fresh look-up).
    assert (
        knowns["touched"].post("/v1/projects/touched/memory/decisions", json=decision).status_code
        == 201
    )
    assert knowns["new-project"].get("/v1/projects").status_code == 200
    touched = client.get("/v1/projects/touched").json()
    for key in keys_by_project.values():
        _revoke_in_the_database(app, key)
    for project, known in knowns.items():
        url = f"/v1/projects/{project}/memory/decisions"
        assert_problem(known.post(url, json=decision | {"id": "dec-002"}), 401)
    assert_problem(client.get("/v1/projects/new-project"), 404)
    assert client.get("/v1/projects/touched").json() == touched
    assert [item["id"] for item in client.get(url).json()["items"]] == ["dec-001"]


def test_without_the_cache_a_revoke_elsewhere_applies_at_once(database_url, tenant):
    application = create_app(make_settings(database_url, auth_cache_seconds=0))
    with TestClient(application):
        key = create_key(application, tenant)
        client = client_for(application, key)
        assert client.get("/v1/projects").status_code == 200
        _revoke_in_the_database(application, key)
        assert_problem(client.get("/v1/projects"), 401)


@pytest.mark.parametrize("idempotency_key", ["", "k" * 256])
def test_who_is_asking_comes_before_a_bad_idempotency_key(app: FastAPI, tenant, idempotency_key):
    """Without a key 401, with a read-only key 403: before the header's own 422, also on a
    POST without a body (whose route class does not authenticate before the dependencies)."""
    url = "/v1/projects/p/saves/1/resume"
    headers = {"Idempotency-Key": idempotency_key}
    assert_problem(client_for(app, None).post(url, headers=headers), 401)
    reader = client_for(app, create_key(app, tenant, Scope.read))
    assert_problem(reader.post(url, headers=headers), 403)


def test_whether_the_key_may_comes_before_anything_else_of_the_request(app: FastAPI, tenant):
    """A key without the route's scope gets its 403 before the body's media type (415), size
    (413) or the path's own checks (422) are looked at, on a write route and a read route."""
    reader = client_for(app, create_key(app, tenant, Scope.read))
    decisions = "/v1/projects/p/memory/decisions"
    assert_problem(
        reader.post(decisions, content=b"x", headers={"Content-Type": "text/plain"}), 403
    )
    too_large = b"{" + b" " * app.state.settings.max_body_bytes + b"}"
    assert_problem(reader.post(decisions, content=too_large), 403)
    assert_problem(reader.post("/v1/projects/bad%20name/memory/decisions", json={}), 403)
    writer = client_for(app, create_key(app, tenant, Scope.write))
    assert_problem(writer.get("/v1/projects/bad%20name/memory/decisions"), 403)
