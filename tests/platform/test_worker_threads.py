"""Tenants take turns for the worker threads (app/core/fair.py), through HTTP against the real
app: one tenant holds the worker thread with slow work and has more queued for it, and
another tenant's request is served ahead of that queue. First come first served, 256
connections of one tenant over 256 projects made another's requests wait 555-767 ms at the
median on PostgreSQL (2026-11-27).

Each test counts in what order the requests reached their work, never how long they took."""

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.core.fair import FairThreads, act_for
from app.main import create_app
from app.memory import service as memory_service
from tests.conftest import create_key, make_settings

# One thread, so that the requests run one at a time, in the order they were given it (with
# two, two requests given threads one after the other could reach their work in either order).
THREADS = 1
# Requests of the flood that wait for a thread behind the ones holding them.
QUEUED = 4


def _wait_until(what: str, done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 30
    while not done():
        assert time.monotonic() < deadline, f"never {what}"
        time.sleep(0.01)


def _threads(scraper: TestClient) -> tuple[int, int]:
    """Worker threads busy, and requests waiting for one: read on the app's event loop, whose
    limiter it is (``/metrics`` would wait for a thread itself)."""
    limiter = scraper.app.state.worker_threads  # type: ignore[attr-defined]
    statistics = scraper.portal.call(limiter.statistics)  # type: ignore[union-attr]
    return statistics.borrowed_tokens, statistics.tasks_waiting


@pytest.fixture
def scraper(database_url: str) -> Iterator[TestClient]:
    """An app of the test's own with one worker thread, entered, so that every request sent
    through it runs on its one event loop, as under a server; keys remembered for the test's
    length, so that none is looked up in a thread of its own."""
    app = create_app(make_settings(database_url, worker_threads=THREADS, auth_cache_seconds=600))
    with TestClient(app) as entered:
        yield entered


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set to let the held requests' work go on."""
    event = threading.Event()
    yield event
    event.set()


def _hold_and_record(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    label_of: Callable[..., str],
    release: threading.Event,
) -> list[str]:
    """``memory_service.name`` patched to record each call's label, in the order they run,
    and to wait for ``release`` in the calls labelled ``held-*``."""
    ran: list[str] = []
    original = getattr(memory_service, name)

    def recorded(*args: Any, **kwargs: Any) -> Any:
        label = label_of(*args)
        ran.append(label)
        if label.startswith("held"):
            assert release.wait(30), "the test never released the held work"
        return original(*args, **kwargs)

    monkeypatch.setattr(memory_service, name, recorded)
    return ran


def _send(scraper: TestClient, key: str, method: str, path: str, **kwargs: Any) -> threading.Thread:
    headers = {"Authorization": f"Bearer {key}"}
    sender = threading.Thread(
        target=lambda: scraper.request(method, path, headers=headers, **kwargs)
    )
    sender.start()
    return sender


def _decision(label: str) -> dict[str, str]:
    return {"id": label, "decision": "Keep it", "rationale": "Measured"}


def test_a_tenants_read_is_served_ahead_of_another_tenants_reads_queued_for_a_thread(
    scraper, monkeypatch, release
):
    """Both databases: a sync route's work (a list of decisions) waits for a worker thread."""
    app = scraper.app
    flood, other = create_key(app, "t-flood"), create_key(app, "t-other")
    for key in (flood, other):  # their projects made, their keys remembered
        headers = {"Authorization": f"Bearer {key}"}
        posted = scraper.post(
            "/v1/projects/p/memory/decisions", json=_decision("d"), headers=headers
        )
        assert posted.status_code == 201, posted.text
    ran = _hold_and_record(monkeypatch, "list_items", lambda *args: args[4].category or "", release)
    path = "/v1/projects/p/memory/decisions"
    senders: list[threading.Thread] = []
    try:
        for n in range(THREADS):
            senders.append(_send(scraper, flood, "GET", path, params={"category": f"held-{n}"}))
        _wait_until("every thread held", lambda: _threads(scraper) == (THREADS, 0))
        for n in range(QUEUED):
            senders.append(_send(scraper, flood, "GET", path, params={"category": f"flood-{n}"}))
            _wait_until(f"{n + 1} waiting", lambda n=n: _threads(scraper) == (THREADS, n + 1))
        senders.append(_send(scraper, other, "GET", path, params={"category": "other"}))
        _wait_until("the other waiting", lambda: _threads(scraper) == (THREADS, QUEUED + 1))
    finally:
        release.set()
        for sender in senders:
            sender.join(30)
    assert sorted(ran[:THREADS]) == [f"held-{n}" for n in range(THREADS)]
    # The flood's tenant came first, so one of its reads may run first; never more (first
    # come first served, all four did).
    assert ran[THREADS:].index("other") <= 1, ran


def test_a_tenants_write_is_served_ahead_of_another_tenants_writes_queued_for_their_turn(
    scraper, monkeypatch, release
):
    """PostgreSQL: the flood's writes, into a project each, each take a worker thread for
    their project's turn, and the rest wait for one. SQLite: they wait for the one write
    turn, in which tenants take turns already (``tests/platform/test_write_turns.py``)."""
    app = scraper.app
    turns = app.state.database.write_turns
    flood, other = create_key(app, "t-flood"), create_key(app, "t-other")
    for key in (flood, other):  # their keys remembered
        listed = scraper.get("/v1/projects", headers={"Authorization": f"Bearer {key}"})
        assert listed.status_code == 200, listed.text
    ran = _hold_and_record(
        monkeypatch, "create_item", lambda _write, _kind, raw: json.loads(raw)["id"], release
    )

    # One write holds SQLite's writer, or on PostgreSQL the worker thread, for its project's
    # turn.
    held = THREADS

    def waiting(count: int) -> bool:
        if turns.one_writer:
            return (turns.busy, turns.waiting) == (1, count)
        return _threads(scraper) == (THREADS, count)

    senders: list[threading.Thread] = []
    try:
        for n in range(held):
            senders.append(
                _send(
                    scraper,
                    flood,
                    "POST",
                    f"/v1/projects/held-{n}/memory/decisions",
                    json=_decision(f"held-{n}"),
                )
            )
        _wait_until("every thread held", lambda: waiting(0))
        for n in range(QUEUED):
            senders.append(
                _send(
                    scraper,
                    flood,
                    "POST",
                    f"/v1/projects/flood-{n}/memory/decisions",
                    json=_decision(f"flood-{n}"),
                )
            )
            _wait_until(f"{n + 1} waiting", lambda n=n: waiting(n + 1))
        senders.append(
            _send(
                scraper,
                other,
                "POST",
                "/v1/projects/other/memory/decisions",
                json=_decision("other"),
            )
        )
        _wait_until("the other waiting", lambda: waiting(QUEUED + 1))
    finally:
        release.set()
        for sender in senders:
            sender.join(30)
    assert sorted(ran[:held]) == [f"held-{n}" for n in range(held)]
    assert ran[held:].index("other") <= 1, ran


def test_a_request_cancelled_while_it_waits_for_a_thread_leaves_no_thread_behind():
    """A request gone while it waits (its client disconnected) leaves the queue, and one
    handed a thread as it was cancelled hands the thread on, rather than hold it for ever."""

    async def waiting_for_a_thread(
        threads: FairThreads, tenant: str, borrower: str
    ) -> asyncio.Task[None]:
        act_for(tenant)  # the task made next inherits it
        task = asyncio.ensure_future(threads.acquire_on_behalf_of(borrower))
        await asyncio.sleep(0)
        return task

    async def scenario() -> None:
        threads = FairThreads(1)
        await threads.acquire_on_behalf_of("holder")
        gone = await waiting_for_a_thread(threads, "t-a", "gone")
        handed = await waiting_for_a_thread(threads, "t-b", "handed")
        last = await waiting_for_a_thread(threads, "t-c", "last")
        assert threads.statistics().tasks_waiting == 3
        gone.cancel()
        await asyncio.sleep(0)
        assert threads.statistics().tasks_waiting == 2
        threads.release_on_behalf_of("holder")  # to "handed", cancelled before it runs
        handed.cancel()
        await asyncio.gather(handed, return_exceptions=True)
        await asyncio.wait_for(last, 30)  # never, were the thread held by "handed"
        assert threads.statistics().borrowers == ("last",)
        assert threads.statistics().tasks_waiting == 0

    asyncio.run(scenario())
