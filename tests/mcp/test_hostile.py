"""/mcp against a hostile caller: crafted names reach no other route, malformed requests are
JSON-RPC errors (never a logged traceback), two tenants at once each act as themselves, and
with AUTH=off the tools work on the loopback address the rebinding check answers."""

import asyncio
import base64
import json
import logging
import secrets
from typing import Any

import anyio
import httpx2
import pytest
from fastapi.testclient import TestClient
from starlette.requests import Request

from app.core.config import AuthMode
from app.core.redaction import RequestRedactions
from app.formats import jsondoc
from app.main import create_app
from app.mcp_server import http as mcp_http
from tests.conftest import make_settings
from tests.helpers import LOOPBACK, http_scope, seed_save
from tests.mcp_client import BASE_URL, key_headers, key_of
from tests.platform.world import populate, tool_calls

HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
INVALID_PARAMS = -32602
DECISION = {"id": "dec-1", "decision": "x"}


def _rpc(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def _post(app, key: str | None, method: str, params: dict[str, Any]) -> dict[str, Any]:
    client = TestClient(app, base_url=BASE_URL)
    response = client.post("/mcp", json=_rpc(method, params), headers=HEADERS | key_headers(key))
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def _no_error_logged(caplog: pytest.LogCaptureFixture) -> None:
    failures = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not failures, [r.getMessage() for r in failures]


def test_with_auth_off_the_tools_answer_on_the_loopback_address(database_url):
    """The tools' own requests pass the rebinding check the caller's request passed."""
    project = "auth-off-" + secrets.token_hex(4)
    app = create_app(make_settings(database_url, auth=AuthMode.off))
    with TestClient(app, base_url=LOOPBACK) as local:
        decision = {"id": "dec-1", "decision": "x"}
        response = local.post(f"/v1/projects/{project}/memory/decisions", json=decision)
        assert response.status_code == 201, response.text
        listed = _post(app, None, "tools/call", {"name": "list_projects", "arguments": {}})
        assert not listed["result"].get("isError"), listed
        names = [item["name"] for item in listed["result"]["structuredContent"]["items"]]
        assert project in names
        uri = f"context-store://{project}/.autonomous/context/key-decisions.json"
        read = _post(app, None, "resources/read", {"uri": uri})
        assert "dec-1" in read["result"]["contents"][0]["text"], read


# A name that, put into a path unescaped, is another route or a query of this one.
CRAFTED = ["../admin/keys?", "..", ".", "p?x=1", "p#x", "a/b", "p%2F..%2F..%2Fadmin%2Fkeys?"]


@pytest.mark.parametrize("name", CRAFTED)
def test_a_crafted_name_in_a_prompt_reaches_no_other_route(app, client, project, name, caplog):
    """The prompt's arguments have no schema: the name goes into the path as one segment, and
    the route refuses it (a 404 or a 422), never another route's answer."""
    assert client.post(f"/v1/projects/{project}/memory/decisions", json=DECISION).is_success
    caplog.set_level(logging.INFO)
    for arguments in (
        {"project": name, "agent": "a"},
        {"project": project, "agent": "a", "feature": name},
    ):
        answer = _post(
            app,
            key_of(client),
            "prompts/get",
            {"name": "resume_where_i_left_off", "arguments": arguments},
        )
        error = answer["error"]
        assert error["code"] == INVALID_PARAMS, answer
        assert error["message"].startswith(("404 ", "422 ")), answer
    requested = [getattr(r, "route", None) for r in caplog.records]
    assert "/v1/admin/keys" not in requested
    _no_error_logged(caplog)


@pytest.mark.parametrize(
    "uri",
    [
        "context-store://../.autonomous/context/key-decisions.json",
        "context-store://./.autonomous/context/key-decisions.json",
        "context-store://..%2Fadmin%2Fkeys%3F/.autonomous/context/key-decisions.json",
        "context-store://{project}/features/../context.json",
        "context-store://{project}/memory/agents/../working_context_snapshot.json",
        "context-store://{project}/.atari/runs/../state.json",
        "context-store:///mdan/mdan-save-1.json",
    ],
)
def test_a_crafted_resource_uri_reaches_no_other_route(app, client, project, uri, caplog):
    assert client.post(f"/v1/projects/{project}/memory/decisions", json=DECISION).is_success
    caplog.set_level(logging.INFO)
    answer = _post(app, key_of(client), "resources/read", {"uri": uri.format(project=project)})
    assert "error" in answer, answer
    assert "/v1/admin/keys" not in [getattr(r, "route", None) for r in caplog.records]
    _no_error_logged(caplog)


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("resources/list", {"cursor": "!not a cursor"}),
        # Nested past any parser's depth: an error of the cursor, not of the server.
        ("resources/list", {"cursor": base64.urlsafe_b64encode(b"[" * 100_000).decode()}),
        ("resources/list", {"cursor": base64.urlsafe_b64encode(b'[null, "x"]').decode()}),
        (
            "prompts/get",
            {"name": "resume_where_i_left_off", "arguments": {"project": "", "agent": "a"}},
        ),
        ("prompts/get", {"name": "resume_where_i_left_off", "arguments": {}}),
        ("prompts/get", {"name": "resume_where_i_left_off", "arguments": {"agent": "a"}}),
        ("prompts/get", {"name": "no_such_prompt", "arguments": {}}),
    ],
)
def test_bad_params_are_an_invalid_params_error_never_a_traceback(
    app, client, method, params, caplog
):
    caplog.set_level(logging.INFO)
    answer = _post(app, key_of(client), method, params)
    assert answer["error"]["code"] == INVALID_PARAMS, answer
    _no_error_logged(caplog)


