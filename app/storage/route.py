"""How a route runs a write: in one thread from the first statement to the commit, so that a
request costs one thread hop; the Idempotency-Key claimed and recorded once here, for every route
that takes one.

A write route's endpoint (a ``WriteRoute``'s, sync) runs whole in its write turn
(``app/core/write_turns.py``: SQLite's one writer, or its project's on PostgreSQL) when its
body is small (``SMALL_WRITE_BYTES``); a write with a larger body runs in a worker thread, so
that its parse and redaction do not hold up the writes queued behind it (they wait only for
the writer's connection or the project's lock, while it writes). A save's import
(``BulkWriteRoute``) always runs in a worker thread.

The commit happens before the response is sent: a client never sees a 2xx for a change that
then failed to commit.
"""

import dataclasses
import functools
import inspect
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Annotated, Any, get_origin

from fastapi import Request, Response, params
from fastapi import routing as fastapi_routing
from fastapi._compat import Undefined
from fastapi.dependencies.models import Dependant
from starlette.concurrency import run_in_threadpool

from app.core.body import BulkBodyRoute, ContextStoreRoute, received_size
from app.core.db import Database, WriteSession
from app.core.deps import authenticated, get_database
from app.core.documents import ANY_SIZE, Oversized
from app.core.limits import bulk_import_turns, export_turns
from app.core.parameters import BodyReader, ParameterReader, validation_failed
from app.core.redaction import answer_without_secrets
from app.core.responses import ClosingResponse
from app.core.security import Scope
from app.idempotency.service import Idempotency, IdempotencyKey, Rebuild, answered, idempotency_of
from app.projects.service import ProjectDeleter
from app.storage.writes import Write, begin_write

Change = Callable[[Write], Response]
"""A route's change: the service's rule on the write, and the response that reports it."""


# A small write's body is parsed, checked and redacted in its write turn, before the write
# takes the writer's connection: at about 10 ms of CPU a MB of JSON (a 1 MB save's import,
# 2026-11-26), 64 KiB costs about as much as the write itself.
SMALL_WRITE_BYTES = 64 * 1024


@dataclass(frozen=True)
class Writes:
    """The calling tenant's writes, the app's deleter of hidden rows, and the request's
    Idempotency-Key (None without one)."""

    database: Database
    tenant: str
    deleter: ProjectDeleter
    idempotency: Idempotency | None = None
    # The most bytes of a stored document a read-first write reads to answer with it (a
    # resume's save): over it, the read raises ``Oversized`` and the write runs again in one of
    # the tenant's export turns, with no bound (``ReadFirstWriteRoute``).
    answer_up_to: int = ANY_SIZE

    def run(
        self, project: str, change: Change, *, create: bool = True, rebuild: Rebuild | None = None
    ) -> Response:
        """Lock the project, find the key's first response or claim the key, apply the
        change, remember its response under the key, commit. Without ``create``, a project
        that does not exist is a 404 (``begin_write``). A first response found is a
        ``Replay``, its body read once the write is over (``WriteRoute`` does); ``rebuild``
        rebuilds one the change answered by reference (``AnswerByReference``)."""
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
                        replayed.rebuild = rebuild
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

    def hide(self, project: str, remove: Callable[[Write], None]) -> Response:
        """A delete whose change hides what it deletes (``Write.hide``): 204 once it has
        committed, and the deleter woken then, to delete the hidden rows after the answer.
        Woken in the write's own thread: a request cancelled during its write, which commits
        all the same, still has its rows deleted."""
        deleted = self.delete(project, remove)
        self.deleter.wake()
        return deleted


@dataclass(frozen=True)
class _TakesWrites:
    """Marks the endpoint parameter a ``WriteRoute`` hands the request's ``Writes``."""

    idempotent: bool


WritesDep = Annotated[Writes, _TakesWrites(idempotent=False)]
"""For a route whose write takes no Idempotency-Key (PUT, PATCH, DELETE: idempotent by their
nature, or guarded by If-Match)."""
IdempotentWritesDep = Annotated[Writes, _TakesWrites(idempotent=True)]
"""For a POST that creates or appends: honours ``Idempotency-Key``."""

