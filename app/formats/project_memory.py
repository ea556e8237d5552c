"""Context Agent project memory (seed 004): the four files of ``.autonomous/context/``.

``running-summary.json`` is an object; ``key-decisions.json``, ``failure-memory.json`` and
``active-constraints.json`` are arrays of objects. The seed writes camelCase keys
(``featureId``); the reference Python writer writes the same files in snake_case
(``feature_id``). ``parse_*`` read either and say which style they found; ``render`` writes a
document in a chosen style, renaming only the documented keys, in place, so that key order and
unknown fields survive. Both writers use ``json.dumps(doc, indent=2)``.

Validation refuses, never repairs: a documented field of the wrong type is a fault, and every
fault is reported with a JSON Pointer.
"""

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, overload

from app.formats import jsondoc
from app.formats.errors import Faults, InvalidDocument


class Style(StrEnum):
    camel = "camel"
    snake = "snake"


class ItemKind(StrEnum):
    decision = "decision"
    failure = "failure"
    constraint = "constraint"


# The keys the two writers spell differently; every other documented key is one word.
CAMEL_TO_SNAKE = {
    "featureId": "feature_id",
    "rootCause": "root_cause",
    "affectedAreas": "affected_areas",
    "addedAt": "added_at",
    "expiresAt": "expires_at",
    "tokenCount": "token_count",
    "updatedAt": "updated_at",
    "featuresSinceLastUpdate": "features_since_last_update",
    "totalFeaturesCompleted": "total_features_completed",
}
SNAKE_TO_CAMEL = {snake: camel for camel, snake in CAMEL_TO_SNAKE.items()}
_RENAMES = {Style.camel: SNAKE_TO_CAMEL, Style.snake: CAMEL_TO_SNAKE}

# Field types: "text" a string, "label" a short string that is an indexed column,
# "integer" an integer of any size (Python's int), "texts" an array of strings; "?" allows null.
SUMMARY_FIELDS = {
    "content": "text",
    "tokenCount": "integer",
    "updatedAt": "integer",
    "trigger": "text",
    "featuresSinceLastUpdate": "integer",
    "totalFeaturesCompleted": "integer",
}
# An item is stored compact and its file written with two-space indents, which add two spaces
# a level to every line: an empty array 250 levels down, 3 bytes stored, is 500 written, and
# 40 items of 20 kB so nested made a file of 206 MB (a hostile client, 2026-11-27). The
# seed's items nest two levels.
MAX_ITEM_DEPTH = 16
# The most a list file's written bytes can be for each byte its items hold stored: at the
# deepest an item may nest, an element of two bytes (``0,``) is written on a line of its own
# after 2 * (MAX_ITEM_DEPTH + 1) spaces of indent, 37 bytes; a string's escapes only shrink.
MOST_WRITTEN_PER_STORED_BYTE = 2 * (MAX_ITEM_DEPTH + 1) + 3

ITEM_FIELDS: dict[ItemKind, dict[str, str]] = {
    ItemKind.decision: {
        "id": "label",
        "featureId": "label?",
        "decision": "text",
        "rationale": "text",
        "impact": "texts",
        "timestamp": "integer",
        "category": "label",
    },
    ItemKind.failure: {
        "id": "label",
        "featureId": "label?",
        "description": "text",
        "rootCause": "text",
        "resolution": "text?",
        "prevention": "text",
        "timestamp": "integer",
        "severity": "label",
    },
    ItemKind.constraint: {
        "id": "label",
        "description": "text",
        "reason": "text",
        "affectedAreas": "texts",
        "addedAt": "integer",
        "expiresAt": "integer?",
        "type": "label",
    },
}
# What an item cannot be without: its id and the sentence that says what it is.
ITEM_REQUIRED = {
    ItemKind.decision: ("id", "decision"),
    ItemKind.failure: ("id", "description"),
    ItemKind.constraint: ("id", "description"),
}
SUMMARY_REQUIRED = ("content",)
# When the item happened: the newest-first order and the `since` filter use it.
ITEM_TIME_FIELD = {
    ItemKind.decision: "timestamp",
    ItemKind.failure: "timestamp",
    ItemKind.constraint: "addedAt",
}
# The item's kind of thing, an indexed column: a decision's category, a constraint's type.
ITEM_CATEGORY_FIELD = {ItemKind.decision: "category", ItemKind.constraint: "type"}
# Labels are indexed columns: bounded so that a B-tree entry always fits.
MAX_LABEL_CHARS = 256

