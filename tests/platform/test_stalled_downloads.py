"""Clients that ask for an archive and stop reading, against a live `context-store serve`.

A stalled reader is a raw socket that sends the GET and never reads: the server's writes fill
the socket's buffers and then wait. While they wait, the response must hold no database
connection and no worker thread (other tenants' requests all succeed), the server's memory must
stay bounded, the exports each tenant and the server run at once are bounded (429 with
Retry-After beyond), and a reader that makes no progress for the send timeout is dropped.
"""

import base64
import io
import os
import re
import select
import socket
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

import httpx

from app.core.migrations import upgrade
from app.core.security import Scope
from tests.helpers import SOAK, assert_problem, python_indent2, seed_save
from tests.platform.servers import Server, create_key_in, running

MIB = 1024 * 1024
# Large enough that an archive (12 MiB) outgrows every buffer between the server and a reader
# that never reads (the kernel's, uvicorn's), so that the server's writes have to wait; of
# incompressible text, so that building it costs little CPU.
BIG_SAVES = 8
BIG_SAVE_BYTES = 3 * MIB // 2
STALLED = 30
# Generous: only a hang (or a 30 s pool timeout) comes near it.
ANSWERED_WITHIN = 120.0


def _client(server: Server, key: str) -> httpx.Client:
    return httpx.Client(
        base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=ANSWERED_WITHIN
    )


