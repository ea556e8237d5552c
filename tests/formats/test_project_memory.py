"""The project memory codec (seed 004), without a database."""

import pytest

from app.core.constraints import MAX_LIST_ITEMS
from app.formats import project_memory as codec
from app.formats.errors import InvalidDocument, MalformedDocument
from app.formats.project_memory import ItemKind, Style
from tests.helpers import golden_bytes, python_indent2

LIST_FILES = {
    "key-decisions": ItemKind.decision,
    "failure-memory": ItemKind.failure,
    "active-constraints": ItemKind.constraint,
}


@pytest.mark.parametrize("name", LIST_FILES)
@pytest.mark.parametrize("style", list(Style))
def test_list_golden_files_round_trip_in_their_style(name, style):
    suffix = ".snake" if style is Style.snake else ""
    raw = golden_bytes(f"memory-{name}{suffix}.json")
    items, detected = codec.parse_items(raw, LIST_FILES[name], MAX_LIST_ITEMS)
    assert detected is style
    assert codec.render(items, style) == raw


@pytest.mark.parametrize("name", LIST_FILES)
def test_a_list_file_converts_between_styles(name):
    items, _ = codec.parse_items(
        golden_bytes(f"memory-{name}.json"), LIST_FILES[name], MAX_LIST_ITEMS
    )
    assert codec.render(items, Style.snake) == golden_bytes(f"memory-{name}.snake.json")


def test_the_summary_round_trips_and_converts():
    camel = golden_bytes("memory-running-summary.json")
    snake = golden_bytes("memory-running-summary.snake.json")
    document, style = codec.parse_summary(snake)
    assert style is Style.snake
    assert codec.render(document, Style.snake) == snake
    assert codec.render(document, Style.camel) == camel


def test_unknown_fields_keep_their_place_and_non_ascii_is_escaped():
    item = {"id": "dec-1", "x_extra": {"ünï": [1, 2.5]}, "feature_id": "f", "decision": "é 😀"}
    items, style = codec.parse_items(python_indent2([item]), ItemKind.decision, MAX_LIST_ITEMS)
    assert style is Style.snake
    assert codec.render(items, Style.snake) == python_indent2([item])
    camel = {"id": "dec-1", "x_extra": {"ünï": [1, 2.5]}, "featureId": "f", "decision": "é 😀"}
    rendered = codec.render(items, Style.camel)
    assert rendered == python_indent2([camel])
    assert b"\\u00e9 \\ud83d\\ude00" in rendered


def test_a_file_that_mixes_styles_is_refused():
    items = [
        {"id": "a", "featureId": "f", "decision": "x"},
        {"id": "b", "feature_id": "f", "decision": "y"},
    ]
    with pytest.raises(InvalidDocument) as raised:
        codec.parse_items(python_indent2(items), ItemKind.decision, MAX_LIST_ITEMS)
    assert raised.value.errors[0][0] == "/1/feature_id"


@pytest.mark.parametrize(
    ("item", "pointer"),
    [
        ({"decision": "no id"}, "/0/id"),
        ({"id": "d"}, "/0/decision"),
        ({"id": 7, "decision": "x"}, "/0/id"),
        ({"id": "d", "decision": "x", "timestamp": 1.5}, "/0/timestamp"),
        ({"id": "d", "decision": "x", "timestamp": float("nan")}, "/0/timestamp"),
        ({"id": "d", "decision": "x", "timestamp": True}, "/0/timestamp"),
        ({"id": "d", "decision": "x", "impact": ["a", 1]}, "/0/impact"),
        ({"id": "d", "decision": "x", "category": "c" * 257}, "/0/category"),
        ({"id": "d", "decision": "x", "featureId": "a\u0000b"}, "/0/featureId"),
        ({"id": "d\ud800", "decision": "x"}, "/0/id"),
    ],
)
def test_invalid_items_name_each_fault(item, pointer):
    with pytest.raises(InvalidDocument) as raised:
        codec.parse_items(python_indent2([item]), ItemKind.decision, MAX_LIST_ITEMS)
    assert pointer in [path for path, _ in raised.value.errors]


def test_a_summary_that_mixes_styles_points_at_the_key():
    with pytest.raises(InvalidDocument) as raised:
        codec.parse_summary(b'{"content": "x", "tokenCount": 1, "updated_at": 2}')
    assert raised.value.errors[0][0] == "/updated_at"


def test_duplicate_ids_are_refused():
    items = [{"id": "d", "decision": "x"}, {"id": "d", "decision": "y"}]
    with pytest.raises(InvalidDocument) as raised:
        codec.parse_items(python_indent2(items), ItemKind.decision, MAX_LIST_ITEMS)
    assert raised.value.errors == [("/1/id", "duplicates item 0")]


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        (b"{}", InvalidDocument),
        (b"[1]", InvalidDocument),
        (b"[", MalformedDocument),
        (b"[NaN]", InvalidDocument),
        (b"[1e999]", MalformedDocument),
    ],
)
def test_list_files_must_be_arrays_of_objects(raw, error):
    with pytest.raises(error):
        codec.parse_items(raw, ItemKind.failure, MAX_LIST_ITEMS)


def test_expires_at_may_be_null_and_resolution_may_be_null():
    constraint = {"id": "c", "description": "d", "expiresAt": None}
    failure = {"id": "f", "description": "d", "resolution": None}
    assert codec.parse_items(python_indent2([constraint]), ItemKind.constraint, MAX_LIST_ITEMS)[0]
    assert codec.parse_items(python_indent2([failure]), ItemKind.failure, MAX_LIST_ITEMS)[0]


def test_item_columns_read_either_style():
    snake = {"id": "c", "description": "Node 18", "added_at": 5, "expires_at": 9, "type": "t"}
    columns = codec.item_columns(snake, ItemKind.constraint)
    assert (columns.timestamp, columns.expires_at, columns.category) == (5, 9, "t")
    assert "Node 18" in columns.search_text
    failure = {"id": "f", "description": "d", "resolution": "fixed", "severity": "high"}
    columns = codec.item_columns(failure, ItemKind.failure)
    assert columns.resolved and columns.severity == "high" and columns.timestamp == 0
