"""``/mcp``: Streamable HTTP in the service's own app, stateless with JSON answers (any replica
answers any request, nothing is held between them).

A request to ``/mcp`` is authenticated as every route is (401 without a valid key). Its tools
then send their route's request to this same app in process (httpx's ASGI transport) with the
caller's own key headers, so that a tool call is authorised, scoped to the tenant, validated,
made idempotent and answered exactly as the REST request would be.
"""

import json
import re
from contextvars import ContextVar
from typing import Any

import httpx
from fastapi import FastAPI
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import MutableHeaders
from starlette.requests import Request
from starlette.routing import Match, Route
from starlette.types import Message, Receive, Scope, Send

from app.client import AsyncContextStoreClient
from app.core import redaction
from app.core.body import DecodedRequest
from app.core.config import Settings
from app.core.deps import authenticated, get_settings
from app.core.errors import Forbidden, MalformedBody, Problem, problem_response
from app.core.limits import HeldBody, bulk_import_turns, keeping_turns
from app.core.rebinding import MisdirectedRequest
from app.core.redaction import json_without_secrets
from app.mcp_server.server import ContextStoreServer, build_server
from app.redaction import redact_value

PATH = "/mcp"
# What a tool's request carries of the caller's: who it is, the host it named (which the
# DNS-rebinding check already answered: with AUTH=off the tool's request meets it too) and the
# id its logs go under.
FORWARDED_HEADERS = ("authorization", "x-api-key", "host", "x-request-id")

_caller: ContextVar[dict[str, str]] = ContextVar("mcp_caller")


async def _as_caller(request: httpx.Request) -> None:
    request.headers.update(_caller.get())


def _transport_security(settings: Settings) -> TransportSecuritySettings:
    allowed = settings.allowed_callers
    if allowed is None:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(allowed.hosts),
        allowed_origins=list(allowed.origins),
    )


# The SDK's own refusals before the protocol starts, which it answers in plain text (a
# Content-Type that is not JSON, the Host and Origin checks): the problem every other route
# answers with that status. (A body over the limit is refused before the SDK reads it.)
SDK_REFUSALS: dict[int, type[Problem]] = {
    400: MalformedBody,
    403: Forbidden,
    421: MisdirectedRequest,
}


# The SDK writes an answer's members in this order and without spaces (pydantic's
# ``model_dump_json``, for the 2025 protocol versions): the request's id follows this, then
# the answer's member, ``"result"`` or ``"error"``. An answer that does not start so (an id
# longer than ``_ID_BYTES``; the 2026 version's writer, which may put the id last) is parsed.
_ANSWERED_ID = b'{"jsonrpc":"2.0","id":'
_RESULT = b',"result":'
# How a tool's result says it is an error; a result without these bytes is none.
_TOOL_ERROR = b'"isError":true'
# The most of an answer read to find the id's end.
_ID_BYTES = 4096
_DECODER = json.JSONDecoder()


def _answered_id(body: bytes) -> tuple[object, int] | None:
    """The request's id, as the answer carries it back, and where it ends in the answer's
    bytes; None for an answer that does not start as ``_ANSWERED_ID`` says (or an id longer
    than ``_ID_BYTES``)."""
    if not body.startswith(_ANSWERED_ID):
        return None
    at = len(_ANSWERED_ID)
    # A cut inside a character can only fall after the id's end: dropping it is exact.
    text = body[at : at + _ID_BYTES].decode("utf-8", "ignore")
    try:
        request_id, end = _DECODER.raw_decode(text)
    except ValueError:
        return None
    return request_id, at + len(text[:end].encode())


def _is_result(answer: object) -> bool:
    """Whether a parsed answer is a result, and no tool's error."""
    if not isinstance(answer, dict) or "error" in answer:
        return False
    result = answer.get("result")
    return isinstance(result, dict) and result.get("isError") is not True


def _is_tool_error(body: bytes) -> bool:
    """Whether a result is a tool's error. Told from its bytes, not parsed: a read of a large
    save answers its document twice (as text and as structured content), and parsing it held
    the interpreter's lock, and so the event loop, for 250 ms a 48 MB save (json's parser
    runs in C, in one call, even in a worker thread). Parsed only when the bytes are there,
    which a stored document may hold in a member of its own."""
    return _TOOL_ERROR in body and not _is_result(json.loads(body))


# pydantic quotes the input of a failed validation, cut in its middle when long: what is
# left of a secret's either side of the cut is what no pattern finds (22 of a 40-character
# key's characters came back). One line of its message, the last ``input_type`` its own.
_QUOTED_INPUT = re.compile(r"input_value=.*, input_type=")
_NOT_QUOTED = "input_value=(not shown), input_type="


