"""Clients that stop reading: a response is sent in slices, each within the send timeout.

uvicorn writes a body to the socket's buffer and waits only when that buffer is full. A client
that reads nothing would keep whatever the response holds (an export's turn and spool, a large
document) for as long as it keeps the connection open. Each slice here must be accepted within
``timeout`` seconds, or the response is abandoned and uvicorn closes the connection.
"""

import logging
from contextvars import ContextVar

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

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


class SendTimeoutMiddleware:
    def __init__(self, app: ASGIApp, timeout: float) -> None:
        self.app = app
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_in_time(message: Message) -> None:
            if message["type"] != "http.response.body":
                await self._send(send, message)
                return
            body: bytes = message.get("body", b"")
            more_body: bool = message.get("more_body", False)
            last = max(len(body) - 1, 0) // SLICE_BYTES * SLICE_BYTES
            for start in range(0, last, SLICE_BYTES):
                piece = body[start : start + SLICE_BYTES]
                await self._send(send, {**message, "body": piece, "more_body": True})
            await self._send(send, {**message, "body": body[last:], "more_body": more_body})

        try:
            await self.app(scope, receive, send_in_time)
        except ClientStalled:
            _abandoned.set(True)
            log.warning(
                "client accepted nothing for %s s: response abandoned, connection closed",
                self.timeout,
            )

    async def _send(self, send: Send, message: Message) -> None:
        with anyio.move_on_after(self.timeout) as scope:
            await send(message)
        if scope.cancelled_caught:
            raise ClientStalled


class AbandonedResponseFilter(logging.Filter):
    """Drops uvicorn's error line for a response this middleware abandoned on purpose (its
    own warning says what happened): an ERROR line means the server failed."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_abandoned.get() and record.getMessage().startswith(_INCOMPLETE))
