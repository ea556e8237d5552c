"""A request's head (request line and headers) is bounded: `context-store serve` answers a
head over the limit with a 431 problem as soon as it is over, instead of buffering whatever
a client sends, and goes on serving. Through a real server process on a raw socket, since the
limit is the HTTP server's, not the app's."""

import asyncio
import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
import uvicorn

from app.core.config import Settings
from app.core.http_server import bounded_request_protocol
from tests.platform.servers import Server, create_key_in, free_port, running

LIMIT = Settings().max_header_bytes


@pytest.fixture(scope="module")
def server(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running(database_url, tmp_path_factory.mktemp("head") / "server.log") as started:
        yield started


def _send_head(server: Server, head: bytes, chunk: int = 64 * 1024) -> bytes:
    """Sends ``head`` a chunk at a time and returns what the server answered: as soon as it
    answers (it may hang up before the head is complete), or after the whole head."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as connection:
        try:
            for start in range(0, len(head), chunk):
                connection.sendall(head[start : start + chunk])
                if select.select([connection], [], [], 0)[0]:
                    break
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server stopped reading: its answer is waiting
        received = b""
        deadline = time.monotonic() + 30
        while b"\r\n\r\n" not in received and time.monotonic() < deadline:
            try:
                data = connection.recv(65536)
            except ConnectionResetError:
                break
            if not data:
                break
            received += data
        return received


def _head(*headers: bytes) -> bytes:
    return b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"".join(headers) + b"\r\n"


def _status(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    return int(answer.split(b" ", 2)[1])


@pytest.mark.parametrize(
    "head",
    [
        _head(b"X-Padding: " + b"a" * (8 * 1024 * 1024) + b"\r\n"),
        _head(*[b"X-Padding-%d: %s\r\n" % (n, b"b" * 100) for n in range(20_000)]),
        b"GET /healthz?" + b"q" * (4 * 1024 * 1024) + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    ],
    ids=["one huge header", "many headers", "a huge request line"],
)
def test_a_head_over_the_limit_is_a_431_and_the_server_goes_on(server: Server, head: bytes):
    answer = _send_head(server, head)
    assert _status(answer) == 431
    head_part, _, body = answer.partition(b"\r\n\r\n")
    assert b"content-type: application/problem+json" in head_part.lower()
    if body:
        assert json.loads(body)["status"] == 431
    assert httpx.get(server.url + "/healthz", timeout=10).status_code == 200


def test_a_head_within_the_limit_is_served(server: Server):
    padding = b"X-Padding: " + b"c" * (LIMIT - 1024) + b"\r\n"
    assert _status(_send_head(server, _head(padding))) == 200


def test_a_head_over_the_limit_that_arrives_whole_is_a_431(server: Server):
    """Sent in one piece, the head may be parsed whole within one read: it is measured by its
    parts then (before, one of up to about twice the limit was served)."""
    head = _head(b"X-Padding: " + b"d" * (LIMIT + 4096) + b"\r\n")
    answer = _send_head(server, head, chunk=len(head))
    assert _status(answer) == 431
    assert httpx.get(server.url + "/healthz", timeout=10).status_code == 200


@pytest.mark.parametrize(
    "request_",
    [
        b"POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: abc\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Bad: a\x01b\r\n\r\n",
        b"get /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        b"GET /healthz HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n",
    ],
    ids=[
        "a Content-Length not a number",
        "a control byte in a header",
        "a lowercase method",
        "HTTP/9.9",
    ],
)
def test_a_request_the_server_cannot_parse_is_a_400_problem(server: Server, request_: bytes):
    answer = _send_head(server, request_)
    assert _status(answer) == 400
    head_part, _, body = answer.partition(b"\r\n\r\n")
    assert b"content-type: application/problem+json" in head_part.lower()
    assert json.loads(body)["type"] == "urn:context-store:problem:malformed-request"
    assert httpx.get(server.url + "/healthz", timeout=10).status_code == 200


READ_TIMEOUT = 1.0


@pytest.fixture(scope="module")
def impatient(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    log = tmp_path_factory.mktemp("impatient") / "server.log"
    settings = {"READ_TIMEOUT_SECONDS": str(READ_TIMEOUT)}
    with running(database_url, log, settings) as started:
        yield started


def _answer_to(server: Server, sent: list[bytes], pause: float = 0.0) -> tuple[bytes, float]:
    """What the server answered to ``sent`` (its pieces ``pause`` apart) before it closed the
    connection, and how long after the last piece it closed it (at most 10 s is waited)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as connection:
        for piece in sent:
            connection.sendall(piece)
            time.sleep(pause)
        last = time.monotonic()
        received = b""
        while True:
            try:
                data = connection.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not data:
                break
            received += data
        return received, time.monotonic() - last


def test_a_connection_that_sends_nothing_is_closed(impatient: Server):
    answer, closed_after = _answer_to(impatient, [])
    assert closed_after < 5 * READ_TIMEOUT
    assert answer == b"" or _status(answer) == 408


def test_a_head_that_never_ends_is_a_408(impatient: Server):
    answer, closed_after = _answer_to(impatient, [b"GET /healthz HTTP/1.1\r\nHost: x\r\n"])
    assert closed_after < 5 * READ_TIMEOUT
    assert _status(answer) == 408
    assert json.loads(answer.partition(b"\r\n\r\n")[2])["status"] == 408


def test_a_body_that_stops_halfway_has_its_connection_closed(impatient: Server):
    head = b"POST /v1/projects/p/memory/decisions HTTP/1.1\r\nHost: x\r\n"
    head += b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    _answer, closed_after = _answer_to(impatient, [head + b'{"id": "d"'])
    assert closed_after < 5 * READ_TIMEOUT


def test_a_slow_body_that_keeps_coming_is_served(database_url: str, impatient: Server):
    """The body's timeout is a pause's: bytes half a timeout apart keep it going."""
    key = create_key_in(database_url, "impatient")
    body = b'{"id": "dec-slow", "decision": "sent two bytes at a time"}'
    head = b"POST /v1/projects/p/memory/decisions HTTP/1.1\r\nHost: x\r\n"
    head += b"Authorization: Bearer %s\r\nContent-Type: application/json\r\n" % key.encode()
    head += b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body)
    pieces = [head, *[body[i : i + 8] for i in range(0, len(body), 8)]]
    answer, _closed_after = _answer_to(impatient, pieces, pause=READ_TIMEOUT / 2)
    assert _status(answer) == 201, answer[:300]


