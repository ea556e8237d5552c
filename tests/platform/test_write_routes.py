"""A write route's endpoint gets its ``Writes`` from the route (app/storage/route.py), not from
a FastAPI dependency: through HTTP against a real app, whatever form the endpoint's request
parameter takes; and a route that could not be handed them is refused when it is declared."""

from typing import Annotated

import pytest
from fastapi import Request, Response
from fastapi.testclient import TestClient

from app.core.identifiers import ProjectName
from app.core.json import FastJSONResponse
from app.core.routing import GatedRouter
from app.core.security import Scope
from app.main import create_app
from app.storage.route import IdempotentWritesDep, WriteRoute, WritesDep
from app.storage.writes import Write
from tests.conftest import client_for, create_key, make_settings
from tests.helpers import assert_problem

PROBE = "/v1/projects/{project}/probe"


def _answer(request: Request, write: Write) -> Response:
    return FastJSONResponse({"path": request.url.path, "tenant": write.tenant}, status_code=201)


def _probe_router() -> GatedRouter:
    router = GatedRouter(prefix=PROBE, route_class=WriteRoute)

    @router.post("/annotated")
    def annotated(
        project: ProjectName,
        request: Annotated[Request, "the request, under another annotation"],
        writes: IdempotentWritesDep,
    ) -> Response:
        return writes.run(project, lambda write: _answer(request, write))

    @router.post("/without-request")
    def without_request(project: ProjectName, writes: WritesDep) -> Response:
        return writes.run(project, lambda write: FastJSONResponse({"tenant": write.tenant}, 201))

    return router


def test_an_endpoint_gets_its_writes_whatever_its_request_parameter(database_url, tenant):
    app = create_app(make_settings(database_url))
    app.include_router(_probe_router())
    with TestClient(app):
        client = client_for(app, create_key(app, tenant))
        reader = client_for(app, create_key(app, tenant, Scope.read))
        annotated = PROBE.format(project="p") + "/annotated"
        first = client.post(annotated, headers={"Idempotency-Key": "k1"})
        assert first.status_code == 201, first.text
        assert first.json() == {"path": annotated, "tenant": tenant}
        replayed = client.post(annotated, headers={"Idempotency-Key": "k1"})
        assert replayed.headers.get("Idempotent-Replayed") == "true"
        assert replayed.json() == first.json()
        without = client.post(PROBE.format(project="p") + "/without-request")
        assert without.status_code == 201, without.text
        assert without.json() == {"tenant": tenant}
        # The route needs the write scope, though no dependency of its own declares it.
        assert_problem(reader.post(annotated), 403)
        assert_problem(reader.post(PROBE.format(project="p") + "/without-request"), 403)


def test_a_write_route_refuses_an_endpoint_it_cannot_hand_writes_to():
    router = GatedRouter(prefix=PROBE, route_class=WriteRoute)

    async def asynchronous(project: ProjectName, writes: WritesDep) -> Response:
        raise AssertionError("never called")

    def takes_the_key_itself(
        project: ProjectName, idempotency_key: str, writes: IdempotentWritesDep
    ) -> Response:
        raise AssertionError("never called")

    def two_requests(
        project: ProjectName, request: Request, other: Request, writes: WritesDep
    ) -> Response:
        raise AssertionError("never called")

    for endpoint, says in (
        (asynchronous, "must be a sync function"),
        (takes_the_key_itself, "idempotency_key is Writes' own"),
        (two_requests, "another request parameter"),
    ):
        with pytest.raises(TypeError, match=says):
            router.add_api_route("/x", endpoint, methods=["POST"])