def test_two_tenants_at_once_each_see_only_their_own(app, client, other_client):
    """Each request's tools send its own caller's key, however the calls interleave."""
    mine, theirs = "mine-" + secrets.token_hex(4), "theirs-" + secrets.token_hex(4)
    for tenant, name in ((client, mine), (other_client, theirs)):
        response = tenant.post(f"/v1/projects/{name}/memory/decisions", json=DECISION)
        assert response.status_code == 201, response.text
    seen: dict[str, list[set[str]]] = {mine: [], theirs: []}

    async def call(key: str, own: str) -> None:
        async with httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=app), base_url=BASE_URL
        ) as http:
            response = await http.post(
                "/mcp",
                json=_rpc("tools/call", {"name": "list_projects", "arguments": {}}),
                headers=HEADERS | key_headers(key),
            )
        items = response.json()["result"]["structuredContent"]["items"]
        seen[own].append({item["name"] for item in items})

    async def both() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(10):
                group.start_soon(call, key_of(client), mine)
                group.start_soon(call, key_of(other_client), theirs)

    anyio.run(both)
    assert seen[mine] == [{mine}] * 10
    assert seen[theirs] == [{theirs}] * 10


SECRET = "sk-ant-api03-Zq7Wk2Lm9Xp4Rt6Yv8Bn3Cd5"


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("list_projects", {"limit": SECRET}),
        ("latest_mdan_save", {"project": f"{SECRET}/x"}),
        ("search_memory", {"project": "p", "kind": SECRET}),
        ("end_iteration", {"project": "p", "run": "r", "bead_id": "b", "outcome": SECRET}),
    ],
)
def test_a_rejected_argument_is_not_echoed(app, client, name, arguments):
    """A key pasted into the wrong argument: the error names the argument, not its value."""
    answer = _post(app, key_of(client), "tools/call", {"name": name, "arguments": arguments})
    result = answer["result"]
    assert result["isError"], answer
    text = result["content"][0]["text"]
    assert "Zq7Wk2" not in text, text
    assert next(iter(arguments.keys() - {"project", "run", "bead_id"}), "project") in text, text


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        (
            "append_agent_memory",
            {"project": "p", "agent": "a", "memory": "raw-traces", "items": [0] * 20_000},
        ),
        (
            "append_agent_memory",
            {"project": "p", "agent": "a", "memory": "raw-traces", "items": [{}] * 20_000},
        ),
        (
            "add_handover",
            {
                "project": "p",
                "feature": "f",
                "from_agent": "a",
                "to_agent": "b",
                "task_completed": "t",
                "message": "m",
                "critical_points": [0] * 20_000,
            },
        ),
    ],
    ids=["items not objects", "items empty", "points not strings"],
)
def test_a_flood_of_wrong_entries_is_answered_with_the_first(app, client, name, arguments):
    """Each wrong entry was one line of the tool's error (pydantic's, or the problem's faults),
    and cost the server what listing it cost: the error now names a bounded few."""
    answer = _post(app, key_of(client), "tools/call", {"name": name, "arguments": arguments})
    result = answer["result"]
    assert result["isError"], answer
    assert len(result["content"][0]["text"]) < 16 * 1024, result["content"][0]["text"][:500]


