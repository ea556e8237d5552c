"""Document downloads: exact bytes, a strong ETag, the file's name, gzip when asked for; a
large one, and every export of whole files, in an export turn; and bodies sent from a spool."""

import tempfile
from collections.abc import Callable
from typing import Any, BinaryIO, cast

from anyio import CapacityLimiter, to_thread
from fastapi import Request, Response
from sqlmodel import Session
from starlette.concurrency import run_in_threadpool
from starlette.types import Receive, Scope, Send

from app.core.conditional import not_modified
from app.core.deps import get_settings
from app.core.documents import ANY_SIZE, Download, Oversized
from app.core.limits import export_turns
from app.formats import gzip as gzip_format

SPOOL_READ_BYTES = 64 * 1024

# A route's `responses=` for the OpenAPI document: status -> what FastAPI writes under it.
ResponsesDoc = dict[int | str, dict[str, Any]]


# What ``urllib.parse.urlsplit`` removes from a URL wherever it stands.
_REMOVED_FROM_URLS = str.maketrans("", "", "\t\r\n")


def location_under(request: Request, name: str) -> str:
    """The ``Location`` of a resource made under the request's path: ``request.url.path``
    (Starlette's escapes, then ``urlsplit``'s removal of tabs and line breaks: a route's
    pattern takes a path ending in an encoded newline, which must not reach a header), then
    ``/name``; without building the request's whole URL (host, port and query read and
    parsed: 4% of a decision POST's write, 2026-11-26)."""
    path: str = request.scope["path"]
    escaped = path.replace("?", "%3F").replace("#", "%23").replace("\\", "%5C")
    return f"{escaped.translate(_REMOVED_FROM_URLS)}/{name}"


def document_response(
    request: Request, download: Download, *, media_type: str = "application/json"
) -> Response:
    """The file, or 304 when the client holds its version. A gzip-stored file is served as
    it is to a client that accepts gzip (no second compression), decompressed for one that
    does not."""
    if (unchanged := not_modified(request, download.etag)) is not None:
        return unchanged
    headers = {
        "ETag": download.etag,
        "Content-Disposition": f'attachment; filename="{download.filename}"',
        "Vary": "Accept-Encoding",
    }
    content = download.content
    if download.gzipped:
        # ContentCodingMiddleware has reduced Accept-Encoding to "gzip" or nothing.
        if request.headers.get("accept-encoding") == "gzip":
            headers["Content-Encoding"] = "gzip"
        else:
            content = gzip_format.decompress_stored(content)
    return Response(content=content, media_type=media_type, headers=headers)


# A document's reader: the download, its bytes read only if they are at most this many
# (``ANY_SIZE``: whatever their size), else ``Oversized``.
DocumentReader = Callable[[int], Download]


async def download(
    request: Request,
    session: Session,
    tenant: str,
    read: DocumentReader,
    *,
    media_type: str = "application/json",
) -> Response:
    """Every whole document a client downloads, by ``document_response``. One of at most
    ``MAX_BODY_BYTES`` is read and sent with nothing more: every document one ordinary body
    writes is that small, and a hot read pays neither a statement nor a turn more. A larger
    one (a run state, a feature context, a save, a list file, grown past it) is found, its
    size read but not its bytes (the same statement); then it waits for an export turn, its
    read's connection given back meanwhile, and is read again and sent in the turn, which it
    holds until its response has been sent or abandoned: what large downloads hold at once is
    bounded by the turns (16 clients that never read a 48 MB atari state held 1.2-1.8 GB of
    the server's memory, 2026-11-27). A client that holds its version is answered 304 without
    a turn."""
    up_to = get_settings(request).max_body_bytes

    def within() -> Response:
        try:
            return document_response(request, read(up_to), media_type=media_type)
        except Oversized:
            session.rollback()
            raise

    try:
        return await run_in_threadpool(within)
    except Oversized as found:
        if found.etag is not None:
            unchanged = not_modified(request, found.etag)
            if unchanged is not None:
                return unchanged
    # Read again: it may have changed meanwhile, and its bytes and ETag come from one read.
    return await in_export_turn(
        request, tenant, lambda: document_response(request, read(ANY_SIZE), media_type=media_type)
    )


async def in_export_turn(request: Request, tenant: str, build: Callable[[], Response]) -> Response:
    """``build``'s response, built in a worker thread in one of the tenant's export turns
    (``export_turns``: per tenant and per server, waited for in order, then a 429 with
    ``Retry-After``), which is given back when the response ends, sent or abandoned (what the
    response holds is held until then), or at once if ``build`` fails; within
    ``keeping_turns``, when its block ends."""
    turn = await export_turns(request).take(tenant, request.is_disconnected)
    try:
        response = await run_in_threadpool(build)
    except BaseException:
        turn.release()
        raise
    return ClosingResponse(response, turn.release)


class ClosingResponse(Response):
    """``response`` (any: bytes, a spool) sent as it is, and ``on_close`` run when it ends,
    sent or not (a turn given back once the client has the body, or has gone)."""

    def __init__(self, response: Response, on_close: Callable[[], None]) -> None:
        super().__init__(status_code=response.status_code)
        # The same list: a header set on either is sent.
        self.raw_headers = response.raw_headers
        self.response = response
        self.on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.response(scope, receive, send)
        finally:
            self.on_close()


def open_spool(memory_bytes: int) -> BinaryIO:
    """A temporary file that stays in memory up to ``memory_bytes`` (0: straight to disk)."""
    if memory_bytes == 0:
        return tempfile.TemporaryFile()
    return cast(BinaryIO, tempfile.SpooledTemporaryFile(max_size=memory_bytes))


class SpooledResponse(Response):
    """A body written in full to a spool (``open_spool``) before the response starts, then
    sent from it: nothing the body was made from (a connection, a thread, the documents) is
    held while the client reads. The spool is read a slice at a time in a thread of this
    response's own (a read from disk never blocks the event loop, and never waits for the
    worker threads the requests share); it is closed when the response ends, sent or not.
    """

    def __init__(self, spool: BinaryIO, *, media_type: str, headers: dict[str, str]) -> None:
        size = spool.tell()
        spool.seek(0)
        super().__init__(media_type=media_type, headers=headers | {"Content-Length": str(size)})
        self.spool = spool

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        reader = CapacityLimiter(1)
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": self.status_code,
                    "headers": self.raw_headers,
                }
            )
            while chunk := await to_thread.run_sync(
                self.spool.read, SPOOL_READ_BYTES, limiter=reader
            ):
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self.spool.close()
