"""Write turns: where a write route's small writes run, each in its turn, back to back.

A write route's code runs from its first statement to its commit in a thread
(``app/storage/route.py``). Writes that would wait for each other in the database anyway wait
here instead, in one queue, without a thread or a connection: on SQLite every write (the file
has one writer and one connection for it), on PostgreSQL the writes of one project (each holds
its project's row lock until it commits). A turn's writes run in one thread, each started as
soon as the one before it ends, without going back to the event loop; after ``TURN_WRITES`` in a
row the thread is given up and asked for again, behind any other turn that asked first.

Measured under 32 connections appending to one project (``make bench``, a quiet VM):
- SQLite, before this was a queue: each write was a request for one of anyio's worker threads
  and a wake-up of one, and the threads then waited in turn on the writer's connection: a
  decision POST cost 5.1 context switches and 0.92-1.05 ms of server CPU, against 1.4 and
  0.81-0.85 ms in a turn (``perf stat`` and ``make bench``, 2026-11-26).
- PostgreSQL, where each write had a worker thread and a pooled connection and waited for the
  project's row lock in the database: 0.946-1.028 / 1.269-1.349 / 1.356-1.398 ms of server CPU
  for a decision, a handover and an iteration start, against 0.745-0.782 / 0.974-1.041 /
  1.058-1.125 in turns, and 25-45% more appends a second (two alternate pairs, 2026-11-26).
  Turns whose batches were each asked for from the event loop saved about half of that. A
  project's turn holds one connection, not one for each of its writers, so a tenant writing
  hard into one project leaves the pool to the rest.

SQLite's turn runs in a thread of its own (its writer needs no worker thread, and a read never
waits behind it for one); PostgreSQL's turns in anyio's worker threads, one for each project
being written, so that the pool's size (``worker_threads`` and a margin) still bounds them.

Tenants take turns (``app/core/fair.py``): a turn's writes wait in a ``TenantQueue``, so that on
SQLite, where one turn serves every tenant, each tenant waiting has a write in turn; and a
PostgreSQL turn asks for its worker thread as its project's tenant, in that tenant's turn.
"""

import asyncio
import contextvars
import functools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from anyio import to_thread
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from app.core.fair import TenantQueue

T = TypeVar("T")

# The writes a turn runs before it gives its thread up, so that a project written without
# pause never keeps other projects' writes (or reads) from the worker threads for long: about
# 64 ms of a PostgreSQL worker thread at a millisecond a write (longer when a write waits for a
# lock another process holds).
TURN_WRITES = 64


# A turn's: the event loop it asks for its threads on, and its project (None on SQLite, whose
# one turn is every write's).
_TurnKey = tuple[asyncio.AbstractEventLoop, tuple[str, str] | None]


@dataclass
class _Queued:
    """One write waiting for its turn, and where its outcome goes."""

    call: Callable[[], Any]
    context: contextvars.Context
    future: asyncio.Future[Any]
    queued_at: float = field(default_factory=time.monotonic)


