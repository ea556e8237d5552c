"""The served OpenAPI document declares what the routes enforce, so that a client (and
schemathesis's valid-request generation) knows what it must send: a request the document
allows is not refused for a format the document never stated."""

import re
from datetime import UTC, datetime

from fastapi import FastAPI

from app.archive.service import MEMBER_LIST, MEMBER_TYPES
from app.core.constraints import IDENTIFIER_PATTERN, MAX_LIMIT
from app.core.pagination import encode_cursor, encode_position
from app.saves.models import Save
from app.saves.repository import NEWEST_FIRST


def _parameters(app: FastAPI) -> list[tuple[str, dict]]:
    document = app.openapi()
    return [
        (f"{method.upper()} {path}", parameter)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        for parameter in operation.get("parameters", [])
    ]


def _schema(parameter: dict) -> dict:
    schema = parameter["schema"]
    # Optional query parameters are `anyOf: [{...}, {"type": "null"}]`.
    return next((s for s in schema.get("anyOf", []) if s.get("type") != "null"), schema)


def test_every_cursor_declares_its_alphabet_and_length(app: FastAPI):
    cursors = [(op, _schema(p)) for op, p in _parameters(app) if p["name"] == "cursor"]
    assert cursors
    seal = app.state.database.cursors
    latest = Save(timestamp=datetime.max.replace(tzinfo=UTC), number=2**63 - 1)
    # The longest a cursor gets: an archive member's, its path holding a name of 128
    # characters (the rest are fixed-width, 43 characters for two sort keys).
    longest_path = f"memory/agents/{'a' * 128}/raw_traces_archive.jsonl"
    handed_out = [
        encode_cursor(seal, NEWEST_FIRST, (2**63 - 1,), latest),
        encode_position(seal, MEMBER_LIST, ("t", "p" * 128), MEMBER_TYPES, [longest_path]),
    ]
    for operation, schema in cursors:
        assert schema.get("minLength") == 1, operation
        assert schema.get("maxLength") == 1024, operation
        for cursor in handed_out:
            assert re.fullmatch(schema["pattern"], cursor), operation
            assert len(cursor) <= schema["maxLength"], operation
        assert not re.fullmatch(schema["pattern"], "a=b"), operation


def test_every_limit_and_search_is_bounded(app: FastAPI):
    for operation, parameter in _parameters(app):
        schema = _schema(parameter)
        if parameter["name"] == "limit":
            assert (schema.get("minimum"), schema.get("maximum")) == (1, MAX_LIMIT), operation
        if parameter["name"] == "q":
            assert (schema.get("minLength"), schema.get("maxLength")) == (1, 1000), operation


def test_every_name_in_a_path_declares_its_pattern(app: FastAPI):
    for operation, parameter in _parameters(app):
        if parameter["in"] != "path":
            continue
        schema = _schema(parameter)
        if schema.get("type") == "integer":
            assert schema.get("minimum") == 1, operation
        else:
            # A `$ref` names an enum (the memory file kinds).
            declared = ("pattern", "enum", "maxLength", "$ref")
            assert any(schema.get(key) for key in declared), (
                operation,
                parameter["name"],
            )
    names = [_schema(p) for _, p in _parameters(app) if p["name"] == "project"]
    assert names and all(s["pattern"] == IDENTIFIER_PATTERN for s in names)


def test_request_bodies_declare_their_required_fields(app: FastAPI):
    paths = app.openapi()["paths"]
    base = "/v1/projects/{project}/memory"
    for plural, sentence in (
        ("decisions", "decision"),
        ("failures", "description"),
        ("constraints", "description"),
    ):
        body = paths[f"{base}/{plural}"]["post"]["requestBody"]["content"]["application/json"]
        assert body["schema"]["required"] == [sentence], plural
    summary = paths[f"{base}/running-summary"]["put"]["requestBody"]["content"]
    assert summary["application/json"]["schema"]["required"] == ["content"]
