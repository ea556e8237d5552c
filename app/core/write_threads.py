"""SQLite's write thread: where a project's small writes run, apart from the worker threads.

A write route's code runs from its first statement to its commit in this thread
(``app/storage/route.py``). It takes its writes from one queue and starts the next as soon as
one ends, without going back to the event loop: under load it runs the queued writes back to
back. Through anyio's worker threads, each write was a request for a thread and a wake-up of
one, and the threads then waited in turn on the writer's one connection: a decision POST cost
5.1 context switches and 0.92-1.05 ms of server CPU under 32 connections, against 1.4 and
0.81-0.85 ms here (SQLite, ``perf stat`` and ``make bench``, 2026-11-26).

One thread, since SQLite's writer has one connection. PostgreSQL has none: its writes run in
the worker threads, where the same measures showed no difference in CPU beyond the noise, and
a thread pool of their own would have needed as many connections again.
"""

import asyncio
import contextvars
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from sqlalchemy.exc import TimeoutError as PoolTimeoutError

T = TypeVar("T")


class WriteThread:
    def __init__(self, timeout_seconds: float) -> None:
        # As long as a write may wait for the writer's connection (``db_pool_timeout_seconds``):
        # a write that waited that long in the queue is a 503 at once, as it would have been
        # in the pool, rather than a wait in the pool as long again.
        self.timeout_seconds = timeout_seconds
        # Made at the first write after start or after ``shutdown``: a database stays usable
        # once disposed, as its engines do.
        self._executor: ThreadPoolExecutor | None = None
        # Counted on the event loop's thread alone: a write running or in the queue.
        self._in_flight = 0

    async def run(self, call: Callable[[], T]) -> T:
        """``call`` in the write thread, with this task's context variables (the request's id
        and tenant in its log lines); its result, or what it raised."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="context-store-write")
        context = contextvars.copy_context()
        queued = time.monotonic()
        self._in_flight += 1
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._executor, context.run, self._in_turn, call, queued
            )
        finally:
            self._in_flight -= 1

    def _in_turn(self, call: Callable[[], T], queued: float) -> T:
        if time.monotonic() - queued >= self.timeout_seconds:
            raise PoolTimeoutError(
                f"a write waited {self.timeout_seconds} s for SQLite's write thread"
            )
        try:
            return call()
        except StopIteration as exc:
            # asyncio cannot set it as a future's exception: the request would never end.
            raise RuntimeError("a write raised StopIteration") from exc

    @property
    def busy(self) -> int:
        return min(self._in_flight, 1)

    @property
    def waiting(self) -> int:
        return max(0, self._in_flight - 1)

    def shutdown(self) -> None:
        """After the last request: the write still running finishes (and commits) first."""
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
