"""How `context-store serve` reads HTTP: uvicorn's httptools protocol, with bounds on what a
client can make the server hold.

httptools (llhttp) puts no limit on a request line and headers: a client may send headers for
as long as it likes and the server holds them all (a 100 MB header took 38 s to arrive and was
then served). uvicorn's other protocol, h11, has a limit (``h11_max_incomplete_event_size``)
but costs 2-3x httptools' CPU per request (0.36-0.45 ms against 0.14-0.17 ms for a bare ASGI
app, measured side by side), so the server keeps httptools and counts the head itself.

Nor does uvicorn time a request's arrival: it times a connection only once a response is
complete (keep-alive), so a connection that never sends, a head sent a byte at a time or a
body that stops halfway held its socket and memory for good (a hostile client kept such
connections 300 s, 2026-11-27). So a request's head must arrive within ``read_timeout`` of its
first byte, and its body must not pause for that long; a new connection must send its first
byte within uvicorn's keep-alive timeout, as a kept-alive one must.
"""

import asyncio
from functools import partial
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from app.core.errors import Problem
from app.core.json import dumps


class RequestTimeout(Problem):
    status, slug = 408, "request-timeout"


class HeadTooLarge(Problem):
    status, slug = 431, "request-header-fields-too-large"


class MalformedRequest(Problem):
    status, slug = 400, "malformed-request"


class _HeadOverLimit(Exception):
    """Raised in the parser's callback for a head over the limit that arrived whole: the
    parser stops there, and uvicorn answers through ``send_400_response``."""


class BoundedRequestProtocol(HttpToolsProtocol):
    """Answers 431 (and closes) for a request whose head passes ``max_head_bytes``, and 408
    (and closes) for one whose head does not arrive within ``read_timeout``; closes a
    connection whose request body pauses for that long.

    Bytes are counted as they arrive, from the end of one request to the end of the next
    head, so that a head still unfinished past the limit is refused there, and what the
    server holds is at most the limit and one read. A head that arrives whole (in one read
    with its body, say) is measured by its parts when parsed: the request's target and each
    header's name and value. A request httptools cannot parse gets the 400 uvicorn gives it,
    as problem+json."""

    def __init__(self, *args: Any, max_head_bytes: int, read_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_head_bytes = max_head_bytes
        self.read_timeout = read_timeout
        self.reading_head = True
        self.head_bytes = 0
        self.head_over_limit = False
        # The head's deadline, or the body's pause (None: no request being read).
        self.read_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # Until its first byte a new connection is idle, as a kept-alive one is between its
        # requests, and is closed after as long (uvicorn's ``timeout_keep_alive``, or the
        # head's own deadline if shorter): with the head's deadline from the connection,
        # 20,000 connections that sent nothing held every file descriptor for 30 s, and other
        # clients' new connections failed (2026-11-27).
        idle = min(self.timeout_keep_alive, self.read_timeout)
        self.read_timer = self.loop.call_later(idle, self._idle_timed_out)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timing()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.reading_head:
            if self.read_timer is None or self.head_bytes == 0:
                self._time_reading()  # a head begins: its deadline runs from here
            self.head_bytes += len(data)
        else:
            self._time_reading()  # the body goes on: its pause starts again
        super().data_received(data)
        if (
            self.reading_head
            and self.head_bytes > self.max_head_bytes
            and not self.transport.is_closing()
        ):
            self._refuse_head(self._head_too_large())

    def on_headers_complete(self) -> None:
        self.reading_head = False
        parts = len(self.url) + sum(len(name) + len(value) for name, value in self.headers)
        if parts > self.max_head_bytes:
            self.head_over_limit = True
            raise _HeadOverLimit
        self._time_reading()  # the body's first pause
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._stop_timing()
        super().on_message_complete()
        self.reading_head = True
        self.head_bytes = 0
        if self.cycle is not None and self.cycle.response_complete and not self.pipeline:
            # Answered before its body had all come (a 401, a 404): uvicorn's keep-alive timer,
            # armed by the answer, was stopped by the body's last bytes. The next head's
            # deadline runs from here.
            self._time_reading()

    def _time_reading(self) -> None:
        self._stop_timing()
        self.read_timer = self.loop.call_later(self.read_timeout, self._reading_timed_out)

    def _stop_timing(self) -> None:
        if self.read_timer is not None:
            self.read_timer.cancel()
            self.read_timer = None

    def _idle_timed_out(self) -> None:
        self.read_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def _reading_timed_out(self) -> None:
        self.read_timer = None
        if self.transport.is_closing():
            return
        if self.reading_head:
            self._refuse_head(
                RequestTimeout(f"The request's head did not arrive within {self.read_timeout} s.")
            )
        elif self.flow.read_paused or (
            self.cycle is not None and self.cycle.waiting_for_100_continue
        ):
            # The client cannot send: the server stopped reading (the app has not taken what
            # came, or the request is queued behind another's response), or the client waits
            # for the 100 Continue the app's first read sends. Its pause is the server's.
            self._time_reading()
        else:
            # The app is waiting for the body: it reads a disconnect.
            self.transport.close()

    def send_400_response(self, msg: str) -> None:
        if self.head_over_limit:
            self._refuse_head(self._head_too_large())
        else:
            self._answer_and_close(MalformedRequest(msg))

    def _head_too_large(self) -> HeadTooLarge:
        return HeadTooLarge(f"The request line and headers exceed {self.max_head_bytes} bytes.")

    def _refuse_head(self, problem: Problem) -> None:
        # Only between responses: a pipelined request's head arriving while another's
        # response is being written gets the connection closed instead.
        if self.cycle is None or self.cycle.response_complete:
            self._answer_and_close(problem)
        else:
            self.transport.close()

    def _answer_and_close(self, problem: Problem) -> None:
        body = dumps(problem.body())
        self.transport.write(
            STATUS_LINE[problem.status]
            + b"content-type: application/problem+json\r\n"
            + b"content-length: %d\r\n" % len(body)
            + b"connection: close\r\n\r\n"
            + body
        )
        self.transport.close()


def bounded_request_protocol(
    max_head_bytes: int, read_timeout: float
) -> "partial[BoundedRequestProtocol]":
    """What uvicorn's ``http`` option takes: a protocol factory (it adds its own arguments)."""
    return partial(BoundedRequestProtocol, max_head_bytes=max_head_bytes, read_timeout=read_timeout)
