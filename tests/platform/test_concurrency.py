"""Concurrent writers through real server processes: no update is lost, no write fails.

Many client threads run iteration starts (one shared run), reviews (one shared phase), memory
decisions and agent memory appends, each request going to the next server in turn: one
process, or two processes on one database (PostgreSQL, and two processes on one SQLite file).
Every write must be acknowledged: a 503 "database is busy" counts as a failure here (writers
must queue), and so does any 5xx. Then the documents must count every acknowledged write.
"""

import threading
import time
from collections import Counter
from contextlib import ExitStack

import httpx
import pytest

from app.core.migrations import upgrade
from tests.helpers import SOAK, python_indent2, seed_save, tar_gz, untar
from tests.platform.servers import Server, create_key_in, running

THREADS = 12
ROUNDS = 4 * SOAK  # per thread; each round is one write of each kind
P = "/v1/projects/conc"
RUN = P + "/runs/shared"
FEATURE = P + "/features/shared"
AGENT = P + "/agents/shared"


def _prepare(client: httpx.Client) -> None:
    assert client.post(P + "/features", json={"feature_id": "shared"}).status_code == 201
    # Room for every review: the phase must not reach its limit during the test.
    widen = {"iteration_tracking": {"design-l1": {"max_attempts": 10**6}}}
    response = client.patch(FEATURE + "/context", json=widen)
    assert response.status_code == 200, response.text


def _writes(thread: int, round_: int) -> list[tuple[str, str, dict]]:
    name = f"t{thread}-r{round_}"
    return [
        ("start", RUN + "/iterations", {"bead_id": f"bead-{thread}"}),
        ("review", FEATURE + "/reviews", {"phase": "design-l1", "outcome": "REJECTED"}),
        ("decision", P + "/memory/decisions", {"id": name, "decision": name, "timestamp": 1}),
        (
            "episodic",
            AGENT + "/memory/episodic",
            {"id": name, "ts": 1.0, "turn_ids": [name], "summary": name, "salience": 0.5},
        ),
    ]


