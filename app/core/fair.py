"""Tenants take turns: for SQLite's one writer (``app/core/write_turns.py``) and for the
worker threads (``FairThreads``), what waits is queued by tenant, and the tenants waiting are
served in rotation, one each, so that a tenant with hundreds waiting delays another's next by
at most one of its own.

First come first served, 256 keep-alive connections of one tenant writing without pause made
another tenant wait behind all they had queued: for SQLite's writer 259-325 ms (median), 1,024
of them up to 3.5 s; on PostgreSQL, the same connections over 256 projects, for a worker thread
(16 busy, 226-232 requests waiting for one) 555-767 ms (a hostile client, 2026-11-27).
"""

import asyncio
import math
from collections import deque
from contextvars import ContextVar
from typing import Generic, TypeVar

from anyio import CapacityLimiter, CapacityLimiterStatistics, WouldBlock, to_thread
from anyio._backends import _asyncio as anyio_asyncio

T = TypeVar("T")

# The tenant the running task acts for, set once its key is known (``app/core/deps.py``) and
# inherited by the tasks and threads it starts. None: not known (a key's look-up, /healthz, the
# project deleter): such work takes its turns as one tenant.
_tenant: ContextVar[str | None] = ContextVar("tenant", default=None)


def act_for(tenant: str) -> None:
    """From here on the running task, and what it starts, asks for worker threads as
    ``tenant``."""
    _tenant.set(tenant)


class TenantQueue(Generic[T]):
    """What waits, each tenant's in the order it came, the tenants in rotation: ``popleft``
    takes the first tenant's first, and puts that tenant, if it has more, behind every other
    tenant waiting."""

    def __init__(self) -> None:
        # Insertion-ordered: the rotation, the tenant served next first.
        self._by_tenant: dict[str | None, deque[T]] = {}

    def append(self, tenant: str | None, item: T) -> None:
        self._by_tenant.setdefault(tenant, deque()).append(item)

    def popleft(self) -> T:
        tenant = next(iter(self._by_tenant))
        items = self._by_tenant.pop(tenant)
        item = items.popleft()
        if items:
            self._by_tenant[tenant] = items  # behind every other tenant waiting
        return item

    def discard(self, tenant: str | None, item: T) -> None:
        """``item`` no longer waits (if it was still queued), the tenant's place kept."""
        items = self._by_tenant.get(tenant)
        if items is None or item not in items:
            return
        items.remove(item)
        if not items:
            del self._by_tenant[tenant]

    def __bool__(self) -> bool:
        return bool(self._by_tenant)

    def __len__(self) -> int:
        # The values copied first, in one step: ``/metrics`` counts the threads' waiters from a
        # worker thread while the event loop changes them.
        return sum(map(len, list(self._by_tenant.values())))

    def take_all(self) -> list[T]:
        """Everything left, the queue emptied."""
        left = [item for items in self._by_tenant.values() for item in items]
        self._by_tenant.clear()
        return left


class FairThreads(CapacityLimiter):
    """anyio's limiter of the worker threads (``to_thread.run_sync``: sync routes and
    dependencies, ``run_in_threadpool``, PostgreSQL's write turns), with its waiters queued by
    the tenant each acts for and served in rotation (``TenantQueue``) rather than first come
    first served. Like anyio's, used on its event loop only. A task that finds a thread free
    and nobody waiting takes it at once, without a round through the loop (``to_thread`` has
    just been through it)."""

    __slots__ = ("_borrowers", "_total", "_waiting")

    def __new__(cls, total_tokens: int) -> "FairThreads":
        # anyio's own ``__new__`` makes its backend's limiter instead.
        return object.__new__(cls)

    def __init__(self, total_tokens: int) -> None:
        self._borrowers: set[object] = set()
        self._waiting: TenantQueue[tuple[object, asyncio.Future[None]]] = TenantQueue()
        self._total: float = 0
        self.total_tokens = total_tokens

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *_exc_info: object) -> None:
        self.release()

    @property
    def total_tokens(self) -> float:
        return self._total

    @total_tokens.setter
    def total_tokens(self, value: float) -> None:
        if not isinstance(value, int) and not math.isinf(value):
            raise TypeError("total_tokens must be an int or math.inf")
        if value < 0:
            raise ValueError("total_tokens must be >= 0")
        self._total = value
        self._hand_on()

    @property
    def borrowed_tokens(self) -> int:
        return len(self._borrowers)

    @property
    def available_tokens(self) -> float:
        return self._total - len(self._borrowers)

    def acquire_nowait(self) -> None:
        self.acquire_on_behalf_of_nowait(asyncio.current_task())

    def acquire_on_behalf_of_nowait(self, borrower: object) -> None:
        if borrower in self._borrowers:
            raise RuntimeError("this borrower already holds one of the worker threads")
        if self._waiting or len(self._borrowers) >= self._total:
            raise WouldBlock
        self._borrowers.add(borrower)

    async def acquire(self) -> None:
        await self.acquire_on_behalf_of(asyncio.current_task())

    async def acquire_on_behalf_of(self, borrower: object) -> None:
        try:
            self.acquire_on_behalf_of_nowait(borrower)
            return
        except WouldBlock:
            pass
        tenant = _tenant.get()
        waiter = (borrower, asyncio.get_running_loop().create_future())
        self._waiting.append(tenant, waiter)
        try:
            await waiter[1]
        except BaseException:
            if waiter[1].done() and not waiter[1].cancelled():
                self.release_on_behalf_of(borrower)  # handed a thread as it was cancelled
            else:
                self._waiting.discard(tenant, waiter)
            raise

    def release(self) -> None:
        self.release_on_behalf_of(asyncio.current_task())

    def release_on_behalf_of(self, borrower: object) -> None:
        try:
            self._borrowers.remove(borrower)
        except KeyError:
            raise RuntimeError("this borrower holds none of the worker threads") from None
        self._hand_on()

    def _hand_on(self) -> None:
        """Free threads to the tasks waiting, the tenants in turn."""
        while self._waiting and len(self._borrowers) < self._total:
            borrower, future = self._waiting.popleft()
            if future.cancelled():  # its task has yet to run and leave the queue
                continue
            self._borrowers.add(borrower)
            future.set_result(None)

    def statistics(self) -> CapacityLimiterStatistics:
        return CapacityLimiterStatistics(
            borrowed_tokens=len(self._borrowers),
            total_tokens=self._total,
            borrowers=tuple(self._borrowers),
            tasks_waiting=len(self._waiting),
        )


def use_fair_threads(total: int) -> FairThreads:
    """A ``FairThreads`` of ``total`` threads made the running event loop's default limiter,
    the one every ``to_thread.run_sync`` without a limiter of its own takes (FastAPI and
    Starlette pass none). anyio offers no way to set it but its private run variable: an
    upgrade of anyio that moves it fails here, at start, rather than serve first come first
    served."""
    threads = FairThreads(total)
    # Typed as anyio's asyncio limiter, which this stands in for.
    anyio_asyncio._default_thread_limiter.set(threads)  # type: ignore[arg-type]
    if to_thread.current_default_thread_limiter() is not threads:
        raise RuntimeError("anyio's default thread limiter could not be replaced")
    return threads
