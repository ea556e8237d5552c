"""SQLite's WAL checkpoints, in a thread of their own rather than in a request's commit.

In WAL mode a commit appends its pages to the ``-wal`` file; a checkpoint copies them back
into the database file and syncs both to disk. By default SQLite checkpoints inside whichever
commit takes the WAL past 1,000 pages: under a steady stream of small appends, about one
request in a hundred paid 4-8 ms for it, in process, against 0.9 ms for the others, and every
writer queued behind it (that one request was the p99). Here this thread checkpoints the WAL
when it has changed, at most every ``POLL_SECONDS``: ``PASSIVE``, so that it never waits for a
reader or a writer, nor makes one wait; its disk syncs happen with the GIL released.

What it cannot do is rewind the WAL: SQLite writes from the WAL's start again only in a write
that begins when every frame has been copied, and under a steady stream of writes one always
lands while a checkpoint runs. The WAL then grows until a commit takes it past
``BACKSTOP_PAGES``, and that commit checkpoints what is left and syncs (8.7-10.4 ms of its
write, 3.4-4.8 ms of CPU, in process on 2026-11-27: one decision POST in about 620, one
handover in about 885, each writing 15-17 pages); the writes queued meanwhile wait for it.

The thread learns that the WAL has changed from its size and time (``stat``), never by opening
one of the database's files: POSIX drops all of a process's locks on a file when any of its
descriptors for it is closed, so that SQLite's own locks would be gone (SQLite's "How To
Corrupt An SQLite Database File", 2.2). A first version read the pages waiting from the
wal-index (``-shm``) that way: a suite run died of SIGBUS in a commit, another process having
reset the wal-index it took for unused (``tests/platform/test_checkpoints.py``).
"""

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

# How often, at most, the thread checkpoints: under a stream of writes no more disk syncs than
# SQLite's own 1,000-page checkpoints make (at 0.1 s, a 1 MB save import cost 1-2 ms more CPU
# in process), and a WAL of at most this long's writes.
POLL_SECONDS = 0.25
# A writer checkpoints by itself once its WAL holds this many pages (40 MB at SQLite's 4 kB
# pages): under a steady stream of writes, every time the WAL reaches it (the module's
# docstring), and whenever this thread has fallen that far behind or is not running.
BACKSTOP_PAGES = 10_000
# A file's modification time moves in ticks of up to this on some file systems and kernels.
_CLOCK_TICK_NS = 20_000_000


class WalCheckpoints:
    """A thread that checkpoints one SQLite database's WAL whenever it has changed."""

    def __init__(self, database_path: str) -> None:
        self.database_path = database_path
        self.wal_path = database_path + "-wal"
        # Called after each checkpoint (the metrics count them).
        self.on_checkpoint: Callable[[], None] | None = None
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
        checkpointed: tuple[int, int] | None = None
        failure: str | None = None
        connection: sqlite3.Connection | None = None
        try:
            while not self._stopping.wait(POLL_SECONDS):
                try:
                    wal = os.stat(self.wal_path)
                except OSError:
                    continue  # no write yet, or the last connection closed and removed it
                state = (wal.st_mtime_ns, wal.st_size)
                if state == checkpointed:
                    continue
                try:
                    if connection is None:
                        # No waiting: a passive checkpoint takes no lock it would wait for.
                        connection = sqlite3.connect(
                            self.database_path, timeout=0, isolation_level=None
                        )
                    busy, frames, copied = connection.execute(
                        "PRAGMA wal_checkpoint(PASSIVE)"
                    ).fetchone()
                except sqlite3.Error as exc:
                    # Tried again at the next poll; the writers' backstop covers meanwhile.
                    # Said once, not every poll while it lasts.
                    if str(exc) != failure:
                        failure = str(exc)
                        log.warning("WAL checkpoint failed: %s", exc)
                    continue
                failure = None
                if busy:
                    continue  # another connection was checkpointing: again at the next poll
                if self.on_checkpoint is not None:
                    self.on_checkpoint()
                # Done with this WAL only when every frame was copied (a reader's snapshot
                # holds back those after it), and when no write can still land in the same
                # tick of a coarse file clock.
                if copied >= frames and time.time_ns() - wal.st_mtime_ns > _CLOCK_TICK_NS:
                    checkpointed = state
        finally:
            if connection is not None:
                connection.close()
