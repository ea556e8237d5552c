"""The OpenAPI document reads as documentation: every operation has a human summary and every
tag a description, every request body an example, and the examples work: each one sent as
Swagger UI's Try it out sends it is accepted, in the page's order, on a fresh project."""

import json
import re
from typing import Any

from fastapi import FastAPI, routing
from fastapi.routing import APIRoute
from pydantic import TypeAdapter

from app.core.api_docs import NO_EXAMPLE, operation_key
from app.docs_catalog import DOMAINS
from tests.conftest import client_for, create_key

TABLE = {key: doc for domain in DOMAINS for key, doc in domain.operations.items()}
# Bodies that are files a person picks, not text to edit: Swagger UI offers a file picker.
BINARY_ONLY = {"POST /v1/projects/{project}/archive"}


def _operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method, path, operation)
        for path, operations in spec["paths"].items()
        for method, operation in operations.items()
    ]


def test_every_operation_has_a_human_summary(app: FastAPI):
    spec = app.openapi()
    undocumented = [
        operation_key(method, path)
        for method, path, _ in _operations(spec)
        if operation_key(method, path) not in TABLE
    ]
    assert not undocumented, f"add them to their domain's api_docs.py: {undocumented}"
    for method, path, operation in _operations(spec):
        assert operation["summary"] == TABLE[operation_key(method, path)].summary
        for status, response in operation["responses"].items():
            if status.startswith("2"):
                assert response["description"] not in ("", "Successful Response"), (path, status)


def test_every_tag_is_described_and_names_its_files(app: FastAPI):
    spec = app.openapi()
    described = {tag["name"]: tag["description"] for tag in spec["tags"]}
    used = {tag for _, _, operation in _operations(spec) for tag in operation["tags"]}
    assert used == set(described)
    for name in ("saves", "agents", "runs", "features", "memory", "archive"):
        assert re.search(r"`[^`]*(\.json|\.jsonl|\.tar\.gz|/)`", described[name]), name


def test_every_request_body_has_an_example(app: FastAPI):
    for method, path, operation in _operations(app.openapi()):
        if "requestBody" not in operation or operation_key(method, path) in BINARY_ONLY:
            continue
        first = next(iter(operation["requestBody"]["content"].values()))
        assert "example" in first, (method, path)


def _declared_models(route: APIRoute) -> dict[int, Any]:
    models = {int(status): extra.get("model") for status, extra in route.responses.items()}
    if route.response_model is not None:
        models[route.status_code or 200] = route.response_model
    return {status: model for status, model in models.items() if model is not None}


def test_reply_examples_are_what_the_routes_return(app: FastAPI):
    """Each success example is an instance of the model the route answers with."""
    checked = 0
    for context in routing.iter_route_contexts(app.routes):
        route = context.original_route
        if not isinstance(route, APIRoute):
            continue
        for method in context.methods or ():
            doc = TABLE.get(operation_key(method, context.path_format))
            if doc is None:
                continue
            for status, model in _declared_models(route).items():
                reply = doc.replies.get(status)
                if reply is not None and reply.example is not NO_EXAMPLE:
                    TypeAdapter(model).validate_python(reply.example)
                    checked += 1
    assert checked > 20


def _example_request(operation: dict[str, Any], path: str) -> dict[str, Any]:
    """What Try it out sends as the page opens: the parameters' and the body's examples."""
    url = path
    query = {}
    for parameter in operation.get("parameters", []):
        if "example" not in parameter:
            continue
        if parameter["in"] == "path":
            url = url.replace("{" + parameter["name"] + "}", str(parameter["example"]))
        elif parameter["in"] == "query":
            query[parameter["name"]] = parameter["example"]
    request: dict[str, Any] = {"url": url, "params": query}
    if "requestBody" in operation:
        media_type, content = next(iter(operation["requestBody"]["content"].items()))
        if "example" in content:
            request["content"] = json.dumps(content["example"], indent=2)
            request["headers"] = {"Content-Type": media_type}
    return request


# Answers that are right for the example as the page opens on a fresh project.
EXPECTED_NOT_2XX = {
    # There is a backup only after a `state:load` that reset the state.
    "GET /v1/projects/{project}/runs/{run}/state/backup": 404,
    # The breaker trips only after `max_attempts` rejections: a fresh feature has none to reset.
    "POST /v1/projects/{project}/features/{feature}/circuit-breaker:reset": 409,
}
# Ids the service assigns: the examples name the first one of a fresh database; this test's
# database is shared with the others, so it uses the ones its own requests were given.
ASSIGNED = {
    "POST /v1/projects/{project}/saves": "save_id",
    "POST /v1/admin/keys": "key_id",
}


def test_every_example_works_as_the_page_opens(app: FastAPI, tenant: str):
    """Every operation with its examples as they are is accepted by the service: the writes
    in the page's order, then the reads, then the deletions in reverse order. The archive
    import is sent the archive the export gave, as a person would pick it."""
    client = client_for(app, create_key(app, tenant))
    operations = _operations(app.openapi())
    ordered = (
        [op for op in operations if op[0] not in ("get", "delete")]
        + [op for op in operations if op[0] == "get"]
        + [op for op in reversed(operations) if op[0] == "delete"]
    )
    assigned: dict[str, str] = {}
    failures = []
    for method, path, operation in ordered:
        key = operation_key(method, path)
        request = _example_request(operation, path.format_map(_Unfilled(assigned)))
        if key in BINARY_ONLY:
            exported = client.get(request["url"])
            request |= {
                "content": exported.content,
                "headers": {"Content-Type": "application/gzip"},
            }
        response = client.request(method.upper(), **request)
        expected = EXPECTED_NOT_2XX.get(key)
        ok = response.status_code == expected if expected else response.is_success
        if not ok:
            failures.append((key, response.status_code, response.text[:500]))
        elif key in ASSIGNED:
            assigned[ASSIGNED[key]] = str(response.json()["id"])
    assert not failures, "\n".join(map(str, failures))


class _Unfilled(dict[str, str]):
    """format_map that leaves the placeholders it has no value for."""

    def __missing__(self, name: str) -> str:
        return "{" + name + "}"


def test_every_response_names_the_request_id_it_carries(app: FastAPI, client):
    """Each response in the document names X-Request-ID (directly or through the component it
    refers to), and the header described is the one a response carries."""
    spec = app.openapi()
    components = spec["components"]
    header = components["headers"]["X-Request-ID"]
    named = {"$ref": "#/components/headers/X-Request-ID"}
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if "$ref" in response:
                    response = components["responses"][response["$ref"].rsplit("/", 1)[1]]
                assert response["headers"]["X-Request-ID"] == named, (method, path, status)
    pattern = re.compile(header["schema"]["pattern"])
    sent = client.get("/v1/projects", headers={"X-Request-ID": "trace:42"})
    assert sent.headers["x-request-id"] == "trace:42"
    made = client.get("/v1/projects", headers={"X-Request-ID": "not a token"})
    assert pattern.fullmatch(made.headers["x-request-id"])
    assert made.headers["x-request-id"] != "not a token"
