"""How a route runs a write: in one thread from the first statement to the commit, so that a
request costs one thread hop; the Idempotency-Key claimed and recorded once here, for every route
that takes one.

That thread is one of the database's write threads (``app/core/write_threads.py``) for every
route of a ``WriteRoute``: its endpoint, sync, runs there whole. A bulk route's (a save's
import: a large body parsed and redacted before its write) runs in a worker thread as any other
sync route's, so that its parse does not hold up the writes queued behind it.

The commit happens before the response is sent: a client never sees a 2xx for a change that
then failed to commit.
"""

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

from fastapi import Depends, Request, Response

from app.core.body import ContextStoreRoute
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


def _writes_parameter(endpoint: Callable[..., Any]) -> str | None:
    """The name of the endpoint's parameter that takes its ``Writes`` (None: it writes not)."""
    for parameter in inspect.signature(endpoint, eval_str=True).parameters.values():
        annotation = parameter.annotation
        if get_origin(annotation) is Annotated and get_args(annotation)[0] is Writes:
            return parameter.name
    return None


def _in_write_threads(endpoint: Callable[..., Response], writes: str) -> Callable[..., Any]:
    """``endpoint`` as a coroutine that runs it whole in a write thread. FastAPI reads the
    parameters through ``__wrapped__``, and awaits the coroutine rather than sending the sync
    endpoint to a worker thread."""

    @functools.wraps(endpoint)
    async def in_write_threads(**arguments: Any) -> Response:
        request_writes: Writes = arguments[writes]
        run = functools.partial(endpoint, **arguments)
        return await request_writes.database.write_threads.run(run)

    return in_write_threads


class WriteRoute(ContextStoreRoute):
    """A route whose sync endpoint takes the request's ``Writes`` runs it in the database's
    write threads; any other endpoint runs as ``ContextStoreRoute`` runs it."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        writes = _writes_parameter(endpoint)
        if writes is not None and not inspect.iscoroutinefunction(endpoint):
            endpoint = _in_write_threads(endpoint, writes)
        super().__init__(path, endpoint, **kwargs)