# The parameters a ``WriteRoute`` adds in place of its endpoint's ``Writes``, for FastAPI to
# fill: the request (when the endpoint takes none of its own) and the Idempotency-Key header.
_REQUEST = "writes_request"
_IDEMPOTENCY_KEY = "idempotency_key"


def _writes_parameter(endpoint: Callable[..., Any]) -> tuple[str, _TakesWrites] | None:
    """The endpoint's parameter that takes its ``Writes``, and how (None: it writes not)."""
    for parameter in inspect.signature(endpoint, eval_str=True).parameters.values():
        if get_origin(parameter.annotation) is Annotated:
            for marker in parameter.annotation.__metadata__:
                if isinstance(marker, _TakesWrites):
                    return parameter.name, marker
    return None


def _request_parameter(parameters: list[inspect.Parameter]) -> str | None:
    """The endpoint's parameter that FastAPI fills with the request (``Annotated`` or not)."""
    for parameter in parameters:
        annotation = parameter.annotation
        if get_origin(annotation) is Annotated:
            annotation = annotation.__origin__
        if isinstance(annotation, type) and issubclass(annotation, Request):
            return parameter.name
    return None


def _handled_dependant(route: ContextStoreRoute) -> tuple[Dependant, bool]:
    """The dependant FastAPI builds the route's handler for, and whether its body fields are
    embedded: under an included router, the route's own with what the inclusion adds (its
    dependencies). FastAPI 0.165 hands them to ``get_route_handler`` in a context variable,
    and reads them there as this does."""
    context = fastapi_routing._effective_route_context_var.get()
    handled = context if context is not None and context.original_route is route else route
    dependant: Dependant = handled.dependant
    embed: bool = handled._embed_body_fields
    return dependant, embed


def _reads_parameters_only(dependant: Dependant) -> bool:
    """Whether FastAPI's handler would do nothing for the endpoint but read its parameters and
    JSON body and hand it the request: no dependency, form, response, background tasks or
    security scopes."""
    return not (
        dependant.dependencies
        or any(isinstance(field.field_info, params.Form) for field in dependant.body_params)
        or dependant.websocket_param_name
        or dependant.http_connection_param_name
        or dependant.response_param_name
        or dependant.background_tasks_param_name
        or dependant.security_scopes_param_name
    )