class WriteTurns:
    def __init__(
        self,
        timeout_seconds: float,
        *,
        one_writer: bool,
        turn_scope: Callable[[], AbstractContextManager[None]],
    ) -> None:
        # As long as a write may wait for a pooled connection (``db_pool_timeout_seconds``): a
        # write that waited that long for its turn is a 503 when the turn comes, as it would
        # have been in the pool, rather than a wait in the pool as long again.
        self.timeout_seconds = timeout_seconds
        # SQLite: one turn for every write, in a thread of its own. PostgreSQL: one turn per
        # project, in the worker threads.
        self.one_writer = one_writer
        # Entered around each turn's writes in its thread (the writer's connection it holds).
        self._turn_scope = turn_scope
        # Each turn's writes not yet started, from its first write's arrival until its thread
        # finds none left; the writes running; SQLite's thread, made at the first write after
        # start or after ``shutdown`` (a database stays usable once disposed, as its engines
        # do). Changed by the event loop and the turns' threads, under the lock.
        self._lock = threading.Lock()
        self._queues: dict[_TurnKey, TenantQueue[_Queued]] = {}
        self._running = 0
        self._executor: ThreadPoolExecutor | None = None
        # Each turn's request for a thread, until it ends (the loop keeps only a weak
        # reference to a task).
        self._asking: set[asyncio.Future[None]] = set()

    async def run(self, project: tuple[str, str], call: Callable[[], T]) -> T:
        """``call`` in the turn of ``project``, its tenant's and name (on SQLite, the one
        turn of every write, in which tenants take turns), with
        this task's context variables (the request's id and tenant in its log lines); its
        result, or what it raised. Cancelled before its turn, it never runs; cancelled during
        it, it ends as it would have (its commit included) and its result is dropped."""
        loop = asyncio.get_running_loop()
        # A server has one event loop; a test's client may run each request in one of its own,
        # and a turn asks for its threads on the loop that started it.
        key = (loop, None if self.one_writer else project)
        queued = _Queued(call, contextvars.copy_context(), loop.create_future())
        with self._lock:
            queue = self._queues.get(key)
            starts = queue is None
            if queue is None:
                queue = self._queues[key] = TenantQueue()
            queue.append(project[0], queued)
        if starts:
            self._ask_for_thread(loop, key, queue)
        result: T = await queued.future
        return result

    def _ask_for_thread(
        self, loop: asyncio.AbstractEventLoop, key: _TurnKey, queue: TenantQueue[_Queued]
    ) -> None:
        """On the loop: the turn's writes run in a thread as soon as one is free."""
        asking: asyncio.Future[None]
        try:
            if self.one_writer:
                with self._lock:
                    if self._executor is None:
                        self._executor = ThreadPoolExecutor(
                            1, thread_name_prefix="context-store-write"
                        )
                    executor = self._executor
                asking = loop.run_in_executor(executor, self._take_turn, loop, key, queue)
            else:
                # As the tenant the task acts for (``app/core/fair.py``), inherited by the
                # turn's thread, which asks again from it: the tenant whose write started the
                # turn, the project's.
                asking = asyncio.ensure_future(
                    to_thread.run_sync(self._take_turn, loop, key, queue)
                )
        except BaseException as exc:  # an executor shut down meanwhile, or the loop closing
            self._abandon(key, queue, exc)
            return
        self._asking.add(asking)
        asking.add_done_callback(functools.partial(self._asked, key, queue))

    def _asked(
        self, key: _TurnKey, queue: TenantQueue[_Queued], asking: asyncio.Future[None]
    ) -> None:
        self._asking.discard(asking)
        if asking.cancelled():  # the loop closing before a thread took the turn
            self._abandon(key, queue, None)
        elif (error := asking.exception()) is not None:
            self._abandon(key, queue, error)

    def _abandon(
        self, key: _TurnKey, queue: TenantQueue[_Queued], error: BaseException | None
    ) -> None:
        """A turn no thread will take: its writes end with ``error`` (None: cancelled), and the
        project's next write starts a turn of its own."""
        with self._lock:
            if self._queues.get(key) is queue:
                del self._queues[key]
            left = queue.take_all()
        for queued in left:
            future = queued.future
            if error is None:
                future.get_loop().call_soon_threadsafe(future.cancel)
            else:
                future.get_loop().call_soon_threadsafe(_settle, future, None, error)

    def _take_turn(
        self, loop: asyncio.AbstractEventLoop, key: _TurnKey, queue: TenantQueue[_Queued]
    ) -> None:
        """In the turn's thread: its writes one after another until none is left, or
        ``TURN_WRITES`` of them, then the thread asked for again."""
        # On PostgreSQL the clock starts once the turn has a thread: a wait for a worker
        # thread has no time limit, for a write as for any request. SQLite's thread is the
        # writer's, and a wait for it is a wait for the writer.
        started = time.monotonic()
        with self._turn_scope():
            for written in range(TURN_WRITES + 1):
                with self._lock:
                    if not queue:
                        del self._queues[key]
                        return
                    if written == TURN_WRITES:
                        break
                    queued = queue.popleft()
                    self._running += 1
                since = queued.queued_at if self.one_writer else max(queued.queued_at, started)
                try:
                    self._write(queued, since)
                finally:
                    with self._lock:
                        self._running -= 1
        loop.call_soon_threadsafe(self._ask_for_thread, loop, key, queue)

    def _write(self, queued: _Queued, since: float) -> None:
        if queued.future.cancelled():
            return
        result: Any = None
        error: BaseException | None = None
        try:
            if time.monotonic() - since >= self.timeout_seconds:
                raise PoolTimeoutError(
                    f"a write waited {self.timeout_seconds} s for its turn to write"
                )
            result = queued.context.run(queued.call)
        except StopIteration as exc:
            # asyncio cannot set it as a future's exception: the request would never end.
            error = RuntimeError("a write raised StopIteration")
            error.__cause__ = exc
        except BaseException as exc:  # the request raises it
            error = exc
        queued.future.get_loop().call_soon_threadsafe(_settle, queued.future, result, error)

    @property
    def busy(self) -> int:
        """Writes running: SQLite's one, or one per project being written."""
        return self._running

    @property
    def waiting(self) -> int:
        """Writes waiting for their turn."""
        with self._lock:
            return sum(len(queue) for queue in self._queues.values())

    def shutdown(self) -> None:
        """After the last request: SQLite's running write finishes (and commits) first. (On
        PostgreSQL a request waits for its write, and the server for its requests.)"""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():  # cancelled: its request is gone
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)