def _client(server: Server, key: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def _load(servers: list[Server], key: str) -> tuple[Counter[str], list[str]]:
    acknowledged: Counter[str] = Counter()
    failures: list[str] = []
    lock = threading.Lock()

    def work(thread: int) -> None:
        clients = [_client(server, key) for server in servers]
        sent = 0
        for round_ in range(ROUNDS):
            for kind, url, body in _writes(thread, round_):
                # Alternate between the servers, request by request.
                response = clients[sent % len(clients)].post(url, json=body)
                sent += 1
                with lock:
                    if response.status_code in (200, 201):
                        acknowledged[kind] += 1
                    else:
                        failures.append(f"{kind}: {response.status_code} {response.text[:200]}")
        for client in clients:
            client.close()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    return acknowledged, failures


def _lost(client: httpx.Client, acknowledged: Counter[str]) -> dict[str, int]:
    """How many acknowledged writes each document is missing."""
    state = client.get(RUN + "/state").json()
    context = client.get(FEATURE + "/context").json()
    decisions = client.get(P + "/memory/files/key-decisions.json").json()
    episodic = client.get(AGENT + "/memory/episodic", headers={"Accept": "application/x-ndjson"})
    counted = {
        "start": state["iteration"],
        "start attempts": sum(entry["attempts"] for entry in state["history"].values()),
        "review": context["iteration_tracking"]["design-l1"]["attempts"],
        "review entries": len(context["iteration_tracking"]["design-l1"]["reviews"]),
        "decision": len(decisions),
        "episodic": len(episodic.text.splitlines()),
    }
    return {
        name: acknowledged[name.split()[0]] - value
        for name, value in counted.items()
        if value != acknowledged[name.split()[0]]
    }


@pytest.mark.parametrize("processes", [1, 2])
def test_concurrent_writers_lose_nothing(backend, tmp_path, record_property, processes):
    database_url = backend.new_database_url()
    upgrade(database_url)
    key = create_key_in(database_url, "conc")
    with ExitStack() as stack:
        servers = []
        for n in range(processes):
            server = Server(database_url, tmp_path / f"server-{n}.log")
            stack.callback(server.stop)
            server.start()
            servers.append(server)
        with _client(servers[0], key) as client:
            _prepare(client)
        acknowledged, failures = _load(servers, key)
        with _client(servers[-1], key) as client:
            lost = _lost(client, acknowledged)
    record_property("concurrent_operations", sum(acknowledged.values()) + len(failures))
    record_property("concurrent_updates_lost", sum(lost.values()))
    assert not failures, f"{len(failures)} writes failed: {failures[:5]}"
    assert not lost, lost
    assert sum(acknowledged.values()) == THREADS * ROUNDS * 4


MIXED_CLIENTS = 64
MIXED_TENANTS = 4
ARCHIVED_SAVES = 200
# Each round starts with 64 archive downloads at once; an export of 200 saves takes about a
# second of CPU.
MIXED_ROUNDS = 1 + SOAK // 4


def _archive_of_saves(count: int) -> bytes:
    files = {}
    for n in range(count):
        document = seed_save()
        document["timestamp"] = f"2024-01-15T{n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z"
        files[f"mdan/mdan-save-{n}.json"] = python_indent2(document)
    return tar_gz(files)


def _get_honouring_retry_after(client: httpx.Client, url: str) -> tuple[httpx.Response, int]:
    """A GET, sent again after a 429 once its Retry-After has passed (RFC 6585), as a
    well-behaved client does; with the number of 429s."""
    refusals = 0
    while (response := client.get(url)).status_code == 429 and refusals < 10:
        refusals += 1
        time.sleep(int(response.headers["Retry-After"]))
    return response, refusals


def _mixed_round(client: httpx.Client, name: str) -> tuple[list[httpx.Response], int]:
    """An archive download first (all clients start with one at once), a write, two reads;
    and how many times the archive was refused for a while (429)."""
    archive, refusals = _get_honouring_retry_after(client, P + "/archive")
    if archive.is_success:
        saves = [name for name in untar(archive.content) if name.startswith("mdan/")]
        assert len(saves) == ARCHIVED_SAVES
    responses = [
        archive,
        client.post(P + "/memory/decisions", json={"id": name, "decision": name, "timestamp": 1}),
        client.get(P + "/saves/latest"),
        client.get(P + "/memory/files/key-decisions.json"),
    ]
    return responses, refusals


def test_64_mixed_clients_with_archive_downloads_all_succeed(backend, tmp_path, record_property):
    database_url = backend.new_database_url()
    upgrade(database_url)
    keys = [create_key_in(database_url, f"mixed-{n}") for n in range(MIXED_TENANTS)]
    archive = _archive_of_saves(ARCHIVED_SAVES)
    answered: Counter[int] = Counter()
    failures: list[str] = []
    lock = threading.Lock()
    with running(database_url, tmp_path / "server.log") as server:
        for key in keys:
            with _client(server, key) as client:
                report = client.post(
                    P + "/archive", content=archive, headers={"Content-Type": "application/gzip"}
                ).json()
                assert len(report["imported"]) == ARCHIVED_SAVES, report

        def work(number: int) -> None:
            with _client(server, keys[number % MIXED_TENANTS]) as client:
                for round_ in range(MIXED_ROUNDS):
                    try:
                        responses, refusals = _mixed_round(client, f"c{number}-r{round_}")
                    except httpx.HTTPError as exc:
                        with lock:
                            failures.append(f"{type(exc).__name__}: {exc}")
                        continue
                    with lock:
                        answered[429] += refusals
                        for response in responses:
                            answered[response.status_code] += 1
                            if not response.is_success:
                                failures.append(
                                    f"{response.request.method} {response.request.url.path}: "
                                    f"{response.status_code} {response.text[:200]}"
                                )

        threads = [threading.Thread(target=work, args=(n,)) for n in range(MIXED_CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
        assert not any(thread.is_alive() for thread in threads), "a client hung"
    record_property("mixed_requests", sum(answered.values()) + len(failures))
    record_property("mixed_requests_failed", len(failures))
    record_property("mixed_archive_exports_told_to_retry", answered[429])
    assert not failures, f"{len(failures)} of {sum(answered.values())} failed: {failures[:5]}"
    assert sum(answered.values()) - answered[429] == MIXED_CLIENTS * MIXED_ROUNDS * 4