class WriteRoute(ContextStoreRoute):
    """A route whose endpoint takes the request's ``Writes`` (a ``WritesDep`` or
    ``IdempotentWritesDep`` parameter), which the route makes and hands it, and which needs
    a key with the ``write`` scope, under a path with the project. The endpoint, sync, runs
    whole in its write turn when the body is at most ``write_turn_bytes``, else in a worker
    thread. Any other endpoint runs as ``ContextStoreRoute`` runs it.

    ``Writes`` is not a FastAPI dependency: each level of dependencies FastAPI resolves costs a
    request instructions (the write's two, ``Writes`` and the scope's under it, 170,000 of a
    decision POST's 2.89 million, 5.9%, callgrind, 2026-11-26), and
    a key's scope, the one thing a dependency of its own would order (a 401 or 403 before a bad
    Idempotency-Key's 422), is checked by the route class before FastAPI reads anything."""

    # The most body bytes a write runs whole in its write turn with (None: never in one).
    write_turn_bytes: int | None = SMALL_WRITE_BYTES
    # Whether it runs in one of its tenant's bulk-import turns (``in_bulk_import_turn``).
    bulk_import = False

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        writes = _writes_parameter(endpoint)
        request_name: str | None = None
        if writes is not None:
            endpoint, request_name = self._handing_writes(endpoint, *writes)
        # Read by ``checked_request_handler``, which FastAPI's ``__init__`` calls.
        self.hands_writes = writes is not None
        super().__init__(path, endpoint, **kwargs)
        if writes is not None:
            # FastAPI fills one request parameter alone: it must be the one the wrapper reads.
            if self.dependant.request_param_name != request_name:
                raise TypeError(f"{path}: FastAPI fills another request parameter than Writes'")
            # A write waits for its turn behind its project's (app/core/write_turns.py).
            if "project" not in self.param_convertors:
                raise TypeError(f"{path}: a write route's path names its project")
            self.require_scopes({Scope.write})

    def checked_request_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """For an endpoint that takes ``Writes`` and nothing FastAPI must resolve besides its
        path, query, header and cookie parameters, its JSON body and the request, a handler
        that reads those (``app/core/parameters.py``) and calls it; else FastAPI's own.

        FastAPI's handler reads the same values and raises the same errors, but it also makes
        a ``Response`` for dependencies to set headers on and a dependency cache, reads every
        parameter group whether the route has any (the cookies parsed), works out each
        field's kind and names again, parses the media type with ``email.message``, and runs
        its native telemetry's operations around each step: 7.9% of a decision POST's
        instructions (callgrind, 2026-11-26). What this handler leaves out is what an
        endpoint of a write route never uses (it answers a ``Response``, so nothing is
        serialized) and FastAPI's OpenTelemetry spans of its inner steps (the request's own
        span stays, and a validation failure is reported to FastAPI's telemetry as its
        handler reports it)."""
        dependant, embed_body_fields = _handled_dependant(self)
        # ``handing_writes``, as FastAPI would call it (an integration may have wrapped it:
        # then, unless it is still a coroutine function, FastAPI's handler runs it).
        endpoint = dependant.call
        if (
            not self.hands_writes
            or not _reads_parameters_only(dependant)
            or not inspect.iscoroutinefunction(endpoint)
        ):
            return super().checked_request_handler()
        assert endpoint is not None
        parameters = ParameterReader(dependant)
        body = BodyReader(dependant, embed_body_fields) if dependant.body_params else None
        request_name = dependant.request_param_name
        assert request_name is not None  # the wrapper takes the request (_handing_writes)

        async def calling_endpoint(request: Request) -> Response:
            # In FastAPI's order: the body parsed first, its fields' errors after the rest's.
            received = None if body is None else await body.received(request)
            values, errors = parameters.read(request)
            if body is not None:
                found, wrong = await body.read(received)
                values.update(found)
                errors += wrong
            if errors:
                raise validation_failed(errors, None if received is Undefined else received)
            values[request_name] = request
            response: Response = await endpoint(**values)
            return response

        return calling_endpoint

    def _handing_writes(
        self, endpoint: Callable[..., Response], name: str, takes: _TakesWrites
    ) -> tuple[Callable[..., Any], str]:
        """``endpoint`` as a coroutine that makes its ``Writes`` and runs it whole in their
        thread, with the signature FastAPI reads in place of the endpoint's: the ``Writes``
        parameter replaced by those it is made from. Keyword-only, since FastAPI passes every
        argument by name and the added header has a default. Also the name of the parameter
        the request comes in."""
        if inspect.iscoroutinefunction(endpoint):
            raise TypeError(f"{endpoint.__name__} takes Writes: it must be a sync function")
        signature = inspect.signature(endpoint, eval_str=True)
        parameters = list(signature.parameters.values())
        taken = {_REQUEST, _IDEMPOTENCY_KEY} & set(signature.parameters)
        if taken:
            raise TypeError(f"{endpoint.__name__}: {', '.join(sorted(taken))} is Writes' own")
        request_name = _request_parameter(parameters)
        added: list[inspect.Parameter] = []
        if request_name is None:
            added.append(
                inspect.Parameter(_REQUEST, inspect.Parameter.KEYWORD_ONLY, annotation=Request)
            )
        if takes.idempotent:
            added.append(
                inspect.Parameter(
                    _IDEMPOTENCY_KEY,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=None,
                    annotation=IdempotencyKey,
                )
            )
        position = [parameter.name for parameter in parameters].index(name)
        shown = [*parameters[:position], *added, *parameters[position + 1 :]]
        write_turn_bytes = self.write_turn_bytes
        bulk_import = self.bulk_import

        @functools.wraps(endpoint)
        async def handing_writes(**arguments: Any) -> Response:
            request: Request = (
                arguments.pop(_REQUEST) if request_name is None else arguments[request_name]
            )
            key: str | None = arguments.pop(_IDEMPOTENCY_KEY) if takes.idempotent else None
            # Authenticated and authorized by the route class: the principal is the request's.
            principal = await authenticated(request)
            idempotency = await idempotency_of(request, principal, key)
            database = get_database(request)
            tenant = principal.tenant
            deleter = request.app.state.project_deleter
            up_to = request.app.state.settings.max_body_bytes
            writes = Writes(database, tenant, deleter, idempotency, answer_up_to=up_to)
            arguments[name] = writes
            run: Callable[[], Response] = functools.partial(endpoint, **arguments)
            if bulk_import:
                response = await in_bulk_import_turn(request, tenant, idempotency, run)
            elif write_turn_bytes is None or received_size(request) > write_turn_bytes:
                try:
                    response = await answered(request, await run_in_threadpool(run))
                except Oversized:
                    arguments[name] = dataclasses.replace(writes, answer_up_to=ANY_SIZE)
                    whole = functools.partial(endpoint, **arguments)
                    return await _in_export_turn(request, tenant, whole)
            else:
                project = (principal.tenant, request.path_params["project"])
                response = await answered(request, await database.write_turns.run(project, run))
            # Whether or not the request had an Idempotency-Key (whose answer is remembered
            # redacted): the first answer is the same either way.
            return await _without_secrets(response)

        handing_writes.__signature__ = signature.replace(  # type: ignore[attr-defined]  # read by inspect.signature, which FastAPI calls
            parameters=[
                parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY) for parameter in shown
            ]
        )
        return handing_writes, _REQUEST if request_name is None else request_name


