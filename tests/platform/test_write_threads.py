"""Write routes run in the database's write threads (app/core/write_threads.py), through HTTP
against the real app: which thread runs a write, what the metrics say of them, and a database
disposed and used again."""

import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.memory import service as memory_service
from app.saves import service as saves_service
from tests.conftest import client_for, create_key, make_settings
from tests.helpers import import_save, seed_save

WRITE_THREAD = "context-store-write"


def _decision(number: int) -> dict[str, Any]:
    return {"id": f"dec-{number}", "decision": "Keep it", "rationale": "Measured"}


@pytest.fixture
def threads_seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[str]]]:
    """The name of the thread each decision append and each save's store ran in."""
    seen: dict[str, list[str]] = {"decision": [], "save": []}

    def spy(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            seen[name].append(threading.current_thread().name)
            return original(*args, **kwargs)

        return recorded

    monkeypatch.setattr(memory_service, "create_item", spy("decision", memory_service.create_item))
    monkeypatch.setattr(saves_service, "store_save", spy("save", saves_service.store_save))
    yield seen


def test_a_write_runs_in_a_write_thread_and_a_save_import_in_a_worker(
    client, project, threads_seen
):
    created = client.post(f"/v1/projects/{project}/memory/decisions", json=_decision(1))
    assert created.status_code == 201, created.text
    assert import_save(client, project, seed_save()).status_code == 201
    assert [name.startswith(WRITE_THREAD) for name in threads_seen["decision"]] == [True]
    # The import parses and redacts its large body before its write: not in the queue of the
    # writes behind it.
    assert [name.startswith(WRITE_THREAD) for name in threads_seen["save"]] == [False]


def _gauge(scraper: TestClient, name: str) -> float:
    text = scraper.get("/metrics").text
    found = re.search(rf"^{name} ([0-9.]+)$", text, re.MULTILINE)
    assert found is not None, f"{name} missing from the metrics"
    return float(found.group(1))


def test_metrics_count_the_writes_running_and_queued(database_url, monkeypatch):
    # One write thread on either database: the second write waits for the first.
    settings = make_settings(database_url, worker_threads=1)
    release = threading.Event()
    original = memory_service.create_item

    def held(*args: Any, **kwargs: Any) -> Any:
        assert release.wait(30), "the test never released the write"
        return original(*args, **kwargs)

    monkeypatch.setattr(memory_service, "create_item", held)
    with TestClient(create_app(settings)) as scraper:
        assert _gauge(scraper, "context_store_write_threads_limit") == 1
        client = client_for(scraper.app, create_key(scraper.app, "t-write-threads"))
        answers: list[int] = []

        def append(number: int) -> None:
            path = "/v1/projects/queued/memory/decisions"
            answers.append(client.post(path, json=_decision(number)).status_code)

        senders = [threading.Thread(target=append, args=(n,)) for n in (1, 2)]
        for sender in senders:
            sender.start()
        try:
            deadline = time.monotonic() + 30
            while _gauge(scraper, "context_store_write_threads_waiting") != 1:
                assert time.monotonic() < deadline, "the queued write was never counted"
                time.sleep(0.05)
            assert _gauge(scraper, "context_store_write_threads_busy") == 1
        finally:
            release.set()
            for sender in senders:
                sender.join()
        assert answers == [201, 201]
        assert _gauge(scraper, "context_store_write_threads_busy") == 0
        assert _gauge(scraper, "context_store_write_threads_waiting") == 0


def test_a_database_disposed_and_used_again_still_writes(app, client, project):
    """As its engines do: the app's lifespan may end and start again over one database."""
    app.state.database.dispose()
    created = client.post(f"/v1/projects/{project}/memory/decisions", json=_decision(2))
    assert created.status_code == 201, created.text
