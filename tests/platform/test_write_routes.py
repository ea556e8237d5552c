"""A write route's endpoint gets its ``Writes`` from the route (app/storage/route.py), not from
a FastAPI dependency: through HTTP against a real app, whatever form the endpoint's request
parameter takes; and a route that could not be handed them is refused when it is declared.
Its parameters and JSON body, which the route reads itself (app/core/parameters.py), come out
as FastAPI's own handler reads them: the same values, the same errors in the same order."""

import inspect
from enum import StrEnum
from typing import Annotated, Any

import pytest
from fastapi import (
    APIRouter,
    Body,
    Cookie,
    Depends,
    Header,
    HTTPException,
    Query,
    Request,
    Response,
)
from fastapi.encoders import jsonable_encoder
from fastapi.testclient import TestClient
from pydantic import AliasChoices, BaseModel

from app.core import parameters
from app.core.identifiers import ProjectName
from app.core.json import FastJSONResponse
from app.core.routing import GatedRouter
from app.core.security import Scope
from app.idempotency.service import IdempotencyKey
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

    # A write waits for its turn behind its project's writes: the path must name the project.
    def no_project(writes: WritesDep) -> Response:
        raise AssertionError("never called")

    without_project = GatedRouter(prefix="/v1/probe", route_class=WriteRoute)
    with pytest.raises(TypeError, match="names its project"):
        without_project.add_api_route("/x", no_project, methods=["POST"])


def _same_answers(
    database_url: str, tenant: str, router: GatedRouter, urls: list[str], **request: Any
) -> tuple[int, Any]:
    """The answer to the request sent to each URL (a write route's, then FastAPI's), which
    must be the same: its status and body, without the problem's ``instance`` (the path)."""
    app = create_app(make_settings(database_url))
    app.include_router(router)
    answers = []
    with TestClient(app):
        client = client_for(app, create_key(app, tenant))
        for url in urls:
            answer = client.post(url, **request)
            content = answer.json()
            content.pop("instance", None)
            answers.append((answer.status_code, content))
    assert answers[0] == answers[1]
    return answers[0]


class Colour(StrEnum):
    red = "red"
    blue = "blue"


def _echo(values: dict[str, Any]) -> Response:
    return FastJSONResponse(jsonable_encoder(values))


def _parameter_router() -> GatedRouter:
    """The same parameters of every kind twice: read by a write route (``/read-by-the-route``,
    its endpoint takes ``Writes``) and by FastAPI's handler (``/read-by-fastapi``)."""
    router = GatedRouter(prefix=PROBE, route_class=WriteRoute)

    def parameters(
        project: ProjectName,
        number: int,
        colour: Colour,
        x_required: Annotated[str, Header()],
        flag: bool | None = None,
        count: Annotated[int, Query(ge=1)] = 3,
        tags: Annotated[list[str] | None, Query()] = None,
        named: Annotated[str | None, Query(alias="other-name")] = None,
        chosen: Annotated[str | None, Query(validation_alias=AliasChoices("a", "b"))] = None,
        x_optional: Annotated[int | None, Header()] = None,
        session: Annotated[str | None, Cookie()] = None,
    ) -> dict[str, Any]:
        return dict(locals())

    def by_the_route(**values: Any) -> Response:
        values.pop("writes")
        return _echo(values)

    # The same parameters, and the request's ``Writes``.
    declared = inspect.signature(parameters)
    writes = inspect.Parameter("writes", inspect.Parameter.KEYWORD_ONLY, annotation=WritesDep)
    by_the_route.__signature__ = declared.replace(  # type: ignore[attr-defined]  # read by inspect.signature
        parameters=[*declared.parameters.values(), writes], return_annotation=Response
    )
    router.add_api_route("/read-by-the-route/{number}/{colour}", by_the_route, methods=["POST"])
    router.add_api_route("/read-by-fastapi/{number}/{colour}", parameters, methods=["POST"])
    return router


@pytest.mark.parametrize(
    ("path", "query", "headers"),
    [
        pytest.param("p/7/red", "", {"X-Required": "r"}, id="valid, defaults"),
        pytest.param(
            "p/7/blue",
            "flag=yes&count=9&tags=a&tags=b&other-name=n&b=choice",
            {"X-Required": "r", "X-Optional": "12", "Cookie": "session=s1"},
            id="valid, every parameter",
        ),
        pytest.param("p/7/red", "", {}, id="missing header"),
        pytest.param("p/seven/red", "", {"X-Required": "r"}, id="not a number"),
        pytest.param("p/7/green", "", {"X-Required": "r"}, id="not a member"),
        pytest.param("-bad-/7/red", "", {"X-Required": "r"}, id="project's pattern"),
        pytest.param("p/7/red", "count=0&flag=maybe", {"X-Required": "r"}, id="query"),
        pytest.param("p/7/red", "", {"X-Required": "r", "X-Optional": "x"}, id="header"),
        pytest.param("p/7/red", "x_required=r", {"X-Required": ""}, id="empty header"),
        pytest.param(
            "-bad-/x/green",
            "count=-1&flag=2&other-name=n",
            {"X-Optional": "1.5"},
            id="errors in every group, in order",
        ),
    ],
)
def test_a_write_route_reads_its_parameters_as_fastapi_does(
    database_url, tenant, path, query, headers
):
    project, rest = path.split("/", 1)
    urls = [
        PROBE.format(project=project) + f"/{reader}/{rest}" + (f"?{query}" if query else "")
        for reader in ("read-by-the-route", "read-by-fastapi")
    ]
    status, _ = _same_answers(database_url, tenant, _parameter_router(), urls, headers=headers)
    assert status in (200, 422)