# An error quotes what the caller sent (the SDK's "Method not found" its method, a resource's
# error its URI) whole: a string of an error longer than this is such an echo, and is described,
# not sent back. A 30 MB URI echoed twice was walked for secrets, 60 MB, holding the event loop
# 4-9 s (2026-11-27). Not cut: a secret cut in two is matched by no pattern.
_ECHOED_CHARACTERS = 1000
# An error answer at most this large is redacted as it is (cheap at that size); a larger one is
# parsed, its echoes described.
_ECHO_BYTES = 4 * _ECHOED_CHARACTERS


def _unquoted(value: Any) -> Any:
    if isinstance(value, str):
        return _QUOTED_INPUT.sub(_NOT_QUOTED, value)
    if isinstance(value, list):
        return [_unquoted(item) for item in value]
    if isinstance(value, dict):
        return {key: _unquoted(item) for key, item in value.items()}
    return value


def _error_without_secrets(body: bytes) -> bytes:
    """An error, or a tool's error, with no input quoted (``_QUOTED_INPUT``), no long echo of
    the request (``_ECHOED_CHARACTERS``), and any secret it quotes otherwise redacted."""
    if b"input_value=" in body or len(body) > _ECHO_BYTES:
        try:
            answer = json.loads(body)
        except ValueError:  # not JSON: its text
            body = _unquoted(body.decode("utf-8", "replace")).encode()
        else:
            if isinstance(answer, dict) and "error" in answer:
                answer["error"] = _without_echoes(answer["error"])
            body = json.dumps(_unquoted(answer), separators=(",", ":")).encode()
    return json_without_secrets(body)


def _without_echoes(value: Any) -> Any:
    """A protocol error's members with each long string (``_ECHOED_CHARACTERS``) described.
    Not a tool's error: its text is the route's problem, which may list its faults at length."""
    if isinstance(value, str) and len(value) > _ECHOED_CHARACTERS:
        return f"({len(value):,} characters of the request, not shown)"
    if isinstance(value, list):
        return [_without_echoes(item) for item in value]
    if isinstance(value, dict):
        return {key: _without_echoes(item) for key, item in value.items()}
    return value


def _parsed_without_secrets(body: bytes) -> bytes:
    """``_answer_without_secrets`` for an answer whose start does not tell what it is."""
    try:
        result = _is_result(json.loads(body))
    except ValueError:  # not JSON (an empty body): nothing to parse
        result = False
    if not result:
        return _error_without_secrets(body)
    return json_without_secrets(body) if redaction.enabled() else body


def _answer_without_secrets(body: bytes) -> bytes:
    """A JSON-RPC answer with any secret it quotes redacted. An error, or a tool's error, may
    quote what the caller sent (an unknown method, tool, resource or prompt name: a key pasted
    in the wrong place): redacted always, as every problem's text is. A result carries the
    request's id back as it was sent: the id redacted when redaction is on, as every write's
    answer is (a caller whose id held a secret then cannot match it, and gets no secret back).
    The rest of a result is the routes' answers, whose documents are redacted as they are
    stored, or a prompt's text, redacted as it is made (``app/mcp_server/server.py``); walking
    it for a secret cost a 10 MB save's read 1.9 s of CPU, its own stored markers sending
    every text to the patterns. Where the id cannot be read from the answer's start, the
    answer is parsed, and a result redacted whole when redaction is on."""
    answered = _answered_id(body)
    if answered is None:
        return _parsed_without_secrets(body)
    if not body.startswith(_RESULT, answered[1]) or _is_tool_error(body):
        return _error_without_secrets(body)
    if not redaction.enabled():
        return body
    request_id, end = answered
    redacted = redact_value(request_id)
    if redacted == request_id:
        return body
    at = len(_ANSWERED_ID)
    return body[:at] + json.dumps(redacted).encode() + body[end:]


