"""Who may ask, and request bodies (size limits, gzip decoding and media types), for every
route at once.

Each router uses one of the route classes below. A route that needs a key checks it and its
scopes first (401, 403). The limit is read from the settings at request time, counted on the
bytes received and again on the bytes decompressed, and a body over it is a 413 problem before
anything is parsed.
"""

import inspect
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool
from starlette.types import Receive
from starlette.types import Scope as AsgiScope

from app.core.deps import authenticated, authorize, required_scope
from app.core.errors import ContentTooLarge, MalformedBody, UnsupportedMediaType
from app.core.limits import HeldBody
from app.core.security import Scope
from app.formats import gzip as gzip_format

JSON_MEDIA_TYPE = "application/json"


def media_type_of(request: Request) -> str | None:
    content_type = request.headers.get("content-type")
    if content_type is None:
        return None
    return content_type.split(";", 1)[0].strip().lower()


def has_body(request: Request) -> bool:
    length = request.headers.get("content-length")
    if length is not None:
        return length.strip() != "0"
    return "transfer-encoding" in request.headers


class DecodedRequest(Request):
    """A request whose ``body()`` enforces the route's limit, holds its bytes in the tenant's
    ``BodyBytes`` as they arrive (``held``; None for a request that needs no key) and undoes
    gzip."""

    def __init__(
        self, scope: AsgiScope, receive: Receive, limit: int, held: HeldBody | None
    ) -> None:
        super().__init__(scope, receive)
        self.limit = limit
        self.held = held

    def _hold(self, size: int) -> None:
        if self.held is not None:
            self.held.up_to(size)

    def _too_large(self) -> ContentTooLarge:
        return ContentTooLarge(
            f"The request body exceeds this route's limit of {self.limit} bytes."
        )

    async def body(self) -> bytes:
        if not hasattr(self, "_body"):
            encoding = self.headers.get("content-encoding", "identity").strip().lower()
            if encoding not in ("identity", "gzip"):
                raise UnsupportedMediaType(
                    f"Content-Encoding {encoding!r} is not supported; use gzip or none."
                )
            declared = self.headers.get("content-length", "")
            if declared.isdigit():
                if int(declared) > self.limit:
                    raise self._too_large()
                # Held before the first byte is read: a body sent slowly holds what it
                # will hold from the start, and one the budget has no room for is refused
                # before it is received.
                self._hold(int(declared))
            chunks: list[bytes] = []
            received = 0
            async for chunk in self.stream():
                received += len(chunk)
                if received > self.limit:
                    raise self._too_large()
                self._hold(received)
                chunks.append(chunk)
            raw = b"".join(chunks)
            if encoding == "gzip":
                # Off the event loop: a body of many members, or one near the limit, takes
                # milliseconds to inflate, which every other request would wait out.
                raw = await run_in_threadpool(self.inflate, raw)
            self._body = raw
        return self._body

    def inflate(self, raw: bytes) -> bytes:
        """A gzip body inflated, within the route's limit and the room its tenant's share has
        left, the inflated bytes held in the share in place of the compressed ones: a body of
        kilobytes that inflates to the limit is stopped where the share ends (a 429), not
        after it has taken that memory. For a body sent with ``Content-Encoding: gzip``, and
        for a route whose body may be a gzip file (a ``.json.gz`` save, a ``.tar.gz``
        archive), which inflates it in its worker thread."""
        most = self.limit if self.held is None else min(self.limit, self.held.most())
        try:
            inflated = decompress_body(raw, most)
        except ContentTooLarge:
            if self.held is not None and most < self.limit:
                raise self.held.refusal() from None
            raise
        self._hold(len(inflated))
        return inflated

    @property
    def received(self) -> bytes:
        """The body, limited and decompressed, as the route class read it before the route ran:
        for a route that parses its body itself, which takes the request as ``DecodedRequest``
        (a sync route cannot await ``body()``; a dependency reading it cost every such request
        a level of FastAPI's dependency resolution, 2.6% of a decision POST's instructions)."""
        return self._body


def received_size(request: Request) -> int:
    """The size of the body read so far (by the route class, or by FastAPI for a body model):
    0 for a request whose body is not read, or empty."""
    body: bytes = getattr(request, "_body", b"")  # Starlette's own cache of ``body()``
    return len(body)


def decompress_body(raw: bytes, limit: int) -> bytes:
    try:
        return gzip_format.decompress(raw, limit)
    except gzip_format.DecompressedTooLarge as exc:
        raise ContentTooLarge(
            f"The decompressed request body exceeds this route's limit of {limit} bytes."
        ) from exc
    except gzip_format.GzipError as exc:
        raise MalformedBody(f"The gzip request body cannot be decompressed: {exc}.") from exc