class Note(BaseModel):
    text: str
    count: int = 1
    tags: list[str] = []


def _body_router() -> GatedRouter:
    """Bodies read by write routes (``/by-the-route/...``) and by FastAPI's handler
    (``/by-fastapi/...``): one model, and a model with another field (embedded)."""
    router = GatedRouter(prefix=PROBE, route_class=WriteRoute)

    def one(project: ProjectName, note: Note) -> dict[str, Any]:
        return {"project": project, "note": note}

    def embedded(note: Note, extra: Annotated[int, Body()]) -> dict[str, Any]:
        return {"note": note, "extra": extra}

    @router.post("/by-the-route/one")
    def one_by_the_route(project: ProjectName, note: Note, writes: IdempotentWritesDep) -> Response:
        return _echo(one(project, note))

    @router.post("/by-the-route/embedded")
    def embedded_by_the_route(
        note: Note, extra: Annotated[int, Body()], writes: WritesDep
    ) -> Response:
        return _echo(embedded(note, extra))

    @router.post("/by-fastapi/one")
    def one_by_fastapi(
        project: ProjectName, note: Note, idempotency_key: IdempotencyKey = None
    ) -> dict[str, Any]:
        return one(project, note)

    router.add_api_route("/by-fastapi/embedded", embedded, methods=["POST"])
    return router


# Media types a route class lets through to a JSON body, which FastAPI parses as JSON or not.
_MEDIA_TYPES = [
    "application/merge-patch+json",
    "text/x+json",
    "application/vnd.a/b+json",  # not exactly one slash: text/plain, as email.message reads it
    "application//+json",
    " Application/JSON ; charset=utf-8",
]


@pytest.mark.parametrize(
    ("route", "project", "body", "headers"),
    [
        pytest.param("one", "p", b'{"text": "t"}', {}, id="valid"),
        pytest.param("one", "p", b'{"text": "t", "count": 2, "tags": ["a"], "more": 1}', {}),
        pytest.param("one", "p", b'{"count": "many", "tags": "a"}', {}, id="invalid fields"),
        pytest.param("one", "p", b'{"text": "t", "count": NaN}', {}, id="NaN"),
        pytest.param("one", "p", b"[1, 2]", {}, id="an array"),
        pytest.param("one", "p", b'{"text": ', {}, id="malformed"),
        pytest.param("one", "p", b"[" * 5000 + b"]" * 5000, {}, id="nested too deep"),
        pytest.param("one", "p", b'{"text": "\xff\xfe"}', {}, id="not UTF-8"),
        pytest.param("one", "-bad-", b'{"text": ', {}, id="malformed, before the path"),
        pytest.param("one", "p", b"", {}, id="empty"),
        pytest.param(
            "one", "-bad-", b"{}", {"Idempotency-Key": "k" * 300}, id="path, header, body"
        ),
        *(
            pytest.param("one", "p", b'{"text": "t"}', {"Content-Type": media_type}, id=media_type)
            for media_type in _MEDIA_TYPES
        ),
        pytest.param("embedded", "p", b'{"note": {"text": "t"}, "extra": 4}', {}),
        pytest.param("embedded", "p", b'{"text": "t"}', {}, id="embedded, missing"),
    ],
)
def test_a_write_route_reads_its_body_as_fastapi_does(
    database_url, tenant, route, project, body, headers
):
    urls = [
        PROBE.format(project=project) + f"/{reader}/{route}"
        for reader in ("by-the-route", "by-fastapi")
    ]
    sent = {"Content-Type": "application/json", **headers}
    status, _ = _same_answers(
        database_url, tenant, _body_router(), urls, content=body, headers=sent
    )
    assert status in (200, 400, 422)


def test_a_write_routes_invalid_request_is_reported_to_fastapis_telemetry(
    database_url, tenant, monkeypatch
):
    # FastAPI's handler reports each RequestValidationError to its native telemetry (an event
    # and the request's data, when an OpenTelemetry provider is configured); so does the
    # write route's.
    reported = []
    monkeypatch.setattr(parameters, "_validation_failed", reported.append)
    app = create_app(make_settings(database_url))
    app.include_router(_body_router())
    with TestClient(app):
        client = client_for(app, create_key(app, tenant))
        url = PROBE.format(project="p") + "/by-the-route/one"
        sent = {"Content-Type": "application/json"}
        assert client.post(url, content=b'{"count": "x"}', headers=sent).status_code == 422
        assert client.post(url, content=b'{"text": ', headers=sent).status_code == 400
    assert [error.body for error in reported] == [{"count": "x"}, '{"text": ']


def test_a_dependency_an_inclusion_adds_to_a_write_route_is_resolved(database_url, tenant):
    # A write route calls its endpoint itself only when FastAPI would resolve nothing else: a
    # dependency added where its router is included must still run (here it refuses).
    def refuse() -> None:
        raise HTTPException(status_code=418)

    app = create_app(make_settings(database_url))
    outer = APIRouter(dependencies=[Depends(refuse)])
    outer.include_router(_probe_router())
    app.include_router(outer)
    with TestClient(app):
        client = client_for(app, create_key(app, tenant))
        refused = client.post(PROBE.format(project="p") + "/without-request")
        assert refused.status_code == 418, refused.text