async def _in_export_turn(request: Request, tenant: str, run: Callable[[], Response]) -> Response:
    """A write whose answer holds a document over the body limit (a resume's save), run once
    one of the tenant's export turns is free, and its answer sent in it, as a large download
    is (``app/core/responses.py``): what answers that clients do not read hold at once is
    bounded by the turns (its read raised ``Oversized`` before anything was built or written)."""
    turn = await export_turns(request).take(tenant, request.is_disconnected)
    try:
        response = await _without_secrets(await answered(request, await run_in_threadpool(run)))
    except BaseException:
        turn.release()
        raise
    return ClosingResponse(response, turn.release)


async def _without_secrets(response: Response) -> Response:
    """``answer_without_secrets``, for a large answer in a worker thread: a resume answers its
    whole save, and 30 MB of it walked for secrets on the event loop held every tenant's
    requests 5 s (2026-11-27). A small one, as most are, costs no thread hop."""
    if len(response.body) <= SMALL_WRITE_BYTES:
        return answer_without_secrets(response)
    return await run_in_threadpool(answer_without_secrets, response)


async def in_bulk_import_turn(
    request: Request, tenant: str, idempotency: Idempotency | None, work: Callable[[], Response]
) -> Response:
    """An import under the bulk limit (a save's, an archive's): the recorded answer of its
    Idempotency-Key, if it has one (a retry of a finished import is answered at once, never
    told to wait or come back), else ``work`` in a worker thread once one of the tenant's
    turns is free (``app/core/limits.py``: beyond them it waits, then is a 429). Sent in
    process by an MCP call (``keeping_turns``), it uses the call's turn: the one the call
    took for a body over the limit, else one kept until the call's answer has been sent."""
    if idempotency is not None:
        replayed = await idempotency.recorded_first(get_database(request))
        if replayed is not None:
            return await replayed.answer(request)
    turn = await bulk_import_turns(request).take(tenant, request.is_disconnected)
    try:
        response = await run_in_threadpool(work)
    finally:
        turn.release()
    # A replay when the same request, sent twice at once, recorded its answer meanwhile.
    return await answered(request, response)


class BulkWriteRoute(WriteRoute, BulkBodyRoute):
    """A write whose body may be large (a save's import): the bulk body limit, and its write
    always in a worker thread, so that its parse and redaction never hold up the small writes
    queued behind it, once it has one of its tenant's turns (``in_bulk_import_turn``)."""

    write_turn_bytes = None
    bulk_import = True


class ReadFirstWriteRoute(WriteRoute):
    """A write that reads and builds what it stores before its write takes any lock (a
    restore's rebuild from memory: seconds for thousands of items): in a worker thread
    whatever its body, never in its write turn, which on SQLite is every tenant's one writer
    (until 2026-11-28 one whose body was empty, or not read, ran whole in a write turn: every
    resume and restore)."""

    write_turn_bytes = None
