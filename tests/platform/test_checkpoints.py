"""SQLite's WAL checkpoints happen in a thread of their own, not inside a request's commit
(app/core/checkpoints.py): a commit that checkpointed cost its request 4-8 ms, the p99.

Each test has a database of its own: another app's thread on a shared one would checkpoint
it too, and the WAL would hold the other tests' writes."""

import logging
import re
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from fastapi.testclient import TestClient
from sqlalchemy import text

from app.core.checkpoints import BACKSTOP_PAGES, POLL_SECONDS, REWIND_PAGES, WalCheckpoints
from app.core.migrations import upgrade
from app.main import create_app
from tests.conftest import client_for, create_key, make_settings
from tests.helpers import import_save, seed_save


@contextmanager
def _app_on_a_new_database(url: str, tenant: str) -> Iterator[tuple[TestClient, TestClient]]:
    """(a scraper of /metrics, a client with a key) of an app on ``url``, a new database,
    migrated here."""
    upgrade(url, configure_logging=False)
    with TestClient(create_app(make_settings(url))) as scraper:
        yield scraper, client_for(scraper.app, create_key(scraper.app, tenant))


def _checkpoints(scraper: TestClient) -> float:
    page = scraper.get("/metrics").text
    made = re.search(r"^context_store_sqlite_wal_checkpoints_total ([0-9.e+]+)$", page, re.M)
    assert made is not None, page
    return float(made.group(1))


def _settled(scraper: TestClient) -> float:
    """The checkpoints made once the thread has made one and then no more for two polls."""
    deadline = time.monotonic() + 10
    last = -1.0
    while True:
        assert time.monotonic() < deadline, "the thread kept checkpointing, or never did"
        time.sleep(2 * POLL_SECONDS)
        made = _checkpoints(scraper)
        if made >= 1 and made == last:
            return made
        last = made


def _checkpoint_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("wal-checkpoints")]


def test_a_write_is_checkpointed_by_the_checkpoint_thread_and_not_by_its_commit(
    backend, tenant, project
):
    before = len(_checkpoint_threads())
    with _app_on_a_new_database(backend.new_database_url(), tenant) as (scraper, client):
        app = scraper.app
        assert import_save(client, project, seed_save()).status_code == 201
        if backend.name == "postgresql":
            assert app.state.database.checkpoints is None
            assert _checkpoints(scraper) == 0
            assert len(_checkpoint_threads()) == before
            return
        with app.state.database.writer.connect() as connection:
            pages = connection.execute(text("PRAGMA wal_autocheckpoint")).scalar_one()
        assert pages == BACKSTOP_PAGES, "a commit would checkpoint (SQLite's default: 1,000)"
        assert len(_checkpoint_threads()) == before + 1
        assert _settled(scraper) >= 1
    # The app's end stops its thread.
    assert len(_checkpoint_threads()) == before


def _sqlite_url(tmp_path: Path) -> str:
    """SQLite's own (PostgreSQL has no such thread: the first test)."""
    return f"sqlite:///{tmp_path / 'checkpoints.db'}"


def test_a_database_named_by_a_file_uri_is_checkpointed_and_its_directory_made(
    tmp_path, tenant, project
):
    """``sqlite:///file:...?uri=true`` (SQLite's URI filenames): its directory is made, its
    fingerprint key kept beside it and its WAL checkpointed, as for a path. The URL was once
    taken for a path: a directory named ``file:...`` was made, the database's own was not (the
    migration failed), and no thread checkpointed it."""
    path = tmp_path / "not yet" / "uri.db"
    url = f"sqlite:///file:{quote(str(path))}?mode=rwc&uri=true"
    with _app_on_a_new_database(url, tenant) as (scraper, client):
        assert import_save(client, project, seed_save()).status_code == 201
        assert path.is_file()
        assert Path(f"{path}.fingerprint-key").is_file()
        checkpoints = scraper.app.state.database.checkpoints
        assert checkpoints is not None and checkpoints.database_path == str(path)
        assert _settled(scraper) >= 1
    assert not list(Path.cwd().glob("file:*"))


def test_a_wal_unchanged_since_its_checkpoint_is_left_alone(tmp_path, tenant, project):
    with _app_on_a_new_database(_sqlite_url(tmp_path), tenant) as (scraper, client):
        assert import_save(client, project, seed_save()).status_code == 201
        made = _settled(scraper)
        time.sleep(4 * POLL_SECONDS)
        assert _checkpoints(scraper) == made
        assert import_save(client, project, seed_save()).status_code == 201
        assert _settled(scraper) > made


def test_pages_a_reader_held_back_are_checkpointed_once_it_lets_go(tmp_path, tenant, project):
    """A passive checkpoint copies no page written after the snapshot of a reader still open:
    the thread tries again at each poll until every page is copied, not only after the next
    write (which, after the last write of a burst, might never come)."""
    url = _sqlite_url(tmp_path)
    with _app_on_a_new_database(url, tenant) as (scraper, client):
        assert import_save(client, project, seed_save()).status_code == 201
        _settled(scraper)
        reader = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM saves").fetchall()  # its snapshot, from here
            assert import_save(client, project, seed_save()).status_code == 201
            time.sleep(2 * POLL_SECONDS)
            holding = _checkpoints(scraper)
            time.sleep(4 * POLL_SECONDS)
            assert _checkpoints(scraper) >= holding + 2, "the held-back pages were left"
        finally:
            reader.close()
        _settled(scraper)


