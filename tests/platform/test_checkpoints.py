"""SQLite's WAL checkpoints happen in a thread of their own, not inside a request's commit
(app/core/checkpoints.py): a commit that checkpointed cost its request 4-8 ms, the p99."""

import re
import subprocess
import sys
import threading
import time

from fastapi.testclient import TestClient
from sqlalchemy import text

from app.core.checkpoints import BACKSTOP_PAGES, POLL_SECONDS
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


def test_a_wal_unchanged_since_its_checkpoint_is_left_alone(database_url, backend, tenant, project):
    with TestClient(create_app(make_settings(database_url))) as scraper:
        client = client_for(scraper.app, create_key(scraper.app, tenant))
        assert import_save(client, project, seed_save()).status_code == 201
        if backend.name == "postgresql":
            return
        deadline = time.monotonic() + 10
        while _checkpoints(scraper)[0] == 0:
            assert time.monotonic() < deadline, "the import was never checkpointed"
            time.sleep(0.05)
        made = _checkpoints(scraper)
        time.sleep(4 * POLL_SECONDS)
        assert _checkpoints(scraper) == made


def test_this_process_keeps_sqlites_lock_on_the_wal_index_while_the_thread_runs(
    database_url, backend, tenant, project
):
    """POSIX drops all of a process's locks on a file when any descriptor of it is closed. A
    checkpoint thread that opened and closed the ``-shm`` file itself (to read how many pages
    wait) took SQLite's locks on it away: the next process to open the database then takes
    itself for the only one and resets the wal-index under this one (a suite run died of
    SIGBUS in a commit). Another process must still find the lock that says this one uses it."""
    with TestClient(create_app(make_settings(database_url))) as scraper:
        client = client_for(scraper.app, create_key(scraper.app, tenant))
        assert import_save(client, project, seed_save()).status_code == 201
        time.sleep(5 * POLL_SECONDS)
        if backend.name == "postgresql":
            return
        path = str(scraper.app.state.database.writer.url.database)
        probe = subprocess.run(
            [sys.executable, "-c", _TAKE_THE_WAL_INDEX, path + "-shm"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert probe.returncode == 0, probe.stderr
        assert probe.stdout.strip() == "held by another process"


# SQLite (os_unix.c): each process using a wal-index holds a shared lock on its "DMS" byte,
# after the 8 lock slots from offset 120; a process that can lock it exclusively takes itself
# for the only one.
_TAKE_THE_WAL_INDEX = """
import fcntl, os, sys
descriptor = os.open(sys.argv[1], os.O_RDWR)
try:
    fcntl.lockf(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 128)
except OSError:
    print("held by another process")
else:
    print("free")
"""