@pytest.mark.parametrize(
    "path",
    [
        "features/none/context.json",
        "features/none/workflow.json",
        ".atari/runs/none/state.json",
        "memory/agents/none/working_context_snapshot.json",
        "mdan/mdan-save-1.json",
        "no/such/file.json",
    ],
)
def test_a_resource_that_does_not_exist_is_not_found_never_an_internal_error(
    app, client, project, path, caplog
):
    """SEP-2164 (MCP 2026-07-28): resource not found is -32602 with the URI in `data`, as the
    SDK's own ResourceNotFoundError answers; -32002 is retired. A client's mistake is not
    -32603 (internal error) and logs no traceback."""
    assert client.post(f"/v1/projects/{project}/memory/decisions", json=DECISION).is_success
    caplog.set_level(logging.INFO)
    uri = f"context-store://{project}/{path}"
    answer = _post(app, key_of(client), "resources/read", {"uri": uri})
    assert answer["error"]["code"] == INVALID_PARAMS, answer
    assert uri in answer["error"]["message"], answer
    assert answer["error"]["data"] == {"uri": uri}, answer
    _no_error_logged(caplog)


def test_another_tenants_resource_is_not_found(app, client, other_client, project):
    assert client.post(f"/v1/projects/{project}/memory/decisions", json=DECISION).is_success
    uri = f"context-store://{project}/.autonomous/context/key-decisions.json"
    answer = _post(app, key_of(other_client), "resources/read", {"uri": uri})
    assert answer["error"]["code"] == INVALID_PARAMS, answer
    assert uri in answer["error"]["message"] and "404" in answer["error"]["message"], answer


@pytest.mark.parametrize(
    ("method", "params"),
    [
        (SECRET, {}),
        ("tools/call", {"name": SECRET, "arguments": {}}),
        ("resources/read", {"uri": SECRET}),
        ("prompts/get", {"name": SECRET}),
        ("resources/read", {"uri": f"context-store://p/{SECRET}"}),
    ],
    ids=["method", "tool", "uri", "prompt", "path in a uri"],
)
def test_an_unknown_name_is_never_echoed_with_a_secret_in_it(app, client, method, params):
    """The SDK's errors name the method, tool, resource or prompt that was not found: a key
    pasted there is redacted, as in every problem."""
    answer = _post(app, key_of(client), method, params)
    assert "error" in answer or answer["result"].get("isError"), answer
    assert "Zq7Wk2" not in json.dumps(answer), answer


@pytest.mark.parametrize(
    "request_id",
    [SECRET, f"Bearer {SECRET}", f"password={SECRET}"],
    ids=["key", "bearer", "assignment"],
)
def test_a_secret_sent_as_the_request_id_is_never_echoed(app, client, request_id):
    """JSON-RPC answers with the request's id: one holding a secret is answered redacted, as
    the service's own X-Request-ID is replaced, even though the caller then cannot match it."""
    answer = TestClient(app, base_url=BASE_URL).post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": request_id, "method": "ping"},
        headers=HEADERS | key_headers(key_of(client)),
    )
    assert answer.status_code == 200, answer.text
    assert "result" in answer.json(), answer.text
    assert "Zq7Wk2" not in answer.text, answer.text


