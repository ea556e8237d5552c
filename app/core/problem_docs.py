"""The problem responses each route can give, declared in the OpenAPI document.

FastAPI documents a route's own responses and a 422 in its own (non-problem) shape. Every error
here is ``application/problem+json``, and which ones a route can give follows from what it
takes: a key (401, 403, 422 for its parameters, and 503 when the database is busy), path names
(404), a body (400, 413, 415, and 429 when the tenant's bodies arriving hold their share of
memory), and a change (409, 412). They are read from each operation of the
generated document, so every route, present and future, is documented the same way.

Each is declared once, under ``components/responses`` with one example built by the error
class the service raises, and referenced from the operations: the page lists an operation's
problems in one line each instead of repeating their schema and example ten times over.
"""

from http import HTTPStatus
from typing import Any

from app.core import errors
from app.core.config import Settings
from app.core.errors import PROBLEM_MEDIA_TYPE
from app.core.limits import BodyBytes
from app.formats.errors import MAX_LISTED

PROBLEM_SCHEMA: dict[str, Any] = {
    "title": "Problem",
    "description": "An RFC 9457 problem.",
    "type": "object",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "description": "`urn:context-store:problem:<slug>`"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "instance": {"type": "string"},
        "errors": {
            "type": "array",
            "description": "For 422: each fault, `path` a JSON Pointer into the body or "
            "`query.<name>`, `path.<name>`, `header.<name>`.",
            "items": {
                "type": "object",
                "required": ["path", "message"],
                "properties": {"path": {"type": "string"}, "message": {"type": "string"}},
            },
            "maxItems": MAX_LISTED,
        },
        "errors_truncated": {
            "type": "boolean",
            "description": f"Present, true, when there are more faults than the first "
            f"{MAX_LISTED} `errors` lists (the check stopped there).",
        },
    },
}

# Why each status is given, and the problem the service gives then (the one example).
_WHEN: dict[int, tuple[str, errors.Problem]] = {
    400: (
        "The body is not well-formed (JSON, gzip).",
        errors.MalformedBody("The body is not valid JSON: Expecting value at line 1 column 1."),
    ),
    401: ("No valid API key.", errors.Unauthenticated("No API key was sent.")),
    403: (
        "The key lacks the scope this route needs.",
        errors.Forbidden("This key lacks the `write` scope."),
    ),
    404: (
        "No such resource for this tenant.",
        errors.NotFound("No save 42 in project MyProject."),
    ),
    409: (
        "The change conflicts with the resource's state or a concurrent change.",
        errors.Conflict("The feature already exists."),
    ),
    412: (
        "`If-Match` or `If-None-Match` did not hold (where the route honours them).",
        errors.PreconditionFailed('If-Match "3f2a" does not match the current ETag.'),
    ),
    413: (
        "The body is over this route's size limit.",
        errors.ContentTooLarge("The body is over the limit of 33554432 bytes."),
    ),
    415: (
        "A media type or `Content-Encoding` this route does not take.",
        errors.UnsupportedMediaType("This route takes application/json, not text/xml."),
    ),
    422: (
        "The request breaks the contract; `errors` lists each fault.",
        errors.InvalidContent(
            "The request breaks the contract.",
            errors=[
                errors.FieldError("/keep_latest", "Input should be greater than or equal to 0")
            ],
        ),
    ),
    429: (
        "Bodies this tenant (or every tenant) is sending hold their share of the server's "
        "memory; retry after `Retry-After` seconds.",
        BodyBytes(
            per_tenant=Settings.model_fields["body_bytes_per_tenant"].default,
            per_server=Settings.model_fields["body_bytes_per_server"].default,
        ).refusal("a-tenant"),
    ),
    503: (
        "The database is busy or unreachable; retry after `Retry-After` seconds.",
        errors.ServiceUnavailable("The database is busy; retry shortly."),
    ),
}
_WRITE_METHODS = {"post", "put", "patch", "delete"}


def _component_name(status: int) -> str:
    """``NotFound`` for 404: the name the operations reference."""
    return HTTPStatus(status).phrase.title().replace(" ", "").replace("-", "")


def _problem_component(status: int) -> dict[str, Any]:
    description, example = _WHEN[status]
    schema = {"$ref": "#/components/schemas/Problem"}
    content = {"schema": schema, "example": example.body()}
    return {"description": description, "content": {PROBLEM_MEDIA_TYPE: content}}


def _problem(status: int) -> dict[str, Any]:
    return {"$ref": f"#/components/responses/{_component_name(status)}"}


def problem_statuses(path: str, method: str, operation: dict[str, Any]) -> set[int]:
    """What the operation can answer with, read from the operation itself."""
    if not operation.get("security"):
        return set()
    statuses = {401, 403, 422, 503}
    if "{" in path:
        statuses.add(404)
    if "requestBody" in operation:
        statuses |= {400, 413, 415, 429}
    if method in _WRITE_METHODS:
        statuses |= {409, 412}
    return statuses


def add_problem_responses(spec: dict[str, Any]) -> None:
    for path, operations in spec.get("paths", {}).items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            for status in sorted(problem_statuses(path, method, operation)):
                # A route's own declaration stays; FastAPI's 422 (HTTPValidationError) does
                # not: every 422 is a Problem.
                if status == 422 or str(status) not in responses:
                    responses[str(status)] = _problem(status)
    components = spec.setdefault("components", {})
    components["responses"] = {
        _component_name(status): _problem_component(status) for status in sorted(_WHEN)
    }
    schemas = components.setdefault("schemas", {})
    schemas["Problem"] = PROBLEM_SCHEMA
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
