"""/mcp as an HTTP endpoint: the same keys as every route, the SDK's Host and Origin checks from
the settings, counted in /metrics; and bad tool arguments are tool errors, never a 500."""

import logging

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.conftest import create_key, make_settings
from tests.helpers import assert_problem
from tests.mcp_client import BASE_URL, call_tool, error_text, list_tools
from tests.platform.world import populate, tool_calls

LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}


def _post(app, headers: dict[str, str], base_url: str = BASE_URL):
    return TestClient(app, base_url=base_url).post(
        "/mcp", json=LIST_TOOLS, headers=HEADERS | headers
    )


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer cs_unknown"},
        {"X-API-Key": "cs_unknown"},
        {"Authorization": "Basic x"},
    ],
)
def test_mcp_without_a_valid_key_is_401(app, headers):
    assert_problem(_post(app, headers), 401)


@pytest.mark.parametrize("header", ["Authorization", "X-API-Key"])
def test_mcp_takes_a_key_as_every_route_does(app, tenant, header):
    key = create_key(app, tenant)
    value = f"Bearer {key}" if header == "Authorization" else key
    response = _post(app, {header: value})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert {tool["name"] for tool in response.json()["result"]["tools"]} >= {"list_projects"}


def test_a_request_from_another_host_or_origin_is_refused(app, tenant):
    auth = {"Authorization": f"Bearer {create_key(app, tenant)}"}
    rebound = _post(app, auth, base_url="http://attacker.example")
    assert_problem(rebound, 421)
    foreign = _post(app, auth | {"Origin": "http://attacker.example"})
    assert_problem(foreign, 403)
    assert _post(app, auth | {"Origin": "http://localhost:5173"}).status_code == 200


def test_the_hosts_and_origins_come_from_the_settings(database_url, tenant):
    settings = make_settings(
        database_url,
        host="0.0.0.0",
        allowed_hosts="store.internal:8000",
        allowed_origins="https://ide.example",
    )
    app = create_app(settings)
    with TestClient(app):
        auth = {"Authorization": f"Bearer {create_key(app, tenant)}"}
        assert _post(app, auth, base_url="http://store.internal:8000").status_code == 200
        assert _post(app, auth, base_url="http://other.internal:8000").status_code != 200
        origin = {"Origin": "https://ide.example"}
        assert _post(app, auth | origin, base_url="http://store.internal:8000").status_code == 200


def test_a_host_on_no_loopback_address_is_not_checked_unless_configured(database_url, tenant):
    app = create_app(make_settings(database_url, host="0.0.0.0"))
    with TestClient(app):
        auth = {"Authorization": f"Bearer {create_key(app, tenant)}"}
        assert _post(app, auth, base_url="http://store.internal:8000").status_code == 200


def test_mcp_requests_are_counted_in_the_metrics(app, client):
    key = client.headers["Authorization"].removeprefix("Bearer ")
    call_tool(app, key, "list_projects", {})
    metrics = client.get("/metrics").text
    assert 'route="/mcp"' in metrics
    assert 'method="GET",route="/v1/projects"' in metrics  # the tool's own request


def test_bad_arguments_are_tool_errors_never_a_500(app, client, project, caplog):
    world = populate(client, project)
    key = client.headers["Authorization"].removeprefix("Bearer ")
    tools = {tool.name: tool for tool in list_tools(app, key)}
    caplog.set_level(logging.INFO)
    for name, arguments in tool_calls(world).items():
        required = tools[name].input_schema.get("required", [])
        bad = [
            {},  # every required argument missing
            arguments | {"project": "../admin/keys"},
            arguments | {"project": "x" * 200},
            arguments | {"project": 5, "limit": "many"},
            {**arguments, **{field: {"not": "this"} for field in required}},
        ]
        if "idempotency_key" in tools[name].input_schema["properties"]:
            bad.append(arguments | {"idempotency_key": "k" * 10_000})
        if name == "list_projects":  # no project, nothing required
            bad = [{"limit": "many"}, {"limit": 0}, {"cursor": "!not a cursor"}]
        for case in bad:
            result = call_tool(app, key, name, case)
            text = error_text(result)
            assert "Traceback" not in text and 'File "' not in text, text
    failures = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not failures, [r.getMessage() for r in failures]
    assert not [r for r in caplog.records if getattr(r, "status", 0) >= 500]


@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT", "PATCH"])
def test_mcp_takes_post_only(app, tenant, method):
    """A stateless server has no stream to GET (the SDK held such a GET open, idle, forever)
    and no session to DELETE: 405, as any route answers a method it does not take."""
    client = TestClient(app, base_url=BASE_URL)
    headers = HEADERS | {"Authorization": f"Bearer {create_key(app, tenant)}"}
    response = client.request(method, "/mcp", headers=headers)
    assert_problem(response, 405)
    assert response.headers["allow"] == "POST"


def test_the_sdks_own_refusals_are_problems_as_on_every_route(database_url, tenant):
    """What the SDK answers in plain text before the protocol starts (a body that is not JSON)
    is problem+json at /mcp too, as is a body over the limit (refused before the SDK reads it);
    JSON-RPC errors stay JSON-RPC."""
    app = create_app(make_settings(database_url, max_bulk_body_bytes=10_000))
    with TestClient(app, base_url=BASE_URL) as mcp:
        auth = HEADERS | {"Authorization": f"Bearer {create_key(app, tenant)}"}
        wrong_type = mcp.post("/mcp", content=b"{}", headers=auth | {"Content-Type": "text/plain"})
        assert "Content-Type" in assert_problem(wrong_type, 400)["detail"]
        too_large = mcp.post("/mcp", json={**LIST_TOOLS, "pad": "x" * 20_000}, headers=auth)
        assert_problem(too_large, 413)
        not_json = mcp.post(
            "/mcp", content=b"{", headers=auth | {"Content-Type": "application/json"}
        )
        assert not_json.status_code == 400, not_json.text
        assert not_json.headers["content-type"].startswith("application/json")
        assert not_json.json()["error"]["code"] == -32700  # parse error, for MCP clients