def test_this_process_keeps_sqlites_lock_on_the_wal_index_while_the_thread_runs(
    tmp_path, tenant, project
):
    """POSIX drops all of a process's locks on a file when any descriptor of it is closed. A
    checkpoint thread that opened and closed the ``-shm`` file itself (to read how many pages
    wait) took SQLite's locks on it away: the next process to open the database then takes
    itself for the only one and resets the wal-index under this one (a suite run died of
    SIGBUS in a commit). Another process must still find the lock that says this one uses it."""
    with _app_on_a_new_database(_sqlite_url(tmp_path), tenant) as (scraper, client):
        assert import_save(client, project, seed_save()).status_code == 201
        _settled(scraper)
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


def _wal_checkpoint(path: str) -> tuple[int, int]:
    """(frames in the WAL, frames copied) from a checkpoint of a connection of its own, which
    copies them: only where the test no longer needs them uncopied. SQLite shares a process's
    locks between its connections to one file, so that closing this one leaves the app's."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        _busy, frames, copied = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return int(frames), int(copied)
    finally:
        connection.close()


def _grow_wal_past(path: str, frames: int, write: Callable[[int], None]) -> None:
    """``write`` called until the WAL file holds more than ``frames`` frames (a header, then
    each frame's header and page). Its size is the most it ever held, so it must start below:
    while it grows, the WAL is that long."""
    connection = sqlite3.connect(path)
    try:
        (page,) = connection.execute("PRAGMA page_size").fetchone()
    finally:
        connection.close()
    wal = Path(path + "-wal")
    limit = 32 + frames * (24 + page)
    assert wal.stat().st_size < limit, "the WAL was that long before"
    number = 0
    while wal.stat().st_size <= limit:
        number += 1
        write(number)


def test_a_stream_of_writes_rewinds_the_wal_between_writes_not_at_the_backstop(
    tmp_path, tenant, project
):
    """SQLite writes from the WAL's start again only in a write that begins with every frame
    copied, and under a steady stream a write always lands while the thread checkpoints: the
    WAL grew to the backstop (10,000 pages), whose commit paid 8.7-10.4 ms with every writer
    queued behind it. Once the thread has seen the WAL past ``REWIND_PAGES``, the writer
    checkpoints what the thread's left at the end of its turn, and its next write rewinds.
    Here a reader's snapshot stands for the write that lands during the thread's checkpoint
    (it holds back the frames after it the same way), and the test makes the thread's
    checkpoint itself."""
    url = _sqlite_url(tmp_path)
    path = url.removeprefix("sqlite:///")
    with _app_on_a_new_database(url, tenant) as (scraper, client):
        checkpoints = scraper.app.state.database.checkpoints
        checkpoints.stop()
        decisions = f"/v1/projects/{project}/memory/decisions"

        def decide(number: int) -> None:
            body = {"id": f"dec-{number}", "decision": f"decision {number} " + "words " * 40}
            assert client.post(decisions, json=body).status_code == 201

        assert client.post(decisions, json={"id": "first", "decision": "d"}).status_code == 201
        _grow_wal_past(path, REWIND_PAGES, decide)
        reader = sqlite3.connect(path, isolation_level=None)
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM memory_items").fetchall()
            decide(-1)  # after the reader's snapshot: its frames stay uncopied
            checkpoints.checkpoint()
            frames, copied = _wal_checkpoint(path)  # held back as the thread's was
            assert frames > REWIND_PAGES and copied < frames
        finally:
            reader.close()
        decide(-2)  # its turn's end copies what the thread's checkpoint left
        decide(-3)  # begins with every frame copied: written from the WAL's start
        frames, _copied = _wal_checkpoint(path)
        assert frames < REWIND_PAGES // 5, "the WAL went on growing to the backstop"


def test_a_rewind_is_done_once_for_each_checkpoint_that_asks_and_its_failures_are_logged(
    tmp_path, caplog
):
    """A rewind is done only once a checkpoint of the thread's saw the WAL past
    ``REWIND_PAGES``, and once for each: one that could not copy every frame (a reader's
    snapshot held some back) is not tried again at every turn's end, which a reader
    overlapping each would make pay its syncs; one that fails, or finds a driver other than
    pysqlite's, is logged and raises nothing into the write turn whose end it is."""
    path = str(tmp_path / "rewind.db")
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode=WAL")
    writer.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")
    writer.execute("CREATE TABLE t (value TEXT)")
    reader = sqlite3.connect(path, isolation_level=None)
    checkpoints = WalCheckpoints(path)
    made: list[None] = []
    checkpoints.on_checkpoint = lambda: made.append(None)
    gone = sqlite3.connect(path)
    gone.close()

    def write(number: int) -> None:
        writer.execute("INSERT INTO t VALUES (?)", (str(number),))

    def logged() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "app.core.checkpoints"]

    try:
        with caplog.at_level(logging.WARNING, logger="app.core.checkpoints"):
            checkpoints.rewind(gone)  # not asked for: nothing done
            assert not logged()
            _grow_wal_past(path, REWIND_PAGES, write)
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM t").fetchall()  # holds back what follows
            write(0)
            checkpoints.checkpoint()  # asks for a rewind
            checkpoints.rewind(gone)
            assert logged() == ["WAL rewind failed: Cannot operate on a closed database."]
            write(0)
            checkpoints.checkpoint()
            checkpoints.rewind(None)
            assert logged()[1:] == ["WAL rewind skipped: the writer's driver is not pysqlite's"]
            write(0)
            checkpoints.checkpoint()
            assert len(made) == 3
            checkpoints.rewind(writer)  # held back by the reader: done once, not again
            checkpoints.rewind(writer)
            assert len(made) == 4
            assert len(logged()) == 2
    finally:
        checkpoints.stop()
        reader.close()
        writer.close()
