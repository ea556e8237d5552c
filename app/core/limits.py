"""Turns for long work: at most so many at once per tenant and per server.

An archive export holds a worker thread and a connection while it builds its archive, then a
spool (memory, then a temporary file) until its client has read it all; an agent's memory
file sent whole (NDJSON) holds them while it is read, then its bytes until they are sent (a
file of raw traces grows without bound: 16 exports at once of one of 45 MB held 1.5 GB and
every other tenant's requests for seconds, 2026-11-27); an import under the bulk limit (a
save's, an archive's) holds a worker thread while it parses, redacts and compresses up to 64
MiB; the body of an MCP call over the body limit is made by the SDK into objects many times
its size (four of 60 MB at once held 2 GB, 2026-11-27), and takes an import's turn. Turns
bound how many run at once, so that one tenant cannot take every export (or the disk), or
every worker thread, or the memory, from the others.

Request bodies are held whole in memory from their first byte until their request ends (a
client may trickle one for minutes: 16 save bodies of 60 MB sent slowly held 1 GB, 2026-11-27).
``BodyBytes`` bounds what one tenant's bodies, and all of them, hold at once.
"""

import functools
import itertools
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import anyio
from starlette.requests import ClientDisconnect, Request

from app.core.errors import PROBLEM_MEDIA_TYPE, TooManyRequests

# What a refused client is told: exports last seconds, and a turn frees when one ends.
RETRY_AFTER_SECONDS = 5
# How often a request waiting for a turn looks again: turns are held for seconds.
LOOK_AGAIN_SECONDS = 0.05
# How many requests may wait for turns, for each that may run (per tenant, per server).
WAITERS_PER_TURN = 4


def too_many_running(what: str, *, takes_a_body: bool = False) -> dict[str, Any]:
    """The OpenAPI document's 429 of a route that takes turns of ``what`` (and, with
    ``takes_a_body``, whose body is held in ``BodyBytes``)."""
    bodies = ", or the bodies being received hold their share of memory" if takes_a_body else ""
    return {
        "description": f"This tenant's, or the server's, {what} are all running{bodies}; "
        "retry after `Retry-After` seconds.",
        "content": {PROBLEM_MEDIA_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}},
    }


BULK_IMPORTS_ALL_RUNNING = too_many_running("imports under the bulk limit", takes_a_body=True)
EXPORTS_ALL_RUNNING = too_many_running("exports of whole files")
# The 429 of a route whose file takes an export turn only when large (``download``).
LARGE_FILE_EXPORTS_ALL_RUNNING = EXPORTS_ALL_RUNNING | {
    "description": "The file is over the body limit (`MAX_BODY_BYTES`), and is sent in an "
    "export turn: this tenant's, or the server's, are all taken; retry after `Retry-After` "
    "seconds."
}


class Turn:
    """One held turn; ``release`` gives it back (once, however often it is called). One that
    an in-process caller keeps (``keeping_turns``) is given back by the caller, and its
    ``release`` gives back nothing."""

    def __init__(self, give_back: Callable[[], None] | None) -> None:
        self._give_back = give_back

    def release(self) -> None:
        give_back, self._give_back = self._give_back, None
        if give_back is not None:
            give_back()