def test_a_result_is_sent_as_the_route_answered_it_never_walked(app, client, monkeypatch):
    """A result's only part the caller sent is its id; the rest is the routes' answers, their
    documents redacted as they were stored. A stored save keeps the names before its markers
    (``password=[REDACTED:api_key]``), in which the scan finds a head: walked whole for a
    secret, a 10 MB save's read cost 1.9 s of CPU."""
    document = seed_save()
    document["context"]["conversation_history"].append(
        {"role": "user", "content": f"password={SECRET} and Bearer {SECRET}"}
    )
    stored = client.post(
        "/v1/projects/p/saves",
        content=json.dumps(document),
        headers={"Content-Type": "application/json"},
    )
    assert stored.status_code == 201, stored.text
    walked = []
    monkeypatch.setattr(mcp_http, "json_without_secrets", lambda body: walked.append(body) or body)
    call = {"name": "latest_mdan_save", "arguments": {"project": "p"}}
    answer = (
        TestClient(app, base_url=BASE_URL)
        .post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": "req-1", "method": "tools/call", "params": call},
            headers=HEADERS | key_headers(key_of(client)),
        )
        .json()
    )
    text = answer["result"]["content"][0]["text"]
    assert text == client.get("/v1/projects/p/saves/latest").text
    assert "password=[REDACTED:" in text and "Zq7Wk2" not in text
    assert walked == []


def test_a_result_is_not_walked_when_its_id_is_read_past_a_wide_character():
    """The id is read from the answer's first bytes, whose cut may fall inside a character
    after it: that is no reason to walk the whole answer (1.5 s of CPU for 5.8 MB)."""
    walked: list[bytes] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mcp_http, "json_without_secrets", lambda b: walked.append(b) or b)
        for shift in range(4):
            body = _compact(
                {"jsonrpc": "2.0", "id": "req-1", "result": {"text": "x" * shift + "é" * 3000}}
            )
            assert mcp_http._answer_without_secrets(body) is body
    assert walked == []
    secret = _compact({"jsonrpc": "2.0", "id": SECRET, "result": {"text": "é" * 3000}})
    answer = mcp_http._answer_without_secrets(secret)
    assert "Zq7Wk2" not in answer.decode() and json.loads(answer)["result"]["text"] == "é" * 3000


def _compact(answer: dict[str, Any]) -> bytes:
    """An answer as the SDK writes it (pydantic: no spaces, characters as they are)."""
    return json.dumps(answer, ensure_ascii=False, separators=(",", ":")).encode()


def _tool_result(document: dict[str, Any], **result: Any) -> bytes:
    content = [{"type": "text", "text": json.dumps(document, indent=2)}]
    return _compact(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "result": {"content": content, "structuredContent": {"document": document}} | result,
        }
    )


def test_a_tools_result_is_told_from_an_error_by_its_bytes_never_parsed(monkeypatch):
    """A read answers its document twice (text and structured content); parsing the answer
    to learn whether it is an error held the event loop 250 ms for a 48 MB save (json's parser
    runs in C, holding the interpreter's lock, in a worker thread too). A document's own
    ``error`` members and values are no error of the answer."""
    document = {"error": "boom", "errors": [{"error": {"code": 1}}], "isError": False}
    parsed: list[object] = []
    original = json.loads
    monkeypatch.setattr(json, "loads", lambda *a, **k: parsed.append(a) or original(*a, **k))
    for body in (_tool_result(document), _tool_result(document, isError=False)):
        assert mcp_http._answer_without_secrets(body) is body
    assert parsed == []


def test_a_document_holding_its_own_is_error_member_is_no_tools_error(monkeypatch):
    """``"isError":true`` in the bytes may be a member of the document the tool read: the
    answer is then parsed, and the result's own member tells."""
    walked: list[bytes] = []
    monkeypatch.setattr(mcp_http, "json_without_secrets", lambda b: walked.append(b) or b)
    body = _tool_result({"tool_calls": [{"isError": True}]})
    assert mcp_http._answer_without_secrets(body) is body
    assert walked == []


@pytest.mark.parametrize(
    "answer",
    [
        {"jsonrpc": "2.0", "id": 3, "result": {"content": [], "isError": True}},
        {"jsonrpc": "2.0", "id": 3, "error": {"code": -32602, "message": "x"}},
        [{"jsonrpc": "2.0", "id": 3, "result": {}}],
    ],
    ids=["tool error", "error", "another shape"],
)
def test_an_error_or_an_answer_of_another_shape_is_redacted_whole(answer):
    """With redaction off too: an error may quote what the caller sent."""
    quoted = f"password={SECRET}"
    body = _compact(answer).replace(b'"x"', json.dumps(quoted).encode())
    if b"content" in body:
        body = body.replace(b"[]", _compact([{"type": "text", "text": quoted}]))
    if isinstance(answer, list):
        body = body.replace(b"{}", _compact({"text": quoted}))
    assert SECRET.encode() in body
    for enabled in (True, False):
        with RequestRedactions(enabled=enabled):
            assert SECRET.encode() not in mcp_http._answer_without_secrets(body)


