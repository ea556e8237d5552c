"""How every response leaves the service: one pass that, for each request, sets what its
redaction collects, negotiates its content coding (gzip through Starlette's responder), finishes
its headers, and sends its body in slices, each within the send timeout.

One layer, not the four that did these one by one (redaction, content coding, gzip, the send
timeout), each wrapping every request's ``send`` again: they cost a 404 230 thousand of its 954
thousand instructions (26%), measured by callgrind on 2026-11-26.

Clients that stop reading: uvicorn writes a body to the socket's buffer and waits only when
that buffer is full. A client that reads nothing would keep whatever the response holds (an
export's turn and spool, a large document) for as long as it keeps the connection open. Each
slice here must be accepted within ``timeout`` seconds, or the response is abandoned and
uvicorn closes the connection.
"""

import asyncio
import logging
import types
from collections.abc import Awaitable, Coroutine, Generator
from contextvars import ContextVar
from typing import Any

from starlette.datastructures import MutableHeaders
from starlette.middleware.gzip import GZipResponder
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core import encoding
from app.core.redaction import RequestRedactions

log = logging.getLogger(__name__)

# Each slice costs a timeout scope and a write of uvicorn's: a 1 MB save sent in 64 KiB slices
# cost 3.1-3.3 ms of the server's CPU, in 256 KiB slices 2.5-2.9 (in 1 MiB ones no less),
# measured alternately over HTTP on 2026-11-26. A client must take a slice within the timeout:
# 256 KiB in 30 s is under 9 kB/s.
SLICE_BYTES = 256 * 1024
# Set in the task that serves a request whose client was dropped; uvicorn logs from the same
# task once the app has returned.
_abandoned: ContextVar[bool] = ContextVar("abandoned", default=False)
# What uvicorn logs (as an error) when an app returns before the end of its response, which is
# how an ASGI app has it close the connection.
_INCOMPLETE = "ASGI callable returned without completing response"


class ClientStalled(BaseException):
    """Unwinds the response without passing for an error of the app: it is no Exception, so
    that the 500 handler neither logs it as a failure nor tries to answer."""


class SendingMiddleware:
    """The one pass every HTTP response takes on its way out (this module's docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        timeout: float,
        redact: bool,
        gzip_minimum_bytes: int,
        gzip_level: int,
    ) -> None:
        self.app = app
        self.timeout = timeout
        self.redact = redact
        self.gzip_minimum_bytes = gzip_minimum_bytes
        self.gzip_level = gzip_level

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        app = self.app
        wants_gzip = encoding.negotiate(scope)
        if wants_gzip:
            app = GZipResponder(app, self.gzip_minimum_bytes, compresslevel=self.gzip_level)
        redactions = RequestRedactions(enabled=self.redact)
        # For a client that does not take gzip, a response the gzip layer would have compressed
        # for one that does is held until its first body shows whether it was long enough: then
        # it says it varies by Accept-Encoding, as the gzip layer says of those it compresses.
        held: tuple[Message, MutableHeaders] | None = None

        async def start(message: Message, headers: MutableHeaders, *, varies: bool) -> None:
            encoding.finish_coded_headers(headers, varies=varies)
            redactions.add_header(headers)
            await self._send(send, message)

        async def send_finished(message: Message) -> None:
            nonlocal held
            kind = message["type"]
            if kind == "http.response.start":
                headers = MutableHeaders(scope=message)
                if not wants_gzip and encoding.could_be_compressed(headers, message["status"]):
                    held = message, headers
                else:
                    await start(message, headers, varies=False)
                return
            if held is not None:
                (held_start, held_headers), held = held, None
                long_enough = kind == "http.response.body" and (
                    message.get("more_body", False)
                    or len(message.get("body", b"")) >= self.gzip_minimum_bytes
                )
                await start(held_start, held_headers, varies=long_enough)
            if kind == "http.response.body":
                await self._send_body(send, message)
            else:
                await self._send(send, message)

        try:
            with redactions:
                await app(scope, receive, send_finished)
        except ClientStalled:
            _abandoned.set(True)
            log.warning(
                "client accepted nothing for %s s: response abandoned, connection closed",
                self.timeout,
            )

    async def _send_body(self, send: Send, message: Message) -> None:
        body: bytes = message.get("body", b"")
        if len(body) <= SLICE_BYTES:
            await self._send(send, message)
            return
        more_body: bool = message.get("more_body", False)
        last = (len(body) - 1) // SLICE_BYTES * SLICE_BYTES
        for begin in range(0, last, SLICE_BYTES):
            piece = body[begin : begin + SLICE_BYTES]
            await self._send(send, {**message, "body": piece, "more_body": True})
        await self._send(send, {**message, "body": body[last:], "more_body": more_body})

    async def _send(self, send: Send, message: Message) -> None:
        """``send(message)``, abandoned (``ClientStalled``) if it waits longer than the timeout.

        Only a send that waits needs a timer, and one waits only when the socket's buffer is
        full: the server's send is stepped once by hand, and a timeout (anyio's scope cost 38
        thousand instructions, twice a response) is set up only when that step did not finish
        it."""
        sending = send(message)
        if not isinstance(sending, types.CoroutineType):
            sending = _awaited(sending)
        try:
            waiting_on = sending.send(None)
        except StopIteration:
            return
        # asyncio's timeout, not anyio's scope: the send may have entered a cancel scope of its
        # own in its first step (an anyio lock or limiter), which a scope entered now would
        # cross; asyncio's timeout keeps no stack of scopes to cross.
        try:
            async with asyncio.timeout(self.timeout):
                await _resumed(sending, waiting_on)
        except TimeoutError:
            raise ClientStalled from None


async def _awaited(awaitable: Awaitable[None]) -> None:
    await awaitable


@types.coroutine
def _resumed(sending: Coroutine[Any, Any, None], waiting_on: Any) -> Generator[Any, Any, None]:
    """The rest of a coroutine already stepped once (which yielded ``waiting_on`` to the event
    loop), as ``await`` would run it: what the loop sends or throws goes on to the coroutine,
    what it yields goes back to the loop, until it returns."""
    while True:
        try:
            resumed = yield waiting_on
        except BaseException as exc:  # the loop's cancellation (the timeout's) included
            try:
                waiting_on = sending.throw(exc)
            except StopIteration:
                return
        else:
            try:
                waiting_on = sending.send(resumed)
            except StopIteration:
                return


class AbandonedResponseFilter(logging.Filter):
    """Drops uvicorn's error line for a response this middleware abandoned on purpose (its
    own warning says what happened): an ERROR line means the server failed."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_abandoned.get() and record.getMessage().startswith(_INCOMPLETE))