_EXPECTED = {
    "text": "a string",
    "label": f"a string of 1 to {MAX_LABEL_CHARS} characters",
    "integer": "an integer",
    "texts": "an array of strings",
}


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@overload
def column_integer(value: int) -> int: ...
@overload
def column_integer(value: None) -> None: ...
def column_integer(value: int | None) -> int | None:
    """A document's integer as a BIGINT column holds it: clamped to 64 bits, so that order
    and comparisons (newest first, expiry, features since) still hold; the file keeps the
    value as written."""
    if value is None:
        return None
    return min(max(value, jsondoc.INT64_MIN), jsondoc.INT64_MAX)


def _valid(kind: str, value: Any) -> bool:
    if kind.endswith("?"):
        return value is None or _valid(kind[:-1], value)
    match kind:
        case "text":
            return isinstance(value, str)
        case "label":
            return (
                isinstance(value, str)
                and 0 < len(value) <= MAX_LABEL_CHARS
                and jsondoc.is_storable(value)
            )
        case "integer":
            return _is_integer(value)
        case "texts":
            return isinstance(value, list) and all(isinstance(v, str) for v in value)
    raise AssertionError(kind)


def _style_of_key(key: str) -> Style | None:
    if key in CAMEL_TO_SNAKE:
        return Style.camel
    if key in SNAKE_TO_CAMEL:
        return Style.snake
    return None


def detect_style(document: dict[str, Any] | list[dict[str, Any]]) -> Style | None:
    """The style an object's (or an array of objects') keys are written in; None when no key
    tells. Mixed styles are refused: such a file could not be written back as it came."""
    placed: list[tuple[tuple[int, ...], dict[str, Any]]] = (
        [((index,), obj) for index, obj in enumerate(document)]
        if isinstance(document, list)
        else [((), document)]
    )
    seen: dict[Style, str] = {}
    for where, obj in placed:
        for key in obj:
            style = _style_of_key(key)
            if style is not None:
                seen.setdefault(style, jsondoc.pointer(*where, key))
    if len(seen) > 1:
        raise InvalidDocument(
            "The document mixes camelCase and snake_case keys.",
            [(seen[Style.snake], "snake_case key in a document that also has camelCase keys")],
        )
    return next(iter(seen), None)


def field(obj: dict[str, Any], camel_name: str) -> Any:
    """A documented field's value in either style (None when absent)."""
    if camel_name in obj:
        return obj[camel_name]
    return obj.get(CAMEL_TO_SNAKE.get(camel_name, camel_name))


def key_in(obj: dict[str, Any], camel_name: str) -> str | None:
    """The key under which ``obj`` holds a documented field, in whichever style."""
    for key in (camel_name, CAMEL_TO_SNAKE.get(camel_name)):
        if key is not None and key in obj:
            return key
    return None


def key_for(camel_name: str, style: Style) -> str:
    """How ``style`` spells a documented key."""
    return CAMEL_TO_SNAKE.get(camel_name, camel_name) if style is Style.snake else camel_name


def in_style(obj: dict[str, Any], style: Style) -> dict[str, Any]:
    """``obj`` with its documented keys spelt in ``style``, everything else as it was."""
    renames = _RENAMES[style]
    return {renames.get(key, key): value for key, value in obj.items()}


def check_fields(
    obj: dict[str, Any],
    fields: dict[str, str],
    required: tuple[str, ...],
    at: tuple[str | int, ...],
) -> list[tuple[str, str]]:
    """Every fault of ``obj`` against its documented fields, as (pointer, message)."""
    faults: list[tuple[str, str]] = []
    for name, kind in fields.items():
        key = key_in(obj, name)
        if key is None:
            if name in required:
                faults.append((jsondoc.pointer(*at, name), "required"))
            continue
        if not _valid(kind, obj[key]):
            nullable = " or null" if kind.endswith("?") else ""
            expected = _EXPECTED[kind.rstrip("?")]
            faults.append((jsondoc.pointer(*at, key), f"must be {expected}{nullable}"))
    return faults