def test_a_result_whose_id_is_read_past_its_start_is_parsed_and_kept_with_redaction_off():
    """An id longer than the answer's start that is read: the answer is parsed to tell a
    result, which redaction off sends as it came (a stored document's own text included)."""
    document = {"text": f"password={SECRET}"}
    for request_id in ("r" * 5000, "ключ-" * 1000):
        body = _compact({"jsonrpc": "2.0", "id": request_id, "result": document})
        with RequestRedactions(enabled=False):
            assert mcp_http._answer_without_secrets(body) is body
        with RequestRedactions(enabled=True):
            assert SECRET.encode() not in mcp_http._answer_without_secrets(body)


def test_a_wide_id_holding_a_secret_is_redacted_where_it_stands(monkeypatch):
    """Where the id ends is counted in bytes: the result after it is never walked."""
    walked: list[bytes] = []
    monkeypatch.setattr(mcp_http, "json_without_secrets", lambda b: walked.append(b) or b)
    body = _compact({"jsonrpc": "2.0", "id": f"ключ {SECRET}", "result": {"text": "é" * 10}})
    answer = json.loads(mcp_http._answer_without_secrets(body))
    assert walked == []
    assert answer["id"] == "ключ [REDACTED:api_key]"
    assert answer["result"] == {"text": "é" * 10}


def test_an_answer_sent_in_several_messages_is_checked_whole():
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def answer_in_parts() -> None:
        request = Request(http_scope("POST", "/mcp", []))
        sending = mcp_http._answered(request, send)
        headers = [(b"content-type", b"application/json")]
        await sending({"type": "http.response.start", "status": 200, "headers": headers})
        error = _compact({"jsonrpc": "2.0", "id": 1, "error": {"code": 1, "message": SECRET}})
        for start in range(0, len(error), 7):
            part = error[start : start + 7]
            more = start + 7 < len(error)
            await sending({"type": "http.response.body", "body": part, "more_body": more})

    anyio.run(answer_in_parts)
    body = b"".join(message.get("body", b"") for message in sent[1:])
    assert json.loads(body)["error"]["message"] == "[REDACTED:api_key]"


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("search_memory", {"kind": "decisions", "q": "word " * 14_000}),
        ("list_handovers", {"to_agent": "a" * 70_000}),
    ],
    ids=["query", "agent"],
)
def test_arguments_no_request_can_carry_are_the_callers_error(
    app, client, project, tool, arguments, caplog
):
    """A query past what a URL holds: the REST route's 422, not a traceback logged at ERROR
    and an opaque "Error executing tool"."""
    caplog.set_level(logging.INFO)
    call = {"name": tool, "arguments": {"project": project} | arguments}
    result = _post(app, key_of(client), "tools/call", call)["result"]
    assert result["isError"] is True
    assert "cannot be sent as a request" in result["content"][0]["text"]
    _no_error_logged(caplog)


def test_an_idempotency_key_in_any_script_is_honoured(app, client, project):
    """Sent as its UTF-8 bytes, as a REST client sends it: httpx refused a text header that is
    not ASCII, before the request was made."""
    key = key_of(client)
    call = {
        "name": "add_memory_item",
        "arguments": {
            "project": project,
            "kind": "decisions",
            "item": {"decision": "x"},
            "idempotency_key": "ключ-kéy",
        },
    }
    first = _post(app, key, "tools/call", call)["result"]
    again = _post(app, key, "tools/call", call)["result"]
    assert not first.get("isError"), first
    assert first["structuredContent"] == again["structuredContent"]
    items = client.get(f"/v1/projects/{project}/memory/decisions").json()["items"]
    assert len(items) == 1