# The protocol under a bare app that takes its time, on uvicorn in a thread: what the read
# timeout must not cut, and the idle connection it must. (A review found the first three cut
# by the body's timer, and the last left open.)
APP_DELAY = 2.5 * READ_TIMEOUT


async def _patient_app(scope: dict, receive, send) -> None:  # type: ignore[no-untyped-def]
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await asyncio.sleep(APP_DELAY)  # a busy thread pool before the body is read, say
    body = b""
    if scope["path"] == "/echo":
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
    answer = b"%d" % len(body)
    headers = [(b"content-length", b"%d" % len(answer))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": answer})


@contextmanager
def _serving_patient_app(keep_alive: int, read_timeout: float) -> Iterator[int]:
    """``_patient_app`` under uvicorn with the bounded protocol, in a thread; its port."""
    port = free_port()
    config = uvicorn.Config(
        _patient_app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        timeout_keep_alive=keep_alive,
        http=bounded_request_protocol(LIMIT, read_timeout),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture(scope="module")
def patient() -> Iterator[int]:
    with _serving_patient_app(1, READ_TIMEOUT) as port:
        yield port


def _exchange(port: int, *pieces: bytes, wait_for: bytes = b"", answers: int = 1) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        received = b""
        for piece in pieces:
            connection.sendall(piece)
            while wait_for and wait_for not in received:
                data = connection.recv(65536)
                if not data:
                    return received  # closed before it asked for the rest
                received += data
        while received.count(b"HTTP/1.1 200") < answers:
            data = connection.recv(65536)
            if not data:
                break
            received += data
        return received


def test_a_body_the_app_reads_late_is_not_cut(patient: int):
    """Past uvicorn's buffer it stops reading, and the client cannot send."""
    body = b"x" * 200_000
    head = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
    assert _exchange(patient, head + body).endswith(b"200000")


def test_a_client_waiting_for_100_continue_is_not_cut(patient: int):
    head = b"POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"
    answer = _exchange(patient, head, b"hello", wait_for=b"100 Continue")
    assert answer.endswith(b"5")


def test_a_request_queued_behind_another_is_not_cut(patient: int):
    first = b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
    second = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhello"
    answer = _exchange(patient, first + second, b"world", answers=2)
    assert answer.count(b"HTTP/1.1 200") == 2 and answer.endswith(b"10")


def test_a_connection_idle_after_an_early_answer_is_closed(impatient: Server):
    """Answered before its body came (a 401: no key), then the body, then nothing."""
    head = b"POST /v1/projects/p/memory/decisions HTTP/1.1\r\nHost: x\r\n"
    head += b"Content-Type: application/json\r\nContent-Length: 5\r\n\r\n"
    with socket.create_connection(("127.0.0.1", impatient.port), timeout=10) as connection:
        connection.sendall(head)
        assert _status(connection.recv(65536)) == 401
        connection.sendall(b"hello")
        started = time.monotonic()
        while connection.recv(65536):
            pass
        assert time.monotonic() - started < 5 * READ_TIMEOUT


KEEP_ALIVE = 1.0
HEAD_DEADLINE = 10.0


@pytest.fixture(scope="module")
def keeping_alive() -> Iterator[int]:
    """A server whose keep-alive timeout is far below its heads' deadline."""
    with _serving_patient_app(int(KEEP_ALIVE), HEAD_DEADLINE) as port:
        yield port


def test_a_new_connection_that_sends_nothing_is_closed_as_an_idle_one_is(keeping_alive: int):
    """Within the keep-alive timeout, not the head's deadline: 20,000 connections that sent
    nothing held every file descriptor for 30 s each (2026-11-27)."""
    with socket.create_connection(("127.0.0.1", keeping_alive), timeout=3 * HEAD_DEADLINE) as c:
        started = time.monotonic()
        assert c.recv(65536) == b""
        assert time.monotonic() - started < HEAD_DEADLINE / 2


def test_a_head_that_has_begun_has_the_heads_deadline(keeping_alive: int):
    """Its first byte ends the idle wait: a head sent slowly for longer than the keep-alive
    timeout, within its own deadline, is served."""
    head = b"GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    pieces = [head[:10], head[10:20], head[20:30], head[30:]]
    with socket.create_connection(("127.0.0.1", keeping_alive), timeout=3 * HEAD_DEADLINE) as c:
        for piece in pieces:
            c.sendall(piece)
            time.sleep(KEEP_ALIVE * 0.8)
        answer = c.recv(65536)
    assert answer.startswith(b"HTTP/1.1 200 "), answer[:200]
