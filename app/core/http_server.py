"""How `context-store serve` reads HTTP: uvicorn's httptools protocol, with a bound on a
request's head.

httptools (llhttp) puts no limit on a request line and headers: a client may send headers for
as long as it likes and the server holds them all (a 100 MB header took 38 s to arrive and was
then served). uvicorn's other protocol, h11, has a limit (``h11_max_incomplete_event_size``)
but costs 2-3x httptools' CPU per request (0.36-0.45 ms against 0.14-0.17 ms for a bare ASGI
app, measured side by side), so the server keeps httptools and counts the head itself.
"""

from functools import partial
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from app.core.errors import Problem
from app.core.json import dumps


class HeadTooLarge(Problem):
    status, slug = 431, "request-header-fields-too-large"


class MalformedRequest(Problem):
    status, slug = 400, "malformed-request"


class _HeadOverLimit(Exception):
    """Raised in the parser's callback for a head over the limit that arrived whole: the
    parser stops there, and uvicorn answers through ``send_400_response``."""


class BoundedHeadProtocol(HttpToolsProtocol):
    """Answers 431 (and closes) for a request whose head passes ``max_head_bytes``.

    Bytes are counted as they arrive, from the end of one request to the end of the next
    head, so that a head still unfinished past the limit is refused there, and what the
    server holds is at most the limit and one read. A head that arrives whole (in one read
    with its body, say) is measured by its parts when parsed: the request's target and each
    header's name and value. A request httptools cannot parse gets the 400 uvicorn gives it,
    as problem+json."""

    def __init__(self, *args: Any, max_head_bytes: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_head_bytes = max_head_bytes
        self.reading_head = True
        self.head_bytes = 0
        self.head_over_limit = False

    def data_received(self, data: bytes) -> None:
        if self.reading_head:
            self.head_bytes += len(data)
        super().data_received(data)
        if (
            self.reading_head
            and self.head_bytes > self.max_head_bytes
            and not self.transport.is_closing()
        ):
            self._refuse_head()

    def on_headers_complete(self) -> None:
        self.reading_head = False
        parts = len(self.url) + sum(len(name) + len(value) for name, value in self.headers)
        if parts > self.max_head_bytes:
            self.head_over_limit = True
            raise _HeadOverLimit
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self.reading_head = True
        self.head_bytes = 0

    def send_400_response(self, msg: str) -> None:
        if self.head_over_limit:
            self._refuse_head()
        else:
            self._answer_and_close(MalformedRequest(msg))

    def _refuse_head(self) -> None:
        # Only between responses: a pipelined request's head arriving while another's
        # response is being written gets the connection closed instead.
        if self.cycle is None or self.cycle.response_complete:
            self._answer_and_close(
                HeadTooLarge(f"The request line and headers exceed {self.max_head_bytes} bytes.")
            )
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


def bounded_head_protocol(max_head_bytes: int) -> "partial[BoundedHeadProtocol]":
    """What uvicorn's ``http`` option takes: a protocol factory (it adds its own arguments)."""
    return partial(BoundedHeadProtocol, max_head_bytes=max_head_bytes)