def _on_the_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@pytest.mark.parametrize(
    ("write", "read"),
    [
        ("save_mdan_save", "latest_mdan_save"),
        ("put_working_context_snapshot", "get_working_context_snapshot"),
        ("put_running_summary", "get_running_summary"),
    ],
)
def test_a_tools_document_is_written_and_read_off_the_event_loop(
    app, client, project, monkeypatch, write, read
):
    """A tool's document argument is made into its file, and a file read into a result, in a
    worker thread: on the event loop, Python's indenting encoder held every other request up
    for 480 ms with a 48 MB save, and the read's parse for 100 ms."""
    marker = "marker-" + secrets.token_hex(4)
    arguments = tool_calls(populate(client, project))[write]
    name = next(name for name, value in arguments.items() if isinstance(value, dict))
    arguments[name]["note"] = marker
    on_the_loop: list[str] = []

    def watched(function: Any, label: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            result = function(*args, **kwargs)
            text = result if isinstance(result, (str, bytes)) else args[0]
            seen = marker in (text if isinstance(text, str) else text.decode("utf-8", "replace"))
            if seen and _on_the_event_loop():
                on_the_loop.append(label)
            return result

        return call

    monkeypatch.setattr(json, "dumps", watched(json.dumps, "json.dumps"))
    monkeypatch.setattr(json, "loads", watched(json.loads, "json.loads"))
    monkeypatch.setattr(jsondoc, "dumps_indent2", watched(jsondoc.dumps_indent2, "dumps_indent2"))
    key = key_of(client)
    written = _post(app, key, "tools/call", {"name": write, "arguments": arguments})
    assert not written["result"].get("isError"), written
    where = {field: value for field, value in arguments.items() if field != name}
    answer = _post(app, key, "tools/call", {"name": read, "arguments": where})
    assert answer["result"]["structuredContent"]["document"]["note"] == marker, answer
    assert on_the_loop == []


def test_a_prompt_quoting_a_secret_pasted_as_an_argument_redacts_it(app, client, project):
    """The resume prompt says whom it speaks to: an agent's name is any text the caller sends."""
    assert client.post(f"/v1/projects/{project}/memory/decisions", json=DECISION).is_success
    arguments = {"project": project, "agent": "ghp_Zq7Wk2Lm9Xp4Rt6Yv8Bn3Cd5Ef7Gh9Jk1Mn"}
    answer = _post(
        app,
        key_of(client),
        "prompts/get",
        {"name": "resume_where_i_left_off", "arguments": arguments},
    )
    text = answer["result"]["messages"][0]["content"]["text"]
    assert text.startswith("You are [REDACTED:api_key]") and "Zq7Wk2" not in json.dumps(answer)


def test_an_empty_answer_goes_out_as_it_came():
    """An answer whose start tells nothing is parsed; one that is not JSON at all (the SDK's
    202 to a notification has no body) has nothing to parse or redact."""
    for enabled in (True, False):
        with RequestRedactions(enabled=enabled):
            assert mcp_http._answer_without_secrets(b"") == b""


@pytest.mark.parametrize(
    "quoted",
    [
        "Authorization: Bearer Zx9Qm2Lk7Vt4Rp8Wn3Yh6Jc5Bg1Df0Sa",
        "sk-proj-Zx9Qm2Lk7Vt4Rp8Wn3Yh6Jc5Bg1Df0SaKe7Ty",
        "ghp_Zx9Qm2Lk7Vt4Rp8Wn3Yh6Jc5Bg1Df0SaKe7T",
        "password=Zx9Qm2Lk7Vt4Rp",
    ],
    ids=["bearer", "openai", "github", "assignment"],
)
def test_an_envelope_the_sdk_refuses_never_echoes_what_is_left_of_a_cut_secret(app, client, quoted):
    """The SDK's refusal of a malformed envelope quotes pydantic's message, which quotes the
    input cut in its middle when long: the tail of a secret, without the head any pattern
    finds, came back (22 of a 40-character key's characters)."""
    response = TestClient(app, base_url=BASE_URL).post(
        "/mcp",
        content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": quoted}),
        headers=HEADERS | key_headers(key_of(client)) | {"Content-Type": "application/json"},
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == INVALID_PARAMS, response.text
    secret = quoted.rsplit(" ", 1)[-1].rsplit("=", 1)[-1]
    tails = {secret[at : at + 6] for at in range(len(secret) - 5)}
    assert not [tail for tail in tails if tail in response.text], response.text
