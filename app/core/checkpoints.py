"""SQLite's WAL checkpoints, in a thread of their own rather than in a request's commit.

In WAL mode a commit appends its pages to the ``-wal`` file; a checkpoint copies them back
into the database file and syncs both to disk. By default SQLite checkpoints inside whichever
commit takes the WAL past 1,000 pages: under a steady stream of small appends, about one
request in a hundred paid 4-8 ms for it, in process, against 0.9 ms for the others, and every
writer queued behind it (that one request was the p99). Here this thread checkpoints the WAL
when it has changed, at most every ``POLL_SECONDS``: ``PASSIVE``, so that it never waits for a
reader or a writer, nor makes one wait; its disk syncs happen with the GIL released.

What this thread cannot do alone is rewind the WAL: SQLite writes from the WAL's start again
only in a write that begins when every frame has been copied, and under a steady stream of
writes one always lands while a checkpoint runs. The WAL then grew until a commit took it past
``BACKSTOP_PAGES``, and that commit checkpointed what was left and synced (8.7-10.4 ms of its
write, 3.4-4.8 ms of CPU, in process on 2026-11-27: one decision POST in about 620, one
handover in about 885, each writing 15-17 pages), the writes queued meanwhile waiting for it.
So once this thread has seen the WAL longer than ``REWIND_PAGES``, the writer checkpoints what
the thread's checkpoint left, between two of its writes (``rewind``, at the end of a write
turn): nothing lands meanwhile, the next write starts the WAL from its beginning, and what the
writer copies is only what was written since the thread's checkpoint began (26-32 pages in
0.8-1.2 ms, syncs included, against 3,200-3,300 in 16-17 ms for the thread's, on this VM).

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
# pages): when this thread has fallen that far behind or is not running, and the writer's
# rewinds have not come (no write turn ended meanwhile, only large writes, which run outside
# the turns) or could not rewind (a read that spanned each turn's end held frames back).
BACKSTOP_PAGES = 10_000
# The WAL's length (SQLite's own checkpoint size, 4 MB) past which the writer rewinds it at the
# end of its next write turn: under a steady stream of writes, after each of this thread's
# checkpoints.
REWIND_PAGES = 1_000
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
        # Set by this thread when the WAL it checkpointed was longer than ``REWIND_PAGES``;
        # cleared by the writer's ``rewind``.
        self._rewind_wanted = threading.Event()
        # The thread's own, opened at its first checkpoint; the WAL's (modification time,
        # size) when a checkpoint last copied all of it; the failure last logged.
        self._connection: sqlite3.Connection | None = None
        self._checkpointed: tuple[int, int] | None = None
        self._failure: str | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"wal-checkpoints {os.path.basename(database_path)}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """The thread stopped, then the connection its checkpoints (or a caller's) used closed."""
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _run(self) -> None:
        while not self._stopping.wait(POLL_SECONDS):
            self.checkpoint()

    def checkpoint(self) -> None:
        """One poll: a ``PASSIVE`` checkpoint, when the WAL has changed since the last one that
        copied all of it (the thread's, at most every ``POLL_SECONDS``)."""
        try:
            wal = os.stat(self.wal_path)
        except OSError:
            return  # no write yet, or the last connection closed and removed it
        state = (wal.st_mtime_ns, wal.st_size)
        if state == self._checkpointed:
            return
        try:
            if self._connection is None:
                # No waiting: a passive checkpoint takes no lock it would wait for. Used by one
                # thread at a time (the thread, else whoever calls this and then ``stop``), not
                # always the one that opened it.
                self._connection = sqlite3.connect(
                    self.database_path, timeout=0, isolation_level=None, check_same_thread=False
                )
            busy, frames, copied = self._connection.execute(
                "PRAGMA wal_checkpoint(PASSIVE)"
            ).fetchone()
        except sqlite3.Error as exc:
            # Tried again at the next poll; the writers' backstop covers meanwhile. Said
            # once, not every poll while it lasts.
            if str(exc) != self._failure:
                self._failure = str(exc)
                log.warning("WAL checkpoint failed: %s", exc)
            return
        self._failure = None
        if busy:
            return  # another connection was checkpointing: again at the next poll
        if self.on_checkpoint is not None:
            self.on_checkpoint()
        if frames > REWIND_PAGES:
            self._rewind_wanted.set()
        # Done with this WAL only when every frame was copied (a reader's snapshot holds back
        # those after it), and when no write can still land in the same tick of a coarse file
        # clock.
        if copied >= frames and time.time_ns() - wal.st_mtime_ns > _CLOCK_TICK_NS:
            self._checkpointed = state

    def rewind(self, writer: object) -> None:
        """On the writer's connection (the driver's), in its thread, between two of its writes
        (no transaction open): once this thread has seen the WAL longer than
        ``REWIND_PAGES``, a checkpoint of what its own left, so that the next write starts
        the WAL from its beginning. Asked for again at the next turn's end when another
        checkpoint was running; one that could not copy every frame (a reader's snapshot held
        some back) or failed is left to this thread's next checkpoint, at most one a poll: a
        reader overlapping every turn's end would otherwise cost each its syncs. Its failures
        never reach the write turn."""
        if not self._rewind_wanted.is_set():
            return
        self._rewind_wanted.clear()
        if not isinstance(writer, sqlite3.Connection):
            log.warning("WAL rewind skipped: the writer's driver is not pysqlite's")
            return
        try:
            busy = writer.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[0]
        except sqlite3.Error as exc:
            log.warning("WAL rewind failed: %s", exc)
            return
        if busy:
            self._rewind_wanted.set()
        elif self.on_checkpoint is not None:
            self.on_checkpoint()
