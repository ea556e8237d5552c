"""Turns for long work: at most so many at once per tenant and per server.

An archive export holds a worker thread and a connection while it builds its archive, then a
spool (memory, then a temporary file) until its client has read it all; an import under the
bulk limit (a save's, an archive's) holds a worker thread while it parses, redacts and
compresses up to 64 MiB. Turns bound how many run at once, so that one tenant cannot take
every export (or the disk), or every worker thread, from the others.
"""

from collections import Counter
from typing import Any

import anyio
from starlette.requests import Request

from app.core.errors import PROBLEM_MEDIA_TYPE, TooManyRequests

# What a refused client is told: exports last seconds, and a turn frees when one ends.
RETRY_AFTER_SECONDS = 5


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
    a free turn waits for one up to ``wait_seconds`` in the event loop (holding no thread and
    no connection), then gets a 429 with ``Retry-After``.

    Used only from the event loop's thread: the counts need no lock.
    """

    def __init__(self, what: str, per_tenant: int, per_server: int, wait_seconds: float) -> None:
        self.what = what
        self.per_tenant = per_tenant
        self.per_server = per_server
        self.wait_seconds = wait_seconds
        self.held: Counter[str] = Counter()
        self.waiting = 0
        self._given_back: anyio.Event | None = None

    @property
    def total(self) -> int:
        return self.held.total()

    def _free(self, tenant: str) -> bool:
        return self.total < self.per_server and self.held[tenant] < self.per_tenant

    async def take(self, tenant: str) -> Turn:
        self.waiting += 1
        try:
            with anyio.move_on_after(self.wait_seconds):
                while not self._free(tenant):
                    if self._given_back is None:
                        self._given_back = anyio.Event()
                    await self._given_back.wait()
        finally:
            self.waiting -= 1
        if not self._free(tenant):
            limit = "this tenant's" if self.held[tenant] >= self.per_tenant else "the server's"
            raise TooManyRequests(
                f"{limit.capitalize()} {self.what} are all running "
                f"({self.per_tenant} per tenant, {self.per_server} per server); retry later.",
                RETRY_AFTER_SECONDS,
            )
        self.held[tenant] += 1
        return Turn(self, tenant)

    def _give_back(self, tenant: str) -> None:
        self.held[tenant] -= 1
        if self.held[tenant] <= 0:
            del self.held[tenant]
        if self._given_back is not None:
            # Every waiter looks again; those whose turn is still taken wait for the next.
            self._given_back.set()
            self._given_back = None


def bulk_import_turns(request: Request) -> Turns:
    """The app's turns for imports under the bulk limit (``create_app`` makes them)."""
    turns: Turns = request.app.state.bulk_imports
    return turns
