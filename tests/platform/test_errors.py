"""Every error is problem+json with the right status; nothing internal reaches the client."""

import pytest
from fastapi import FastAPI

from app.saves import service as saves_service
from tests.conftest import client_for, create_key
from tests.helpers import assert_problem, import_save, seed_save


def test_unknown_route_is_a_404_problem(client):
    assert_problem(client.get("/v1/nothing-here"), 404)


def test_wrong_method_is_a_405_problem(client):
    assert_problem(client.put("/healthz"), 405)


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/v1/projects/p", "DELETE, GET"),
        ("/v1/projects/p/saves", "GET, POST"),
        ("/v1/projects/p/runs/r/state", "GET, PATCH, PUT"),
        ("/v1/projects/p/memory/decisions/d", "DELETE, GET, PATCH"),
    ],
)
def test_a_405_allows_every_method_of_the_resource(client, path, allowed):
    """Found by the fuzzer: Allow named the methods of the first route that matched alone."""
    response = client.options(path)
    assert_problem(response, 405)
    assert response.headers["allow"] == allowed


def test_the_openapi_document_declares_each_operations_problems(app):
    """Each problem response is declared once, as a component with one example, and referenced
    from every operation that can give it."""
    spec = app.openapi()
    problem_schema = {"$ref": "#/components/schemas/Problem"}
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            declared = operation["responses"]
            if not operation.get("security"):
                continue
            expected = {"401", "403", "422", "503"} | ({"404"} if "{" in path else set())
            if "requestBody" in operation:
                expected |= {"400", "413", "415"}
            for status in expected:
                reference = declared[status]["$ref"]
                assert reference.startswith("#/components/responses/"), (method, path, status)
                component = spec["components"]["responses"][reference.rsplit("/", 1)[1]]
                content = component["content"]["application/problem+json"]
                assert content["schema"] == problem_schema, (method, path, status)
                assert content["example"]["status"] == int(status)
    assert "HTTPValidationError" not in spec["components"]["schemas"]


def test_malformed_json_is_a_400_problem(client, project):
    for route in (f"/v1/projects/{project}/saves", f"/v1/projects/{project}/saves:prune"):
        response = client.post(
            route, content=b'{"keep_latest": ', headers={"Content-Type": "application/json"}
        )
        assert_problem(response, 400)


def test_contract_violation_is_a_422_with_pointed_errors(client, project):
    response = client.post(f"/v1/projects/{project}/saves:prune", json={"keep_latest": -1})
    body = assert_problem(response, 422)
    assert body["errors"] == [
        {"path": "/keep_latest", "message": "Input should be greater than or equal to 0"}
    ]


def test_query_violation_points_at_the_parameter(client):
    body = assert_problem(client.get("/v1/projects", params={"limit": 0}), 422)
    assert [error["path"] for error in body["errors"]] == ["query.limit"]


def test_wrong_content_type_is_a_415_problem(client, project):
    response = client.post(
        f"/v1/projects/{project}/saves:prune",
        content=b"keep_latest=1",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert_problem(response, 415)
    response = client.post(
        f"/v1/projects/{project}/saves", content=b"<xml/>", headers={"Content-Type": "text/xml"}
    )
    assert_problem(response, 415)


def test_missing_content_type_is_a_415_problem(client, project):
    response = client.post(f"/v1/projects/{project}/saves:prune", content=b'{"keep_latest": 1}')
    assert_problem(response, 415)


def test_unexpected_failure_is_a_500_problem_without_internals(
    app: FastAPI, tenant, project, monkeypatch
):
    def explode(*_args, **_kwargs):
        raise RuntimeError("secret internal state at /srv/app/thing.py")

    monkeypatch.setattr(saves_service, "list_saves", explode)
    client = client_for(app, create_key(app, tenant), raise_server_exceptions=False)
    import_save(client, project, seed_save())
    body = assert_problem(client.get(f"/v1/projects/{project}/saves"), 500)
    assert "secret internal state" not in body["detail"]


@pytest.mark.parametrize(
    "name",
    ["-starts-with-dash", ".hidden", "a" * 129, "ünïcode", "semi;colon", "sp ace", "a%00b"],
)
def test_invalid_identifiers_are_422_problems(client, name):
    body = assert_problem(client.get(f"/v1/projects/{name}/saves"), 422)
    assert body["errors"][0]["path"] == "path.project"


def test_path_traversal_never_reaches_a_route(client):
    response = client.get("/v1/projects/..%2F..%2Fetc/saves")
    assert response.status_code in (404, 422)
    assert_problem(response, response.status_code)
