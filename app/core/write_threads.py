"""The threads a project's writes run in, apart from the worker threads of every other route.

A write route's code runs from its first statement to its commit in one of these threads
(``app/storage/route.py``). They take their writes from one queue, and a thread that finishes
one starts the next without going back to the event loop: under load it runs the queued writes
back to back. Through anyio's worker threads, each write was a request for a thread and a
wake-up of one, and threads waited in turn on SQLite's one writer connection: a decision POST
cost 5.1 context switches and 1.05 ms of server CPU under 32 connections, against 1.4 and
0.88 ms here (SQLite, ``perf stat`` on the server, 2026-11-26).

How many: ``write_thread_count`` (app/core/db.py).
"""

import asyncio
import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


class WriteThreads:
    def __init__(self, count: int) -> None:
        self.limit = count
        # Made at the first write after start or after ``shutdown``: a database stays usable
        # once disposed, as its engines do.
        self._executor: ThreadPoolExecutor | None = None
        # Counted on the event loop's thread alone: a write in a thread or in the queue.
        self._in_flight = 0

    async def run(self, call: Callable[[], T]) -> T:
        """``call`` in a write thread, with this task's context variables (the request's id
        and tenant in its log lines); its result, or what it raised."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                self.limit, thread_name_prefix="context-store-write"
            )
        context = contextvars.copy_context()
        self._in_flight += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._executor, context.run, call
            )
        finally:
            self._in_flight -= 1

    @property
    def busy(self) -> int:
        return min(self._in_flight, self.limit)

    @property
    def waiting(self) -> int:
        return max(0, self._in_flight - self.limit)

    def shutdown(self) -> None:
        """After the last request: the writes still running finish (and commit) first."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
