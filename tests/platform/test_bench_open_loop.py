"""The benchmark's open loop reads each answer whole and leaves the connection at the next
one (``tests/bench/load.py``): an answer read short or long would make later requests read
an earlier answer, with a near-zero latency the p50 and p99 would count as the server's."""

import asyncio

import pytest

from tests.bench.load import _read_response

NEXT = b"HTTP/1.1 201 Created\r\n"


@pytest.mark.parametrize(
    ("method", "answer", "expected"),
    [
        ("POST", b"HTTP/1.1 201 Created\r\ncontent-length: 2\r\n\r\n{}", (201, True)),
        ("DELETE", b"HTTP/1.1 204 No Content\r\n\r\n", (204, True)),
        ("GET", b'HTTP/1.1 304 Not Modified\r\netag: "x"\r\n\r\n', (304, True)),
        ("HEAD", b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n", (200, True)),
        (
            "GET",
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n"
            b"3\r\nabc\r\n0\r\nx-trailer: 2\r\n\r\n",
            (200, True),
        ),
        (
            "POST",
            b"HTTP/1.1 100 Continue\r\n\r\n"
            b"HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-length: 1\r\n\r\nz",
            (503, False),
        ),
    ],
)
def test_an_answer_is_read_to_its_end_and_no_further(method, answer, expected):
    async def read() -> tuple[tuple[int, bool], bytes]:
        reader = asyncio.StreamReader()
        reader.feed_data(answer + NEXT)
        reader.feed_eof()
        return await _read_response(reader, method), await reader.read()

    assert asyncio.run(read()) == (expected, NEXT)
