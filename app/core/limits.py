"""Turns for long work: at most so many at once per tenant and per server.

An archive export holds a worker thread and a connection while it builds its archive, then a
spool (memory, then a temporary file) until its client has read it all; an import under the
bulk limit (a save's, an archive's) holds a worker thread while it parses, redacts and
compresses up to 64 MiB. Turns bound how many run at once, so that one tenant cannot take
every export (or the disk), or every worker thread, from the others.
"""

import itertools
import threading
from collections import Counter
from typing import Any

import anyio
from starlette.requests import Request

from app.core.errors import PROBLEM_MEDIA_TYPE, TooManyRequests

# What a refused client is told: exports last seconds, and a turn frees when one ends.
RETRY_AFTER_SECONDS = 5
# How often a request waiting for a turn looks again: turns are held for seconds.
LOOK_AGAIN_SECONDS = 0.05
# How many requests may wait for turns, for each that may run (per tenant, per server).
WAITERS_PER_TURN = 4


def too_many_running(what: str) -> dict[str, Any]:
    """The OpenAPI document's 429 of a route that takes turns of ``what``."""
    return {
        "description": f"This tenant's, or the server's, {what} are all running; "
        "retry after `Retry-After` seconds.",
        "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }


BULK_IMPORTS_ALL_RUNNING = too_many_running("imports under the bulk limit")


class Turn:
    """One held turn; ``release`` gives it back (once, however often it is called)."""

    def __init__(self, turns: "Turns", tenant: str) -> None:
        self._turns = turns
        self._tenant: str | None = tenant

    def release(self) -> None:
        if self._tenant is not None:
            self._turns._give_back(self._tenant)
            self._tenant = None


class Turns:
    """At most ``per_tenant`` turns for a tenant and ``per_server`` in all. A request without
    a free turn waits for one up to ``wait_seconds``, asleep in its event loop (holding no
    thread and no connection) and looking again every ``LOOK_AGAIN_SECONDS``, then gets a 429
    with ``Retry-After``.

    Waiters go first in the order they came: a free turn is taken by the oldest waiter that may
    take it (its tenant below its own limit), not by whoever looks first, so that a stream of
    newcomers cannot keep a waiter out until its 429. And they are bounded, as the turns are:
    at most ``WAITERS_PER_TURN`` times as many waiting as may run, for a tenant and in all;
    beyond them a request is told at once to come back (an import waits holding its body, up
    to the bulk limit).

    The counts are kept under a lock, and a waiter looks rather than waits on an event:
    in-process callers serve requests on event loops of their own (the tests' clients, each in
    its thread), where an event set in one loop cannot wake a waiter in another (eight save
    imports at once, each on its own loop, failed so).
    """

    def __init__(self, what: str, per_tenant: int, per_server: int, wait_seconds: float) -> None:
        self.what = what
        self.per_tenant = per_tenant
        self.per_server = per_server
        self.wait_seconds = wait_seconds
        self.held: Counter[str] = Counter()
        # The waiters' tenants by ticket, the oldest first.
        self._queue: dict[int, str] = {}
        self._tickets = itertools.count()
        self._lock = threading.Lock()

    @property
    def total(self) -> int:
        return self.held.total()

    @property
    def waiting(self) -> int:
        return len(self._queue)

    def _free_for(self, tenant: str) -> bool:
        return self.total < self.per_server and self.held[tenant] < self.per_tenant

    def _taken(self, tenant: str, ticket: int | None = None) -> bool:
        """A turn for ``tenant``, taken if one is free and no waiter before ``ticket`` (before
        every waiter, without one) may take it."""
        with self._lock:
            if not self._free_for(tenant):
                return False
            for earlier, other in self._queue.items():
                if earlier == ticket:
                    break
                if self._free_for(other):
                    return False
            self.held[tenant] += 1
            if ticket is not None:
                del self._queue[ticket]
            return True

    def _queued(self, tenant: str) -> int | None:
        """A ticket for ``tenant``'s place among the waiters; None when they are all taken."""
        with self._lock:
            waiting_here = sum(other == tenant for other in self._queue.values())
            if (
                waiting_here >= self.per_tenant * WAITERS_PER_TURN
                or len(self._queue) >= self.per_server * WAITERS_PER_TURN
            ):
                return None
            ticket = next(self._tickets)
            self._queue[ticket] = tenant
            return ticket

    def _refusal(self, tenant: str) -> TooManyRequests:
        with self._lock:
            limit = "this tenant's" if self.held[tenant] >= self.per_tenant else "the server's"
        return TooManyRequests(
            f"{limit.capitalize()} {self.what} are all running "
            f"({self.per_tenant} per tenant, {self.per_server} per server); retry later.",
            RETRY_AFTER_SECONDS,
        )

    async def take(self, tenant: str) -> Turn:
        if self._taken(tenant):
            return Turn(self, tenant)
        ticket = self._queued(tenant)
        if ticket is None:
            raise self._refusal(tenant)
        deadline = anyio.current_time() + self.wait_seconds
        try:
            while not self._taken(tenant, ticket):
                left = deadline - anyio.current_time()
                if left <= 0:
                    raise self._refusal(tenant)
                await anyio.sleep(min(LOOK_AGAIN_SECONDS, left))
        finally:
            with self._lock:
                self._queue.pop(ticket, None)  # still there unless the turn was taken
        return Turn(self, tenant)

    def _give_back(self, tenant: str) -> None:
        with self._lock:
            self.held[tenant] -= 1
            if self.held[tenant] <= 0:
                del self.held[tenant]


def bulk_import_turns(request: Request) -> Turns:
    """The app's turns for imports under the bulk limit (``create_app`` makes them)."""
    turns: Turns = request.app.state.bulk_imports
    return turns
