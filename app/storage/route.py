"""How a route runs a write: in its own worker thread from the first statement to the commit,
so that a request costs one thread hop; the Idempotency-Key claimed and recorded once here,
for every route that takes one.

The commit happens before the response is sent: a client never sees a 2xx for a change that
then failed to commit.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request, Response

from app.core.db import Database, WriteSession
from app.core.deps import Writer, get_database
from app.idempotency.service import Idempotency, IdempotencyKey, idempotency_of
from app.storage.writes import Write, begin_write

Change = Callable[[Write], Response]
"""A route's change: the service's rule on the write, and the response that reports it."""


@dataclass(frozen=True)
class Writes:
    """The calling tenant's writes, and the request's Idempotency-Key (None without one)."""

    database: Database
    tenant: str
    idempotency: Idempotency | None = None

    def run(self, project: str, change: Change, *, create: bool = True) -> Response:
        """Lock the project, replay the key's first response or claim the key, apply the
        change, remember its response under the key, commit. Without ``create``, a project
        that does not exist is a 404 (``begin_write``)."""
        with self.database.write_connection() as connection:
            sessions = WriteSession(connection)
            try:
                write = begin_write(sessions, self.tenant, project, create=create)
                if self.idempotency is None:
                    response = change(write)
                else:
                    replayed = self.idempotency.claim(write.session)
                    if replayed is not None:
                        connection.rollback()  # the project's touch: a replay changes nothing
                        return replayed
                    response = self.idempotency.record(write.session, change(write))
                sessions.flush()
                return response
            finally:
                sessions.close()

    def delete(self, project: str, remove: Callable[[Write], None]) -> Response:
        """Run a change that answers nothing (a delete): 204 once it has committed."""

        def change(write: Write) -> Response:
            remove(write)
            return Response(status_code=204)

        return self.run(project, change)


# Coroutines, though they do no I/O: FastAPI runs a plain function dependency in a thread of
# its own, a hop a request should not pay for this.


async def _writes(request: Request, principal: Writer) -> Writes:
    return Writes(get_database(request), principal.tenant)


# The key's check is a dependency of its own (``Writer``), not a call in here: FastAPI validates
# a dependency's own parameters (the Idempotency-Key header) before calling it, so that only a
# sub-dependency answers an anonymous or read-only client with 401 or 403 before a bad
# header's 422.
async def _idempotent_writes(
    request: Request, principal: Writer, idempotency_key: IdempotencyKey = None
) -> Writes:
    idempotency = await idempotency_of(request, principal, idempotency_key)
    return Writes(get_database(request), principal.tenant, idempotency)


WritesDep = Annotated[Writes, Depends(_writes)]
"""For a route whose write takes no Idempotency-Key (PUT, PATCH, DELETE: idempotent by their
nature, or guarded by If-Match)."""
IdempotentWritesDep = Annotated[Writes, Depends(_idempotent_writes)]
"""For a POST that creates or appends: honours ``Idempotency-Key``."""
