"""Who may call a server that a browser page could reach on this machine: the ``Host`` and
``Origin`` values it answers (DNS rebinding).

A page on any site can point its own name at 127.0.0.1 and send requests to a server listening
there; its browser then sends that name as ``Host`` (and the page's ``Origin``). With
CONTEXT_STORE_AUTH=off no key stops such a request, so every route checks both headers
(``RebindingGuardMiddleware``); ``/mcp`` also configures the MCP SDK's own check from the same
values (app/mcp_server/http.py). With auth on, a page holds no key: every route answers it 401.
"""

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.config import AllowedCallers
from app.core.errors import Forbidden, Problem, problem_response


class MisdirectedRequest(Problem):
    status, slug = 421, "misdirected-request"


def _matches(value: str, allowed: tuple[str, ...]) -> bool:
    """``value`` is one of ``allowed``, where ``name:*`` stands for ``name`` on any port: a
    number, not any text (the MCP SDK's own rule takes ``localhost:8000.evil.example``)."""
    return value in allowed or any(
        pattern.endswith(":*") and _is_port(value.removeprefix(pattern[:-1]))
        for pattern in allowed
        if value.startswith(pattern[:-1])
    )


def _is_port(text: str) -> bool:
    return text.isascii() and text.isdigit()


def refusal(allowed: AllowedCallers, headers: Headers) -> Problem | None:
    """The problem a request that names a host, or comes from a browser origin, outside
    ``allowed`` gets; None for a request they allow (one without ``Origin`` is not a browser's
    cross-site one)."""
    host = headers.get("host", "")
    if not _matches(host, allowed.hosts):
        return MisdirectedRequest(
            f"This server does not answer for the host {host!r}: set "
            "CONTEXT_STORE_ALLOWED_HOSTS to the names clients reach it by."
        )
    origin = headers.get("origin")
    if origin is not None and not _matches(origin, allowed.origins):
        return Forbidden(
            f"Requests from the origin {origin!r} are refused: set "
            "CONTEXT_STORE_ALLOWED_ORIGINS to the pages that may call this server."
        )
    return None


class RebindingGuardMiddleware:
    """Refuses a request naming a host or coming from an origin the server does not answer
    (421 and 403 problems), before anything else reads it. Installed when auth is off."""

    def __init__(self, app: ASGIApp, allowed: AllowedCallers) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            problem = refusal(self.allowed, Headers(scope=scope))
            if problem is not None:
                await problem_response(problem)(scope, receive, send)
                return
        await self.app(scope, receive, send)
