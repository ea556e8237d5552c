"""A request of many wrong or noted entries costs what a hundred do, on every route that takes a
body: its faults are listed up to ``MAX_LISTED`` (and the check stops there, said by
``errors_truncated``), a list in a request holds at most ``MAX_LIST_ITEMS`` entries, and an
answer's listings of what was filled in, noted or redacted are cut alike. Before, 300 kB of
empty raw traces cost 8.4 s of the server's CPU, 500 MB and a 31 MB answer (2026-11-27): one
client's requests held the interpreter for every tenant's.

What is checked here is the answer (its size, its lists), which grows with the work a route
does for each entry; the work itself is measured in the closing notes, never timed in a test.
"""

import json
from typing import Any

import pytest
from fastapi import routing
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError

from app.core.constraints import MAX_LIST_ITEMS
from app.formats.errors import MAX_LISTED
from app.main import create_app
from tests.conftest import make_settings
from tests.helpers import assert_problem
from tests.platform.world import WRITES, P, populate, send

# Entries in each flooded array or map: enough for thousands of faults on any route.
ENTRIES = 20_000
# An answer listing MAX_LISTED faults, or a receipt listing as many notes, with room to spare;
# each flooded request's answer listed every entry's fault or note before, 1-30 MB.
MOST_ANSWER_BYTES = 64 * 1024


def _flooded(document: Any) -> Any:
    """``document`` with each array in it made of ``ENTRIES`` wrong entries (empty objects
    where it held objects, else zeros) and each map of objects (members all objects) of
    ``ENTRIES`` members that are zeros."""
    if isinstance(document, list):
        return [{} if any(isinstance(item, dict) for item in document) else 0] * ENTRIES
    if isinstance(document, dict):
        if len(document) > 1 and all(isinstance(value, dict) for value in document.values()):
            return {f"k{index}": 0 for index in range(ENTRIES)}
        return {key: _flooded(value) for key, value in document.items()}
    return document


def _json(route: tuple[str, str], body: Any) -> dict[str, Any]:
    return {"content": json.dumps(body).encode(), "headers": WRITES[route]["headers"]}


def _floods() -> list[tuple[tuple[str, str], str, dict[str, Any]]]:
    floods = []
    for route, request in sorted(WRITES.items()):
        headers = request.get("headers", {})
        if headers.get("Content-Type") != "application/json":
            continue
        flooded = _flooded(json.loads(request["content"]))
        if flooded != json.loads(request["content"]):
            floods.append((route, "every array and map", _json(route, flooded)))
    handover = ("POST", P + "/features/{feature}/handovers")
    note = json.loads(WRITES[handover]["content"])
    floods.append(
        (handover, "critical points", _json(handover, note | {"critical_points": [0] * ENTRIES}))
    )
    save = ("POST", P + "/saves")
    document = json.loads(WRITES[save]["content"])
    statuses = {f"phase-{index}": "bogus" for index in range(ENTRIES)}
    floods.append(
        (save, "phase statuses", _json(save, document | {"phases": {"status": statuses}}))
    )
    secrets = {f"k{index}": "password=hunter2hunter2" for index in range(ENTRIES)}
    floods.append((save, "secrets", _json(save, document | {"metadata": secrets})))
    load = ("POST", P + "/runs/{run}/state:load")
    beads = {f"bead-{index}": {} for index in range(ENTRIES)}
    floods.append(
        (
            load,
            "history entries Go would zero",
            {
                "content": json.dumps({"version": 2, "history": beads}).encode(),
                "headers": {"Content-Type": "application/octet-stream"},
            },
        )
    )
    appended = ("POST", P + "/agents/{agent}/memory/{memory}")
    floods.append(
        (
            appended,
            "NDJSON lines",
            {
                "content": b"\n".join([b"{}"] * ENTRIES),
                "headers": {"Content-Type": "application/x-ndjson"},
            },
        )
    )
    return floods