def _raise_if(faults: list[tuple[str, str]], what: str) -> None:
    if faults:
        raise InvalidDocument(f"The {what} does not follow seed 004's format.", faults)


def check_item(obj: Any, kind: ItemKind, at: tuple[str | int, ...] = ()) -> list[tuple[str, str]]:
    if not isinstance(obj, dict):
        return [(jsondoc.pointer(*at), "must be an object")]
    if jsondoc.nesting(obj) > MAX_ITEM_DEPTH:
        return [(jsondoc.pointer(*at), f"nests more than {MAX_ITEM_DEPTH} levels deep")]
    return check_fields(obj, ITEM_FIELDS[kind], ITEM_REQUIRED[kind], at)


def parse_summary(raw: bytes) -> tuple[dict[str, Any], Style | None]:
    document = jsondoc.load(raw)
    if not isinstance(document, dict):
        raise InvalidDocument("running-summary.json is a JSON object.", [("", "not an object")])
    style = detect_style(document)
    _raise_if(check_fields(document, SUMMARY_FIELDS, SUMMARY_REQUIRED, ()), "running summary")
    return document, style


def parse_items(
    raw: bytes, kind: ItemKind, most_items: int
) -> tuple[list[dict[str, Any]], Style | None]:
    """An array of at most ``most_items`` items of ``kind``: each valid, ids unique."""
    document = jsondoc.load(raw)
    if not isinstance(document, list):
        raise InvalidDocument("A project memory list file is a JSON array.", [("", "not an array")])
    if len(document) > most_items:
        raise InvalidDocument(
            f"A project memory list file holds at most {most_items} items.",
            [("", f"{len(document)} items")],
        )
    faults = Faults()
    first_index: dict[str, int] = {}
    for index, item in enumerate(document):
        item_faults = check_item(item, kind, (index,))
        faults.extend(item_faults)
        if item_faults:
            continue
        if item["id"] in first_index:
            faults.append(
                (jsondoc.pointer(index, "id"), f"duplicates item {first_index[item['id']]}")
            )
        first_index.setdefault(item["id"], index)
    _raise_if(faults, f"{kind.value} list")
    return document, detect_style(document)


def render(document: dict[str, Any] | list[dict[str, Any]], style: Style) -> bytes:
    """The file as the tools write it, ``json.dumps(doc, indent=2)``, in ``style``."""
    if isinstance(document, list):
        return jsondoc.dumps_indent2([in_style(item, style) for item in document])
    return jsondoc.dumps_indent2(in_style(document, style))


@dataclass(frozen=True)
class ItemColumns:
    """What the store indexes and filters on, read from a valid item."""

    item_id: str
    feature_id: str | None
    category: str | None
    severity: str | None
    timestamp: int
    expires_at: int | None
    resolved: bool
    search_text: str


def _strings(value: Any) -> list[str]:
    """Every string inside ``value``, in document order (keys excepted)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    return []


def item_columns(item: dict[str, Any], kind: ItemKind) -> ItemColumns:
    timestamp = field(item, ITEM_TIME_FIELD[kind])
    resolution = field(item, "resolution") if kind is ItemKind.failure else None
    return ItemColumns(
        item_id=item["id"],
        feature_id=field(item, "featureId") if kind is not ItemKind.constraint else None,
        category=field(item, ITEM_CATEGORY_FIELD[kind]) if kind in ITEM_CATEGORY_FIELD else None,
        severity=field(item, "severity") if kind is ItemKind.failure else None,
        # An item without its time sorts as the oldest; its document is not touched.
        timestamp=column_integer(timestamp) if timestamp is not None else 0,
        expires_at=column_integer(field(item, "expiresAt"))
        if kind is ItemKind.constraint
        else None,
        resolved=isinstance(resolution, str) and bool(resolution.strip()),
        search_text="\n".join(_strings(item)),
    )