def _fill_big_project(client: httpx.Client, project: str) -> None:
    """Saves of incompressible text, so that the archive is as large as they are."""
    for n in range(BIG_SAVES):
        document = seed_save()
        document["timestamp"] = f"2024-01-15T10:{n:02d}:00Z"
        document["x_padding"] = base64.b64encode(os.urandom(BIG_SAVE_BYTES * 3 // 4)).decode()
        response = client.post(
            f"/v1/projects/{project}/saves",
            content=python_indent2(document),
            headers={"Content-Type": "application/json"},
        )
        assert response.status_code == 201, response.text


def _stalled_reader(server: Server, key: str, project: str) -> socket.socket:
    reader = socket.socket()
    # A small receive window, set before connecting: the server's writes stall sooner.
    reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    reader.connect(("127.0.0.1", server.port))
    reader.sendall(
        (
            f"GET /v1/projects/{project}/archive HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {key}\r\n\r\n"
        ).encode()
    )
    return reader


def _wait_answered(readers: list[socket.socket]) -> None:
    """Until the server has begun answering every reader (without reading a byte)."""
    waiting = list(readers)
    deadline = time.monotonic() + ANSWERED_WITHIN
    while waiting and time.monotonic() < deadline:
        ready, _, _ = select.select(waiting, [], [], 1.0)
        waiting = [reader for reader in waiting if reader not in ready]
    assert not waiting, f"{len(waiting)} readers got no answer"


@contextmanager
def _stalled(server: Server, key: str, project: str, count: int) -> Iterator[list[socket.socket]]:
    readers = [_stalled_reader(server, key, project) for _ in range(count)]
    try:
        _wait_answered(readers)
        yield readers
    finally:
        for reader in readers:
            reader.close()


def _in_parallel(work: list[Callable[[], list[str]]]) -> list[str]:
    """Run each piece of work in its own thread; the failures they report, together."""
    failures: list[str] = []
    lock = threading.Lock()

    def run(piece: Callable[[], list[str]]) -> None:
        try:
            found = piece()
        except httpx.HTTPError as exc:
            found = [f"{type(exc).__name__}: {exc}"]
        with lock:
            failures.extend(found)

    threads = [threading.Thread(target=run, args=(piece,)) for piece in work]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=2 * ANSWERED_WITHIN)
    assert not any(thread.is_alive() for thread in threads), "a request hung"
    return failures


def _tenant_requests(server: Server, key: str, project: str) -> list[str]:
    """One of each kind of request; the ones that were not answered 2xx."""
    failures = []
    with _client(server, key) as client:
        document = seed_save()
        responses = [
            client.post(
                f"/v1/projects/{project}/saves",
                content=python_indent2(document),
                headers={"Content-Type": "application/json"},
            ),
            client.get(f"/v1/projects/{project}/saves"),
            client.get(f"/v1/projects/{project}/saves/latest"),
            client.post(
                f"/v1/projects/{project}/memory/decisions",
                json={"id": "d1", "decision": "keep going", "timestamp": 1},
            ),
            client.get(f"/v1/projects/{project}/memory/files/key-decisions.json"),
            client.get(f"/v1/projects/{project}/archive"),
        ]
        for response in responses:
            if not response.is_success:
                failures.append(
                    f"{response.request.method} {response.request.url.path}: "
                    f"{response.status_code} {response.text[:200]}"
                )
    return failures


def test_stalled_archive_readers_hold_nothing_other_tenants_need(
    backend, tmp_path, record_property
):
    database_url = backend.new_database_url()
    upgrade(database_url)
    owner = create_key_in(database_url, "stalls")
    read_only = create_key_in(database_url, "stalls", frozenset({Scope.read}))
    others = [create_key_in(database_url, f"other-{n}") for n in range(3)]
    settings = {
        # Every reader gets its export, so that all of them stall in the middle of a body,
        # and the other tenants' exports still find turns.
        "ARCHIVE_EXPORTS_PER_TENANT": str(STALLED),
        "ARCHIVE_EXPORTS_PER_SERVER": str(2 * STALLED),
        # The readers stay for the whole test.
        "SEND_TIMEOUT_SECONDS": "600",
        # A request that waits for a connection held by a stalled reader fails sooner.
        "DB_POOL_TIMEOUT_SECONDS": "10",
    }
    with running(database_url, tmp_path / "server.log", settings) as server:
        with _client(server, owner) as client:
            _fill_big_project(client, "big")
            assert client.get("/v1/projects/big/archive").status_code == 200
        before = server.rss_bytes()
        with _stalled(server, read_only, "big", STALLED):
            stalled = server.rss_bytes()
            failures = _in_parallel(
                [lambda key=key: _tenant_requests(server, key, "mine") for key in others * SOAK]
            )
            after_requests = server.rss_bytes()
    record_property("stalled_readers", STALLED)
    record_property(f"stalled_rss_before_mib_{backend.name}", before // MIB)
    record_property(f"stalled_rss_with_readers_mib_{backend.name}", stalled // MIB)
    record_property(f"stalled_rss_after_requests_mib_{backend.name}", after_requests // MIB)
    assert not failures, f"{len(failures)} requests failed: {failures[:5]}"
    # Each stalled export may keep its spool's memory part (1 MiB by default) and a socket's
    # buffers; an export that kept its documents would take the archive (12 MiB) each.
    assert max(stalled, after_requests) - before < 200 * MIB


def _wait_for_metric(
    server: Server, name: str, value: float, within: float = ANSWERED_WITHIN
) -> None:
    pattern = re.compile(rf"^{name} ([0-9.e+-]+)$", re.MULTILINE)
    deadline = time.monotonic() + within
    found = None
    while time.monotonic() < deadline:
        found = pattern.search(httpx.get(server.url + "/metrics").text)
        if found is not None and float(found.group(1)) == value:
            return
        time.sleep(0.2)
    raise AssertionError(f"{name} is {found and found.group(1)}, not {value}")


def _read_to_end(reader: socket.socket) -> bytes:
    reader.settimeout(ANSWERED_WITHIN)
    received = bytearray()
    while chunk := reader.recv(1 << 16):
        received += chunk
    return bytes(received)


def _content_length(head: bytes) -> int:
    return int(
        next(
            line.split(b":", 1)[1]
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
    )


def test_exports_beyond_the_limits_are_429_and_a_stalled_reader_is_dropped(backend, tmp_path):
    database_url = backend.new_database_url()
    upgrade(database_url)
    keys = {tenant: create_key_in(database_url, tenant) for tenant in ("a", "b", "c")}
    settings = {
        "ARCHIVE_EXPORTS_PER_TENANT": "1",
        "ARCHIVE_EXPORTS_PER_SERVER": "2",
        "ARCHIVE_EXPORT_WAIT_SECONDS": "0",
        # Long enough for the requests below to find the first readers still held.
        "SEND_TIMEOUT_SECONDS": "15",
    }
    with ExitStack() as stack:
        server = stack.enter_context(running(database_url, tmp_path / "server.log", settings))
        clients = {
            tenant: stack.enter_context(_client(server, key)) for tenant, key in keys.items()
        }
        for tenant in ("a", "b"):
            _fill_big_project(clients[tenant], "p")
        clients["c"].post("/v1/projects/p/memory/decisions", json={"id": "d", "decision": "d"})

        first = stack.enter_context(_stalled(server, keys["a"], "p", 1))[0]
        refused = clients["a"].get("/v1/projects/p/archive")
        assert_problem(refused, 429)
        assert int(refused.headers["Retry-After"]) >= 1
        second = stack.enter_context(_stalled(server, keys["b"], "p", 1))[0]
        # a's limit is a's own: b's export went ahead; now the server's limit is reached too.
        assert_problem(clients["c"].get("/v1/projects/p/archive"), 429)

        # The readers read nothing until the server has dropped them both.
        _wait_for_metric(server, "context_store_archive_exports_running", 0)
        for reader in (first, second):
            head, _, body = _read_to_end(reader).partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 ")
            # The server hung up before the end: the reader was dropped, not served.
            assert len(body) < _content_length(head)

        for tenant in ("a", "c"):
            assert clients[tenant].get("/v1/projects/p/archive").status_code == 200


def test_a_client_that_goes_away_while_it_waits_for_a_turn_leaves_its_place(backend, tmp_path):
    """Three clients ask for an archive while their tenant's one export turn is held by a
    reader that does not read, then go away: they leave the waiters at once, where they kept
    their places until a turn came (or the wait's 60 s ran out), then had an archive built
    for nobody. The turn stays with the reader it is held by."""
    database_url = backend.new_database_url()
    upgrade(database_url)
    key = create_key_in(database_url, "a")
    settings = {
        "ARCHIVE_EXPORTS_PER_TENANT": "1",
        "ARCHIVE_EXPORTS_PER_SERVER": "2",
        "ARCHIVE_EXPORT_WAIT_SECONDS": "60",
        "SEND_TIMEOUT_SECONDS": "60",
    }
    with running(database_url, tmp_path / "server.log", settings) as server:
        with _client(server, key) as client:
            _fill_big_project(client, "p")
        with _stalled(server, key, "p", 1):
            waiters = [_stalled_reader(server, key, "p") for _ in range(3)]
            _wait_for_metric(server, "context_store_archive_exports_waiting", 3)
            for waiter in waiters:
                waiter.close()
            # The waiters look every 50 ms: seconds are room enough for a loaded machine.
            _wait_for_metric(server, "context_store_archive_exports_waiting", 0, within=10)
            _wait_for_metric(server, "context_store_archive_exports_running", 1, within=5)


def test_a_slow_reader_is_served_to_the_end(backend, tmp_path):
    """The server's sends wait while a reader with a small window reads in small pieces, and
    each goes on where it stopped once the reader has taken enough: the whole archive arrives
    (over 8 MiB: it outgrows every buffer between the two, so that the server's sends wait),
    every member byte for byte."""
    database_url = backend.new_database_url()
    upgrade(database_url)
    key = create_key_in(database_url, "slow")
    with running(database_url, tmp_path / "server.log", {"SEND_TIMEOUT_SECONDS": "30"}) as server:
        with _client(server, key) as client:
            _fill_big_project(client, "big")
            expected = _archive_members(client.get("/v1/projects/big/archive").content)
        reader = _stalled_reader(server, key, "big")
        with reader:
            received = bytearray()
            for _ in range(20):  # a second of trickle, every buffer between the two full
                time.sleep(0.05)
                received += reader.recv(4096)
            reader.settimeout(ANSWERED_WITHIN)
            while b"\r\n\r\n" not in received:
                received += reader.recv(1 << 16)
            head, _, body = bytes(received).partition(b"\r\n\r\n")
            body_bytes = bytearray(body)
            while len(body_bytes) < _content_length(head) and (chunk := reader.recv(1 << 16)):
                body_bytes += chunk
    assert head.startswith(b"HTTP/1.1 200 ")
    body = bytes(body_bytes)
    assert len(body) == _content_length(head) > 8 * MIB
    # Every member whole (each export's archive is built anew: its bytes may differ).
    assert _archive_members(body) == expected


def _archive_members(archive: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
