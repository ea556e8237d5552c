"""SQLite's WAL checkpoints, in a thread of their own rather than in a request's commit.

In WAL mode a commit appends its pages to the ``-wal`` file; a checkpoint copies them back
into the database file and syncs both to disk. By default SQLite checkpoints inside whichever
commit takes the WAL past 1,000 pages: under a steady stream of small appends, about one
request in a hundred paid 4-8 ms for it, in process, against 0.9 ms for the others, and every
writer queued behind it (that one request was the p99). Here the writer's own checkpoints
are a backstop only (``BACKSTOP_PAGES``), and this thread checkpoints soon after each write:
``PASSIVE``, so that it never waits for a reader or a writer, nor makes one wait; its disk
syncs happen with the GIL released.
"""

import logging
import os
import sqlite3
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

# How often the thread looks whether the WAL has changed. A write is checkpointed within this
# (and the checkpoint's own time); the WAL grows by at most this long's writes.
POLL_SECONDS = 0.1
# A writer checkpoints by itself once its WAL holds this many pages (40 MB at SQLite's 4 kB
# pages): only when this thread has fallen that far behind, or is not running.
BACKSTOP_PAGES = 10_000


class WalCheckpoints:
    """A thread that checkpoints one SQLite database's WAL whenever it has changed."""

    def __init__(self, database_path: str, busy_timeout_ms: int) -> None:
        self.database_path = database_path
        self.wal_path = database_path + "-wal"
        self.busy_timeout_ms = busy_timeout_ms
        # Called after each checkpoint with the frames it copied (the metrics count them).
        self.on_checkpoint: Callable[[int], None] | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"wal-checkpoints {os.path.basename(database_path)}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        seen: tuple[int, int] | None = None
        connection: sqlite3.Connection | None = None
        try:
            while not self._stopping.wait(POLL_SECONDS):
                try:
                    wal = os.stat(self.wal_path)
                except FileNotFoundError:
                    continue  # no write yet, or the last connection closed and removed it
                state = (wal.st_mtime_ns, wal.st_size)
                if state == seen:
                    continue
                if connection is None:
                    connection = self._connect()
                if self._checkpoint(connection):
                    seen = state
        finally:
            if connection is not None:
                connection.close()

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.database_path, isolation_level=None)
        connection.execute(f"PRAGMA busy_timeout={int(self.busy_timeout_ms)}")
        return connection

    def _checkpoint(self, connection: sqlite3.Connection) -> bool:
        """One passive checkpoint; False when it could not run (tried again at the next poll)."""
        try:
            row = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:
            # The writers' own checkpoints take over meanwhile (the backstop).
            log.warning("WAL checkpoint failed: %s", exc)
            return False
        busy, _frames, copied = row
        if busy:
            return False  # another connection was checkpointing
        if self.on_checkpoint is not None:
            self.on_checkpoint(max(copied, 0))
        return True
