"""One error hierarchy, rendered as RFC 9457 problem+json.

Services raise these; the handlers installed by ``install_error_handlers`` render them, map
framework and database errors onto them, and make sure nothing else (a stack trace, SQL, a
file path) ever reaches a client.
"""

import logging
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request, routing
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from sqlalchemy.exc import (
    DataError,
    DBAPIError,
    IntegrityError,
    OperationalError,
    ProgrammingError,
    SQLAlchemyError,
    StatementError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.routing import Match

from app.core.json import dumps
from app.core.migrations import current_revision, not_migrated_reason
from app.formats.errors import MAX_LISTED, FormatError, MalformedDocument
from app.formats.jsondoc import pointer as json_pointer
from app.redaction import redact_pointer, redact_value

log = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"
PROBLEM_TYPE_PREFIX = "urn:context-store:problem:"


class FieldError(dict[str, str]):
    """One ``{path, message}`` item of a problem's ``errors`` list."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(path=path, message=message)


class Problem(Exception):
    status: int = 500
    slug: str = "internal-error"

    def __init__(
        self,
        detail: str,
        *,
        errors: Sequence[FieldError] = (),
        headers: dict[str, str] | None = None,
        **extensions: Any,
    ) -> None:
        super().__init__(detail)
        self.detail = detail
        # At most ``MAX_LISTED``, as a codec lists them: the rest are said to be there. (A
        # body of a million wrong values in one array gave pydantic's million errors.)
        listed = list(errors)
        if len(listed) > MAX_LISTED:
            extensions["errors_truncated"] = True
        self.errors = listed[:MAX_LISTED]
        self.headers = headers or {}
        self.extensions = extensions

    def body(self, instance: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "type": PROBLEM_TYPE_PREFIX + self.slug,
            "title": HTTPStatus(self.status).phrase,
            "status": self.status,
            "detail": self.detail,
        }
        if instance:
            body["instance"] = instance
        if self.errors:
            body["errors"] = [
                FieldError(redact_pointer(error["path"]), redact_value(error["message"]))
                for error in self.errors
            ]
        elif self.status == 422:
            # The contract: every 422 says where. One that cannot name a field (the database
            # refused a value) points at the whole request.
            body["errors"] = [FieldError("", redact_value(self.detail))]
        body.update(self.extensions)
        # A detail or an error may quote what the client sent (a name, a value, a key in a
        # pointer): never a secret in it, whichever route raised the problem.
        redacted: dict[str, Any] = redact_value(body)
        return redacted


class MalformedBody(Problem):
    status, slug = 400, "malformed-body"


class Unauthenticated(Problem):
    status, slug = 401, "unauthenticated"

    def __init__(self, detail: str) -> None:
        super().__init__(detail, headers={"WWW-Authenticate": "Bearer"})


UNKNOWN_KEY = "The API key is unknown or revoked."


class RevokedKey(Exception):
    """A key the server remembered was revoked (by another process, the command line or a
    request of its own) before this request reached the database; rendered as a 401.

    Not a Problem on purpose: code that turns a Problem into part of its answer (an archive
    import reports each refused member) must not swallow it. The whole request is refused."""


class Forbidden(Problem):
    status, slug = 403, "forbidden"


class NotFound(Problem):
    status, slug = 404, "not-found"


class MethodNotAllowed(Problem):
    status, slug = 405, "method-not-allowed"


class NotAcceptable(Problem):
    status, slug = 406, "not-acceptable"


class Conflict(Problem):
    status, slug = 409, "conflict"


class PreconditionFailed(Problem):
    status, slug = 412, "precondition-failed"


class ContentTooLarge(Problem):
    status, slug = 413, "content-too-large"


class UnsupportedMediaType(Problem):
    status, slug = 415, "unsupported-media-type"


class InvalidContent(Problem):
    """JSON (or another accepted format) that breaks the contract."""

    status, slug = 422, "validation-error"


class RetryLater(Problem):
    """A refusal that passes: ``Retry-After`` says when to try again."""

    def __init__(self, detail: str, retry_after_seconds: int = 1) -> None:
        super().__init__(detail, headers={"Retry-After": str(retry_after_seconds)})


class TooManyRequests(RetryLater):
    status, slug = 429, "too-many-requests"


class ServiceUnavailable(RetryLater):
    status, slug = 503, "unavailable"


class DatabaseNotMigrated(ServiceUnavailable):
    """The database's schema is older than this release: an operator has to migrate it."""

    slug = "database-not-migrated"

    def __init__(self, detail: str) -> None:
        super().__init__(detail, retry_after_seconds=5)


def problem_response(problem: Problem, request: Request | None = None) -> Response:
    instance = request.url.path if request is not None else None
    return Response(
        content=dumps(problem.body(instance)),
        status_code=problem.status,
        media_type=PROBLEM_MEDIA_TYPE,
        headers=problem.headers,
    )


def pointer(location: Sequence[str | int]) -> str:
    """Where a validation error points: a JSON Pointer into the body, ``query.name`` else."""
    if not location:
        return ""
    source, *rest = location
    if source == "body":
        return json_pointer(*rest)
    return ".".join(str(part) for part in location)


def format_problem(exc: FormatError) -> Problem:
    """A codec's refusal as a problem: malformed 400, invalid 422, each fault listed."""
    problem_class = MalformedBody if isinstance(exc, MalformedDocument) else InvalidContent
    problem = problem_class(exc.message, errors=[FieldError(p, m) for p, m in exc.errors])
    if exc.more:
        problem.extensions["errors_truncated"] = True
    return problem


def _validation_problem(exc: RequestValidationError) -> Problem:
    errors = exc.errors()
    if any(error["type"] == "json_invalid" for error in errors):
        return MalformedBody("The request body is not well-formed JSON.")
    return InvalidContent(
        "The request does not satisfy the contract.",
        errors=[FieldError(pointer(e["loc"]), e["msg"]) for e in errors],
    )


_STARLETTE_STATUS_PROBLEMS: dict[int, type[Problem]] = {
    400: MalformedBody,
    404: NotFound,
    405: MethodNotAllowed,
    406: NotAcceptable,
    413: ContentTooLarge,
    415: UnsupportedMediaType,
}


# PostgreSQL's SQLSTATEs for a transaction that lost to another and may simply be retried.
RETRYABLE_SQLSTATES = {"40001": "serialization failure", "40P01": "deadlock"}


def _database_problem(exc: DBAPIError | PoolTimeoutError) -> Problem | None:
    """Database errors a client should retry: SQLite's lock, pool exhaustion, lost servers."""
    if isinstance(exc, PoolTimeoutError):
        return ServiceUnavailable("The database is busy; retry shortly.")
    if not isinstance(exc, OperationalError):
        return None
    sqlstate = getattr(exc.orig, "sqlstate", None)
    if sqlstate in RETRYABLE_SQLSTATES:
        return ServiceUnavailable(
            f"The change lost a race with another ({RETRYABLE_SQLSTATES[sqlstate]}); retry it."
        )
    message = str(exc.orig).lower() if exc.orig is not None else ""
    if "database is locked" in message or "database table is locked" in message:
        return ServiceUnavailable("The database is busy; retry shortly.")
    if exc.connection_invalidated or "connection" in message:
        return ServiceUnavailable("The database is unreachable; retry shortly.", 5)
    return None


def _driver_message(exc: Exception) -> str:
    """The database's own message, without SQLAlchemy's statement and parameters (a
    document's text), with any secret it quotes (a key's value) redacted."""
    orig = getattr(exc, "orig", None)
    message = str(orig) if orig is not None else type(exc).__name__
    redacted: str = redact_value(message)
    return redacted


# What a query answers when it names a table, column or function the database lacks, as it does
# when the schema is older than the code: PostgreSQL's undefined_table, undefined_column and
# undefined_function (a search before 0018's functions), and SQLite's messages for the first two.
_MISSING_SCHEMA_SQLSTATES = frozenset({"42P01", "42703", "42883"})
_MISSING_SCHEMA_MESSAGES = ("no such table", "no such column", "has no column named")


def _names_missing_schema(exc: DBAPIError | PoolTimeoutError) -> bool:
    if not isinstance(exc, DBAPIError):
        return False
    if getattr(exc.orig, "sqlstate", None) in _MISSING_SCHEMA_SQLSTATES:
        return True
    message = str(exc.orig).lower()
    return any(text in message for text in _MISSING_SCHEMA_MESSAGES)


async def _not_migrated_problem(
    request: Request, exc: DBAPIError | PoolTimeoutError
) -> Problem | None:
    """503 naming `context-store migrate` when a query missed a table or column because the
    database is behind this release. The database is asked which migration it is at, so that
    a missing table in a migrated database stays the server fault it is."""
    if not _names_missing_schema(exc):
        return None
    state = request.app.state
    try:
        current = await run_in_threadpool(current_revision, state.database.reader)
    except SQLAlchemyError:
        return None
    reason = not_migrated_reason(current, state.migration_head)
    return None if reason is None else DatabaseNotMigrated(reason)


def allowed_methods(request: Request) -> str:
    """RFC 9110's ``Allow`` for a 405: every method of the resource, not only those of the first
    route whose path matched (a resource's GET and DELETE are separate routes)."""
    path_format: str | None = None
    methods: set[str] = set()
    for route in routing.iter_route_contexts(request.app.routes):
        if route.matches(request.scope)[0] is Match.NONE:
            continue
        path_format = path_format or route.path_format
        if route.path_format == path_format:
            methods |= route.methods or set()
    return ", ".join(sorted(methods))


def install_error_handlers(app: FastAPI) -> None:
    async def on_problem(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Problem)
        return problem_response(exc, request)

    async def on_validation(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return problem_response(_validation_problem(exc), request)

    async def on_http(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        problem_class = _STARLETTE_STATUS_PROBLEMS.get(exc.status_code)
        if problem_class is None:
            problem: Problem = Problem(str(exc.detail))
            problem.status = exc.status_code
            problem.slug = "http-error"
        else:
            problem = problem_class(str(exc.detail))
        problem.headers.update(exc.headers or {})
        if exc.status_code == 405:
            problem.headers["Allow"] = allowed_methods(request)
        return problem_response(problem, request)

    async def on_revoked_key(request: Request, exc: Exception) -> Response:
        return problem_response(Unauthenticated(UNKNOWN_KEY), request)

    async def on_format(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, FormatError)
        return problem_response(format_problem(exc), request)

    async def on_integrity(request: Request, exc: Exception) -> Response:
        # A unique or foreign key constraint lost a race with another writer.
        log.info("integrity error on %s: %s", request.url.path, _driver_message(exc))
        return problem_response(
            Conflict("The change conflicts with a concurrent change; retry it."), request
        )

    async def on_database(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, DBAPIError | PoolTimeoutError)
        problem = await _not_migrated_problem(request, exc) or _database_problem(exc)
        if problem is None:
            return await on_unexpected(request, exc)
        log.warning("database unavailable on %s: %s", request.url.path, _driver_message(exc))
        return problem_response(problem, request)

    async def on_unstorable(request: Request, exc: Exception) -> Response:
        # Validation should have refused the value first; this is the net under it.
        assert isinstance(exc, StatementError)
        if not isinstance(exc, DataError) and not isinstance(
            exc.orig, UnicodeEncodeError | OverflowError
        ):
            return await on_unexpected(request, exc)
        log.warning("unstorable value on %s: %s", request.url.path, type(exc.orig).__name__)
        return problem_response(
            InvalidContent("A value in the request cannot be stored by the database."), request
        )

    async def on_disconnect(request: Request, exc: Exception) -> Response:
        # The client closed its connection before its body arrived, or while its request
        # waited for a turn: nothing changes, and no one is left to read this answer. Not a
        # server error.
        log.info("client disconnected before its request was answered on %s", request.url.path)
        return problem_response(
            MalformedBody("The connection closed before the request was answered."), request
        )

    async def on_unexpected(request: Request, exc: Exception) -> Response:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem_response(Problem("An unexpected error occurred."), request)

    app.add_exception_handler(Problem, on_problem)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(RevokedKey, on_revoked_key)
    app.add_exception_handler(FormatError, on_format)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(IntegrityError, on_integrity)
    app.add_exception_handler(OperationalError, on_database)
    app.add_exception_handler(ProgrammingError, on_database)
    app.add_exception_handler(PoolTimeoutError, on_database)
    app.add_exception_handler(StatementError, on_unstorable)
    app.add_exception_handler(ClientDisconnect, on_disconnect)
    app.add_exception_handler(Exception, on_unexpected)