FLOODS = _floods()


@pytest.fixture
def world(client, project):
    return populate(client, project)


@pytest.mark.parametrize(
    ("route", "flood", "request_"), FLOODS, ids=[f"{r[0]} {r[1]}: {f}" for r, f, _ in FLOODS]
)
def test_an_answer_to_a_flood_of_wrong_entries_lists_the_first(
    client, world, route, flood, request_
):
    response = send(client, world, route, **request_)
    assert len(response.content) <= MOST_ANSWER_BYTES, (response.status_code, response.text[:500])
    if response.is_success:
        return
    body = assert_problem(response, response.status_code)
    errors = body.get("errors", [])
    assert len(errors) <= MAX_LISTED
    if len(errors) == MAX_LISTED:
        assert body["errors_truncated"] is True, response.text[:500]


def test_a_list_in_a_request_holds_at_most_its_limit(client, world):
    handover = ("POST", P + "/features/{feature}/handovers")
    note = json.loads(WRITES[handover]["content"])
    over = send(
        client,
        world,
        handover,
        **_json(handover, note | {"critical_points": ["x"] * (MAX_LIST_ITEMS + 1)}),
    )
    body = assert_problem(over, 422)
    assert [error["path"] for error in body["errors"]] == ["/critical_points"]
    at = send(
        client,
        world,
        handover,
        **_json(handover, note | {"critical_points": ["x"] * MAX_LIST_ITEMS}),
    )
    assert at.status_code == 201, at.text[:500]


def _unknown_fields(body: dict[str, Any]) -> dict[str, Any]:
    return body | {f"unknown-{index}": 0 for index in range(ENTRIES)}


UNKNOWN = [
    (route, request)
    for route, request in sorted(WRITES.items())
    if request.get("headers", {}).get("Content-Type") == "application/json"
    and isinstance(json.loads(request["content"]), dict)
]


@pytest.mark.parametrize(("route", "request_"), UNKNOWN, ids=[" ".join(r) for r, _ in UNKNOWN])
def test_a_flood_of_unknown_fields_is_answered_with_the_first(client, world, route, request_):
    flooded = _unknown_fields(json.loads(request_["content"]))
    response = send(client, world, route, **_json(route, flooded))
    assert response.status_code < 500, response.text[:500]
    if response.status_code != 422:  # a document keeps what it does not know (and is answered)
        return
    assert len(response.content) <= MOST_ANSWER_BYTES, response.text[:500]
    body = assert_problem(response, 422)
    assert len(body["errors"]) == MAX_LISTED, response.text[:500]
    assert body["errors_truncated"] is True


def _closed_bodies() -> list[type[BaseModel]]:
    """Every request body model of the app's routes that refuses fields it does not name."""
    app = create_app(make_settings("sqlite://"))
    models = {
        field.field_info.annotation
        for context in routing.iter_route_contexts(app.routes)
        if isinstance(context.original_route, APIRoute)
        for field in context.original_route.dependant.body_params
    }
    return sorted(
        (
            model
            for model in models
            if isinstance(model, type)
            and issubclass(model, BaseModel)
            and model.model_config.get("extra") == "forbid"
        ),
        key=lambda model: model.__name__,
    )


@pytest.mark.parametrize("model", _closed_bodies(), ids=lambda model: model.__name__)
def test_validation_stops_listing_unknown_fields_past_the_limit(model):
    """Pydantic builds an error for every unknown field before the problem keeps the first
    hundred (a 4 MiB body of them cost a handover POST 4 s of the server's CPU, 2026-11-27):
    a model sees only the first ``MAX_LISTED`` + 1 of them, enough to say the list is cut."""
    with pytest.raises(ValidationError) as refused:
        model.model_validate({f"unknown-{index}": 0 for index in range(ENTRIES)})
    assert MAX_LISTED < refused.value.error_count() <= MAX_LISTED + len(model.model_fields) + 1