def _answered(request: Request, send: Send) -> Send:
    """``send``, with each of the SDK's plain-text refusals (``SDK_REFUSALS``) turned into
    problem+json carrying its text as the detail, and its JSON answers (the protocol's own
    errors, which MCP clients read, and its results) sent whole, without secrets."""
    refusal: type[Problem] | None = None
    start: Message | None = None
    body = bytearray()

    async def sending(message: Message) -> None:
        nonlocal refusal, start
        if message["type"] == "http.response.start":
            headers = dict(message.get("headers", []))
            if b"json" not in headers.get(b"content-type", b""):
                refusal = SDK_REFUSALS.get(message["status"])
                if refusal is None:
                    await send(message)
                return
            start = message  # held until the body shows whether it is an error
            return
        if message["type"] != "http.response.body" or (refusal is None and start is None):
            await send(message)
            return
        if message.get("more_body", False):
            body.extend(message.get("body", b""))
            return
        # The SDK sends its answer in one message: no copy of it (a read of a 48 MB save
        # answers twice that, its text and its structured content).
        last: bytes = message.get("body", b"")
        whole = bytes(body) + last if body else last
        if refusal is not None:
            problem = refusal(whole.decode("utf-8", errors="replace"))
            await problem_response(problem, request)(request.scope, request.receive, send)
            return
        assert start is not None
        # Off the event loop: an error is parsed to be redacted.
        answer = await run_in_threadpool(_answer_without_secrets, whole)
        MutableHeaders(scope=start)["content-length"] = str(len(answer))
        await send(start)
        await send({"type": "http.response.body", "body": answer, "more_body": False})

    return sending


def _replayed(body: bytes, receive: Receive) -> Receive:
    """``receive`` for a request whose body has been read: the body, then what comes after it
    (the client's disconnect)."""
    unread = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return unread.pop() if unread else await receive()

    return replay


class McpEndpoint:
    """The ASGI app at /mcp: authenticate, then hand the request to a session manager of its
    own with the caller's headers in reach of the tools.

    A manager per request: stateless, a request is one exchange, and nothing it starts
    outlives it (the SDK's manager otherwise runs for the app's lifetime, in its lifespan)."""

    def __init__(self, server: ContextStoreServer, settings: Settings) -> None:
        self.server = server
        self.security = _transport_security(settings)
        # Tool arguments carry whole saves: the limit of the routes that take them.
        self.max_bulk_body_bytes = settings.max_bulk_body_bytes

    def _manager(self) -> StreamableHTTPSessionManager:
        self.server.streamable_http_app(
            streamable_http_path=PATH,
            stateless_http=True,
            json_response=True,
            transport_security=self.security,
            max_request_body_size=self.max_bulk_body_bytes,
        )
        return self.server.session_manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        principal = await authenticated(request)  # raises the 401 problem, as on every route
        headers = {
            name: request.headers[name] for name in FORWARDED_HEADERS if name in request.headers
        }
        # Read here as every route's body is, held in the tenant's share of the bodies being
        # received (a 429 beyond it), then handed to the SDK whole.
        held = HeldBody(request.app.state.body_bytes, principal.tenant)
        token = _caller.set(headers)
        try:
            body = await DecodedRequest(scope, receive, self.max_bulk_body_bytes, held).body()
            # The turns this call and its tools' routes take are the call's, given back once
            # its answer has been sent: a route may send a large document in an export turn,
            # and this answer holds the document until then.
            with keeping_turns():
                if len(body) > get_settings(request).max_body_bytes:
                    # Over the body limit REST takes only an import, in a bulk-import turn: so
                    # is this call taken, whatever its tool, before the SDK parses the body (on
                    # the event loop, into objects about ten times its size for an array of
                    # zeros). The tool's import route uses this turn.
                    await bulk_import_turns(request).take(principal.tenant, request.is_disconnected)
                manager = self._manager()
                replayed = _replayed(body, receive)
                async with manager.run():
                    await manager.handle_request(scope, replayed, _answered(request, send))
        finally:
            _caller.reset(token)
            held.release()


class McpRoute(Route):
    """Names itself in the scope, as FastAPI's routes do: the request log and the metrics
    label a request by its route's template (app/core/metrics.py)."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child_scope = super().matches(scope)
        if match is not Match.NONE:
            child_scope["route"] = self
        return match, child_scope


def install_mcp(app: FastAPI, settings: Settings) -> None:
    """Serve the MCP server at /mcp."""
    http = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://context-store",
        # In process: gzip would only cost both ends CPU.
        headers={"Accept-Encoding": "identity"},
        event_hooks={"request": [_as_caller]},
        timeout=None,
    )
    # One client: each tool call's request carries its caller's headers (``_as_caller``).
    server = build_server(AsyncContextStoreClient(http=http))
    # POST only: a stateless server has no stream of its own messages to GET (the SDK would
    # hold such a GET open, idle, for as long as the client keeps it) and no session to DELETE.
    app.router.routes.append(McpRoute(PATH, McpEndpoint(server, settings), methods=["POST"]))
