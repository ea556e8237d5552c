"""SQLite's WAL checkpoints happen in a thread of their own, not inside a request's commit
(app/core/checkpoints.py): a commit that checkpointed cost its request 4-8 ms, the p99."""

import re
import threading
import time

from fastapi.testclient import TestClient
from sqlalchemy import text

from app.core.checkpoints import BACKSTOP_PAGES
from app.main import create_app
from tests.conftest import client_for, create_key, make_settings
from tests.helpers import import_save, seed_save


def _checkpoints(scraper: TestClient) -> tuple[float, float]:
    """(checkpoints made, pages they copied), from /metrics."""
    page = scraper.get("/metrics").text
    made = re.search(r"^context_store_sqlite_wal_checkpoints_total ([0-9.e+]+)$", page, re.M)
    pages = re.search(
        r"^context_store_sqlite_wal_checkpointed_pages_total ([0-9.e+]+)$", page, re.M
    )
    assert made is not None and pages is not None, page
    return float(made.group(1)), float(pages.group(1))


def _checkpoint_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("wal-checkpoints")]


def test_a_write_is_checkpointed_by_the_checkpoint_thread_and_not_by_its_commit(
    database_url, backend, tenant, project
):
    before = len(_checkpoint_threads())
    with TestClient(create_app(make_settings(database_url))) as scraper:
        app = scraper.app
        client = client_for(app, create_key(app, tenant))
        assert import_save(client, project, seed_save()).status_code == 201
        if backend.name == "postgresql":
            assert app.state.database.checkpoints is None
            assert _checkpoints(scraper) == (0, 0)
            assert len(_checkpoint_threads()) == before
            return
        with app.state.database.writer.connect() as connection:
            pages = connection.execute(text("PRAGMA wal_autocheckpoint")).scalar_one()
        assert pages == BACKSTOP_PAGES, "a commit would checkpoint (SQLite's default: 1,000)"
        assert len(_checkpoint_threads()) == before + 1
        deadline = time.monotonic() + 10
        while _checkpoints(scraper)[1] == 0:
            assert time.monotonic() < deadline, "no checkpoint copied the import's pages"
            time.sleep(0.05)
        assert _checkpoints(scraper)[0] >= 1
    # The app's end stops its thread.
    assert len(_checkpoint_threads()) == before