def raw_body(*media_types: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """``openapi_extra`` for a route that reads its body itself.

    The media types declared here are also the ones the route accepts (415 otherwise).
    """
    content_schema = schema if schema is not None else {"type": "string", "format": "binary"}
    return {
        "requestBody": {
            "required": True,
            "content": {media_type: {"schema": content_schema} for media_type in media_types},
        }
    }


def _reads_its_body(endpoint: Callable[..., Any]) -> bool:
    """Whether a route reads its body from the request (``DecodedRequest.received``)."""
    parameters = inspect.signature(endpoint, eval_str=True).parameters.values()
    return any(parameter.annotation is DecodedRequest for parameter in parameters)


def _required_scopes(dependant: Dependant) -> set[Scope]:
    """The scopes a route's dependencies require, at any depth."""
    own = required_scope(dependant.call)
    found = set() if own is None else {own}
    for sub in dependant.dependencies:
        found |= _required_scopes(sub)
    return found


class ContextStoreRoute(APIRoute):
    """Body limit ``max_body_bytes``; accepts the media types the route documents; checks the
    key and its scopes first."""

    body_limit_setting = "max_body_bytes"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        declared = ((self.openapi_extra or {}).get("requestBody") or {}).get("content")
        if declared:
            self.accepted_media_types = frozenset(declared)
        elif self.body_field is not None:
            self.accepted_media_types = frozenset({JSON_MEDIA_TYPE})
        else:
            self.accepted_media_types = frozenset()
        # In ``Scope``'s order, so that a key lacking several is told of the same one each time.
        self.scopes: tuple[Scope, ...] = ()
        self.require_scopes(_required_scopes(self.dependant))
        if not self.accepted_media_types and _reads_its_body(self.endpoint):
            # The handler below reads a body only for a route that declares one; undeclared,
            # ``received`` would fail on every request.
            raise TypeError(
                f"{self.path} takes a DecodedRequest but declares no request body: give it "
                "openapi_extra=raw_body(...)"
            )

    def require_scopes(self, scopes: set[Scope]) -> None:
        """Add to the scopes a request's key must have (a route class whose endpoints take
        what a scope guards without declaring its dependency: ``WriteRoute``)."""
        wanted = set(self.scopes) | scopes
        self.scopes = tuple(scope for scope in Scope if scope in wanted)

    @property
    def authenticated(self) -> bool:
        """Whether a request needs a key (the OpenAPI document's security, app/core/api_docs)."""
        return bool(self.scopes)

    def accepts(self, media_type: str | None) -> bool:
        if media_type is None:
            return False
        if media_type in self.accepted_media_types:
            return True
        return JSON_MEDIA_TYPE in self.accepted_media_types and media_type.endswith("+json")

    def checked_request_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """What handles a request once this class's checks have passed: FastAPI's own handler,
        which resolves the endpoint's parameters and dependencies and runs it."""
        return super().get_route_handler()

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = self.checked_request_handler()
        setting = self.body_limit_setting

        async def decoded_body_handler(request: Request) -> Response:
            limit: int = getattr(request.app.state.settings, setting)
            held: HeldBody | None = None
            if self.scopes:
                # Who is asking, and whether they may, come first: an anonymous client or a
                # key without the scope gets its 401 or 403 before the server buffers or
                # inflates anything it sent, or checks any other part of the request. Here,
                # so that a route need not declare a dependency for the order alone (FastAPI
                # resolves each level of them on every request): a write route has none
                # (app/storage/route.py). The scope dependencies check again, at the cost of
                # a look at ``request.state``.
                principal = await authenticated(request)
                for scope in self.scopes:
                    authorize(principal, scope)
                if self.accepted_media_types:
                    held = HeldBody(request.app.state.body_bytes, principal.tenant)
            decoded = DecodedRequest(request.scope, request.receive, limit, held)
            try:
                return await self._handle(handler, request, decoded)
            finally:
                if held is not None:
                    held.release()

        return decoded_body_handler

    async def _handle(
        self,
        handler: Callable[[Request], Coroutine[Any, Any, Response]],
        request: Request,
        decoded: DecodedRequest,
    ) -> Response:
        """The request's media type checked and its body read, then the route's handler."""
        if self.accepted_media_types:
            if has_body(request):
                media_type = media_type_of(request)
                if not self.accepts(media_type):
                    raise UnsupportedMediaType(
                        f"Content-Type {media_type or '(none)'!r} is not accepted here; "
                        + "send "
                        + " or ".join(sorted(self.accepted_media_types))
                        + "."
                    )
            # Read it here, where a 413 or a bad gzip stream is reported as such (FastAPI
            # turns any error raised while it reads the body into a generic 400), and for
            # ``DecodedRequest.received``: an absent body reads as empty.
            await decoded.body()
        return await handler(decoded)


class BulkBodyRoute(ContextStoreRoute):
    """For saves and archives: body limit ``max_bulk_body_bytes``."""

    body_limit_setting = "max_bulk_body_bytes"
