"""What a person reads in /docs: each operation's summary and examples, each tag's description.

Each domain declares its part in one table (``app/<domain>/api_docs.py``: ``DOCS``, its tag and
an ``Operation`` per route keyed by ``"METHOD /path"`` as the document lists them), and
``app/docs_catalog.py`` gathers them; they are applied to the generated document here. The
routers stay HTTP only, and the words and examples of a domain are read in one place. A table
entry for an operation that does not exist is an error, so a renamed route cannot leave its
documentation behind silently; an operation with no entry is caught by the tests
(tests/platform/test_api_docs.py).
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.routing import BaseRoute

from app.core.deps import KEY_SCHEMES
from app.core.logs import REQUEST_ID_HEADER, SANE_REQUEST_ID
from app.core.problem_docs import add_problem_responses

JSON = "application/json"


class _NoExample:
    def __repr__(self) -> str:
        return "NO_EXAMPLE"


NO_EXAMPLE: Any = _NoExample()
"""Stands for "no example" where ``None`` (JSON null) is a value an example could have."""


@dataclass(frozen=True)
class Reply:
    """One documented response: what it means, and an example body."""

    description: str
    example: Any = NO_EXAMPLE
    media_type: str = JSON


@dataclass(frozen=True)
class Operation:
    summary: str
    replies: Mapping[int, Reply]
    body: Any = NO_EXAMPLE
    """The example request body, put under the first declared media type (the one Swagger UI's
    Try it out opens with): a JSON value for JSON media types, text otherwise."""
    parameters: Mapping[str, Any] = field(default_factory=dict)
    """Examples for this operation's parameters, by name (query ones, and path ones where the
    shared example of that name does not fit)."""


@dataclass(frozen=True)
class Tag:
    name: str
    description: str


@dataclass(frozen=True)
class DomainDocs:
    tag: Tag
    operations: Mapping[str, Operation]


def operation_key(method: str, path: str) -> str:
    return f"{method.upper()} {path}"


def _with_example(content: dict[str, Any], example: Any) -> dict[str, Any]:
    return {**content, "example": example}


def _document_operation(
    operation: dict[str, Any], doc: Operation, path_examples: Mapping[str, Any]
) -> None:
    operation["summary"] = doc.summary
    for parameter in operation.get("parameters", []):
        name = parameter["name"]
        if name in doc.parameters:
            parameter["example"] = doc.parameters[name]
        elif parameter["in"] == "path" and name in path_examples:
            parameter["example"] = path_examples[name]
    if doc.body is not NO_EXAMPLE:
        content = operation["requestBody"]["content"]
        first = next(iter(content))
        content[first] = _with_example(content[first], doc.body)
    responses = operation.setdefault("responses", {})
    for status, reply in doc.replies.items():
        response = responses.setdefault(str(status), {})
        response["description"] = reply.description
        if reply.example is not NO_EXAMPLE:
            content = response.setdefault("content", {})
            media = content.get(reply.media_type, {"schema": {}})
            content[reply.media_type] = _with_example(media, reply.example)


def document_api(
    app: FastAPI, domains: Iterable[DomainDocs], path_examples: Mapping[str, Any]
) -> None:
    """Make ``app.openapi()`` carry the key schemes, each operation's problem responses (which
    read the schemes), and the domains' summaries, examples and tags."""
    generate = app.openapi
    domains = list(domains)

    def openapi() -> dict[str, Any]:
        spec = generate()
        if "tags" not in spec:  # once: FastAPI caches it
            document_key_schemes(spec, app.routes)
            add_problem_responses(spec)
            document_request_id(spec)
            document_operations(spec, domains, path_examples)
        return spec

    # FastAPI's documented way to extend the document (its docs assign app.openapi too).
    app.openapi = openapi  # type: ignore[method-assign]


def document_request_id(spec: dict[str, Any]) -> None:
    """``X-Request-ID`` on every response (``app/core/logs.py`` sets it): described once among
    the components, named by each response (the problem responses' components included; a
    response that is a ``$ref`` carries its component's)."""
    components = spec.setdefault("components", {})
    components.setdefault("headers", {})[REQUEST_ID_HEADER] = {
        "description": (
            "The request's id: the client's own `X-Request-ID` when it is a plain token (1-128 "
            "letters, digits and `._:-`), else a new one. The server's log line for the request "
            "carries it (`request_id`)."
        ),
        "schema": {"type": "string", "pattern": f"^{SANE_REQUEST_ID.pattern}$"},
    }
    named = {"$ref": f"#/components/headers/{REQUEST_ID_HEADER}"}
    responses = [
        response
        for operations in spec.get("paths", {}).values()
        for operation in operations.values()
        for response in operation.get("responses", {}).values()
    ]
    for response in [*responses, *components.get("responses", {}).values()]:
        if "$ref" not in response:
            response.setdefault("headers", {})[REQUEST_ID_HEADER] = named


def document_key_schemes(spec: dict[str, Any], routes: list[BaseRoute]) -> None:
    """Both ways to send a key (``KEY_SCHEMES``), on every operation of a route that needs one
    (``ContextStoreRoute.authenticated``), as FastAPI writes a security dependency's."""
    schemes = spec.setdefault("components", {}).setdefault("securitySchemes", {})
    requirement: list[dict[str, list[str]]] = []
    for scheme in KEY_SCHEMES:
        schemes[scheme.scheme_name] = scheme.model.model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
        requirement.append({scheme.scheme_name: []})
    for context in iter_route_contexts(routes):
        route = context.original_route
        operations = spec["paths"].get(context.path_format, {})
        if isinstance(route, APIRoute) and getattr(route, "authenticated", False):
            for method in route.methods or ():
                if method.lower() in operations:
                    operations[method.lower()] = _secured(operations[method.lower()], requirement)


def _secured(operation: dict[str, Any], requirement: Any) -> dict[str, Any]:
    """The operation with its security where FastAPI places it, after its ``operationId``."""
    secured: dict[str, Any] = {}
    for key, value in operation.items():
        secured[key] = value
        if key == "operationId":
            secured["security"] = requirement
    return secured


def document_operations(
    spec: dict[str, Any], domains: Iterable[DomainDocs], path_examples: Mapping[str, Any]
) -> None:
    """Apply the domains' tables to ``spec`` (in place)."""
    domains = list(domains)
    table = {key: doc for domain in domains for key, doc in domain.operations.items()}
    seen: set[str] = set()
    for path, operations in spec.get("paths", {}).items():
        for method, operation in operations.items():
            key = operation_key(method, path)
            if key in table:
                _document_operation(operation, table[key], path_examples)
                seen.add(key)
    if stale := sorted(table.keys() - seen):
        raise LookupError(f"documentation for operations the app does not have: {stale}")
    spec["tags"] = [
        {"name": domain.tag.name, "description": domain.tag.description} for domain in domains
    ]