class Turns:
    """At most ``per_tenant`` turns for a tenant and ``per_server`` in all. A request without
    a free turn waits for one up to ``wait_seconds``, asleep in its event loop (holding no
    thread and no connection) and looking again every ``LOOK_AGAIN_SECONDS``, then gets a 429
    with ``Retry-After``.

    Waiters go first in the order they came: the free turns are for the oldest waiters that may
    take them (each tenant below its own limit), not for whoever looks first, so that a stream
    of newcomers cannot keep a waiter out until its 429. And they are bounded, as the turns
    are (``_queued``); beyond the bounds a request is told at once to come back (an import
    waits holding its body, up to the bulk limit).

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

    def _free_for(self, tenant: str, claimed: Counter[str]) -> bool:
        """A turn is free for ``tenant`` once the waiters' turns in ``claimed`` are taken."""
        return (
            self.total + claimed.total() < self.per_server
            and self.held[tenant] + claimed[tenant] < self.per_tenant
        )

    def _taken(self, tenant: str, ticket: int | None = None) -> bool:
        """A turn for ``tenant``, taken if one is free once every waiter before ``ticket``
        (before every waiter, without one) that may take a turn has had it."""
        with self._lock:
            claimed: Counter[str] = Counter()
            for earlier, other in self._queue.items():
                if earlier == ticket:
                    break
                if self._free_for(other, claimed):
                    claimed[other] += 1
            if not self._free_for(tenant, claimed):
                return False
            self.held[tenant] += 1
            if ticket is not None:
                del self._queue[ticket]
            return True

    def _queued(self, tenant: str) -> int | None:
        """A ticket for ``tenant``'s place among the waiters; None when its places are all
        taken: ``per_tenant`` times WAITERS_PER_TURN of its own, of which those beyond its
        first ``per_tenant`` also count against ``per_server`` times WAITERS_PER_TURN for
        every tenant's (so that two busy tenants cannot leave a third no place to wait)."""
        with self._lock:
            waiting = Counter(self._queue.values())
            beyond_first = sum(max(0, count - self.per_tenant) for count in waiting.values())
            if waiting[tenant] >= self.per_tenant * WAITERS_PER_TURN or (
                waiting[tenant] >= self.per_tenant
                and beyond_first >= self.per_server * WAITERS_PER_TURN
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

    async def take(self, tenant: str, gone: Callable[[], Awaitable[bool]] | None = None) -> Turn:
        """One of ``tenant``'s turns, once it is free; the 429 when none frees in time.
        ``gone`` tells, at each look, whether the request's client has gone
        (``Request.is_disconnected``): such a waiter leaves its place (``ClientDisconnect``),
        and a turn is not taken, nor a document read and built, for nobody. Within
        ``keeping_turns``, the one its block keeps of these turns: taken the first time, kept
        until the block ends (its in-process requests take no second one, which with one
        turn a tenant they would wait for behind their own caller)."""
        kept = _kept_turns.get()
        if kept is None:
            return await self._take(tenant, gone)
        if not any(turns is self and owner == tenant for turns, owner, _ in kept):
            kept.append((self, tenant, await self._take(tenant, gone)))
        return Turn(None)

    async def _take(self, tenant: str, gone: Callable[[], Awaitable[bool]] | None) -> Turn:
        if self._taken(tenant):
            return Turn(functools.partial(self._give_back, tenant))
        ticket = self._queued(tenant)
        if ticket is None:
            raise self._refusal(tenant)
        deadline = anyio.current_time() + self.wait_seconds
        try:
            while not self._taken(tenant, ticket):
                if gone is not None and await gone():
                    raise ClientDisconnect()
                left = deadline - anyio.current_time()
                if left <= 0:
                    raise self._refusal(tenant)
                await anyio.sleep(min(LOOK_AGAIN_SECONDS, left))
        finally:
            with self._lock:
                self._queue.pop(ticket, None)  # still there unless the turn was taken
        return Turn(functools.partial(self._give_back, tenant))

    def _give_back(self, tenant: str) -> None:
        with self._lock:
            self.held[tenant] -= 1
            if self.held[tenant] <= 0:
                del self.held[tenant]


class BodyBytes:
    """The bytes of request bodies held at once: at most ``per_tenant`` for one tenant and
    ``per_server`` in all. A request that would go over either is refused at once (a 429 with
    ``Retry-After``): a body is held until its request ends, seconds at most once it has
    arrived, and a refused client sends it again later rather than keep a connection open."""

    def __init__(self, per_tenant: int, per_server: int) -> None:
        self.per_tenant = per_tenant
        self.per_server = per_server
        # The event loop changes it; a test's client may run each request in a loop of its own.
        self._lock = threading.Lock()
        self.held: Counter[str] = Counter()

    def hold(self, tenant: str, size: int) -> None:
        """Hold ``size`` bytes more for ``tenant``; else the 429, and nothing more held."""
        with self._lock:
            if size <= self._room(tenant):
                self.held[tenant] += size
                return
        raise self.refusal(tenant)

    def room(self, tenant: str) -> int:
        """How many bytes more ``tenant`` may hold, as things stand."""
        with self._lock:
            return self._room(tenant)

    def _room(self, tenant: str) -> int:
        return min(self.per_tenant - self.held[tenant], self.per_server - self.held.total())

    def refusal(self, tenant: str) -> TooManyRequests:
        with self._lock:
            tenants_room = self.per_tenant - self.held[tenant]
            whose = (
                "this tenant's"
                if tenants_room <= self.per_server - self.held.total()
                else "the server's"
            )
        return TooManyRequests(
            f"The request bodies this server is receiving hold {whose} share of its memory "
            f"({self.per_tenant} bytes per tenant, {self.per_server} per server); retry later.",
            RETRY_AFTER_SECONDS,
        )

    def give_back(self, tenant: str, size: int) -> None:
        with self._lock:
            self.held[tenant] -= size
            if self.held[tenant] <= 0:
                del self.held[tenant]


class HeldBody:
    """One request's share of ``BodyBytes``: grown as its body arrives, given back whole when
    the request ends."""

    def __init__(self, budget: BodyBytes, tenant: str) -> None:
        self._budget = budget
        self._tenant = tenant
        self.size = 0

    def up_to(self, size: int) -> None:
        """Hold at least ``size`` bytes in all (the 429 when the budget has no room)."""
        if size > self.size:
            self._budget.hold(self._tenant, size - self.size)
            self.size = size

    def most(self) -> int:
        """The most bytes this request may hold in all, as things stand."""
        return self.size + self._budget.room(self._tenant)

    def refusal(self) -> TooManyRequests:
        return self._budget.refusal(self._tenant)

    def release(self) -> None:
        self._budget.give_back(self._tenant, self.size)
        self.size = 0


# The turns kept by what calls the app in process for a request of its own (an MCP call,
# whose tool sends its route's request through the app, in the same context, and holds that
# answer whole until its own has been sent), each with its ``Turns`` and tenant: None outside
# such a call.
_kept_turns: ContextVar[list[tuple[Turns, str, Turn]] | None] = ContextVar(
    "kept_turns", default=None
)


@contextmanager
def keeping_turns() -> Iterator[None]:
    """Turns taken within the block, by the caller itself or by the requests it makes in
    process, are the block's: one of each ``Turns`` for a tenant, taken when first asked for
    and given back when the block ends, not when a request's own response ends. The caller
    holds those responses' bodies until its own response is sent, and so their turns; and a
    turn it took for its own work (an MCP call's large body) is the one its requests use."""
    kept: list[tuple[Turns, str, Turn]] = []
    token = _kept_turns.set(kept)
    try:
        yield
    finally:
        _kept_turns.reset(token)
        for _, _, turn in kept:
            turn.release()


def bulk_import_turns(request: Request) -> Turns:
    """The app's turns for imports under the bulk limit (``create_app`` makes them)."""
    turns: Turns = request.app.state.bulk_imports
    return turns


def export_turns(request: Request) -> Turns:
    """The app's turns for exports of whole files (an archive, an agent's memory file as
    NDJSON, any document over the body limit): ``create_app`` makes them."""
    turns: Turns = request.app.state.archive_exports
    return turns
