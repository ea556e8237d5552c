"""How a route runs a write: in one thread from the first statement to the commit, so that a
request costs one thread hop; the Idempotency-Key claimed and recorded once here, for every route
that takes one.

On SQLite, a write route's endpoint (a ``WriteRoute``'s, sync) runs whole in the database's write
thread (``app/core/write_threads.py``) when its body is small (``SMALL_WRITE_BYTES``); a write
with a larger body runs in a worker thread, as every write does on PostgreSQL, so that its parse
and redaction do not hold up the writes queued behind it (they wait only for the writer's
connection, while it writes). A save's import (``BulkBodyRoute``) always runs in a worker thread.

The commit happens before the response is sent: a client never sees a 2xx for a change that
then failed to commit.
"""

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

from fastapi import Depends, Request, Response
from starlette.concurrency import run_in_threadpool

from app.core.body import ContextStoreRoute, received_size
from app.core.db import Database, WriteSession
from app.core.deps import Writer, get_database
from app.core.write_threads import WriteThread
from app.idempotency.service import Idempotency, IdempotencyKey, idempotency_of
from app.storage.writes import Write, begin_write

Change = Callable[[Write], Response]
"""A route's change: the service's rule on the write, and the response that reports it."""


# A small write's body is parsed, checked and redacted in the write thread, before the write
# takes the writer's connection: at about 10 ms of CPU a MB of JSON (a 1 MB save's import,
# 2026-11-26), 64 KiB costs about as much as the write itself.
SMALL_WRITE_BYTES = 64 * 1024


@dataclass(frozen=True)
class Writes:
    """The calling tenant's writes, and the request's Idempotency-Key (None without one); the
    write thread a ``WriteRoute`` runs its endpoint in (None: a worker thread)."""

    database: Database
    tenant: str
    idempotency: Idempotency | None = None
    thread: WriteThread | None = None

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


def _write_thread(request: Request, database: Database) -> WriteThread | None:
    """The database's write thread (SQLite's) for a write whose body is small, else None."""
    if database.write_thread is None or received_size(request) > SMALL_WRITE_BYTES:
        return None
    return database.write_thread


# Coroutines, though they do no I/O: FastAPI runs a plain function dependency in a thread of
# its own, a hop a request should not pay for this.


async def _writes(request: Request, principal: Writer) -> Writes:
    database = get_database(request)
    return Writes(database, principal.tenant, thread=_write_thread(request, database))


# The key's check is a dependency of its own (``Writer``), not a call in here: FastAPI validates
# a dependency's own parameters (the Idempotency-Key header) before calling it, so that only a
# sub-dependency answers an anonymous or read-only client with 401 or 403 before a bad
# header's 422.
async def _idempotent_writes(
    request: Request, principal: Writer, idempotency_key: IdempotencyKey = None
) -> Writes:
    idempotency = await idempotency_of(request, principal, idempotency_key)
    database = get_database(request)
    return Writes(database, principal.tenant, idempotency, _write_thread(request, database))


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


def _in_write_thread(endpoint: Callable[..., Response], writes: str) -> Callable[..., Any]:
    """``endpoint`` as a coroutine that runs it whole in its ``Writes``' thread, or else in a
    worker thread as FastAPI runs a sync endpoint. FastAPI reads the parameters through
    ``__wrapped__``."""

    @functools.wraps(endpoint)
    async def in_write_thread(**arguments: Any) -> Response:
        thread: WriteThread | None = arguments[writes].thread
        run: Callable[[], Response] = functools.partial(endpoint, **arguments)
        if thread is None:
            return await run_in_threadpool(run)
        return await thread.run(run)

    return in_write_thread


class WriteRoute(ContextStoreRoute):
    """A route whose sync endpoint takes the request's ``Writes`` runs it where they say
    (``Writes.thread``); any other endpoint runs as ``ContextStoreRoute`` runs it."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        writes = _writes_parameter(endpoint)
        if writes is not None and not inspect.iscoroutinefunction(endpoint):
            endpoint = _in_write_thread(endpoint, writes)
        super().__init__(path, endpoint, **kwargs)
