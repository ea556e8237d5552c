"""autobyteus agent memory (seed 001): ``raw_traces.jsonl``, ``episodic.jsonl``, ``semantic.jsonl``
and ``raw_traces_archive.jsonl``.

One item a line, as autobyteus 1.4's ``FileMemoryStore`` appends them:
``json.dumps(item.to_dict()) + "\\n"``. The fields are those of its ``RawTraceItem``,
``EpisodicItem`` and ``SemanticItem``: the ones ``to_dict`` always writes are required, the
ones it writes only when set are optional (null is taken as unset, as ``from_dict`` does).
Unknown fields are kept where they are. The archive holds the raw traces that
``FileMemoryStore.prune_raw_traces`` took out of ``raw_traces.jsonl`` after a compaction, each
line written again as ``json.dumps`` of the dict read from it: its items are raw traces.
"""

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from app.formats import jsondoc
from app.formats.errors import Faults, InvalidDocument, MalformedDocument
from app.formats.working_context_snapshot import is_integer, is_number

NDJSON_MEDIA_TYPE = "application/x-ndjson"


class MemoryKind(StrEnum):
    raw_trace = "raw_trace"
    episodic = "episodic"
    semantic = "semantic"
    # Raw traces pruned from raw_traces.jsonl: no longer part of the recent turns.
    archived_trace = "archived_trace"


FILENAMES = {
    MemoryKind.raw_trace: "raw_traces.jsonl",
    MemoryKind.episodic: "episodic.jsonl",
    MemoryKind.semantic: "semantic.jsonl",
    MemoryKind.archived_trace: "raw_traces_archive.jsonl",
}


def _string_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _media(value: Any) -> bool:
    return isinstance(value, dict) and all(_string_list(urls) for urls in value.values())


@dataclass(frozen=True)
class FieldRule:
    check: Callable[[Any], bool]
    expected: str
    required: bool = True


STRING = FieldRule(lambda v: isinstance(v, str), "a string")
NUMBER = FieldRule(is_number, "a number")
# seq orders a turn's traces; of any size, as Python's int (no column holds it).
SEQ = FieldRule(is_integer, "an integer")
STRINGS = FieldRule(_string_list, "an array of strings")


def _optional(rule: FieldRule) -> FieldRule:
    return FieldRule(lambda v: v is None or rule.check(v), rule.expected + " or null", False)


RAW_TRACE_RULES = {
    "id": STRING,
    "ts": NUMBER,
    "turn_id": STRING,
    "seq": SEQ,
    "trace_type": STRING,
    "content": STRING,
    "source_event": STRING,
    "media": _optional(FieldRule(_media, "an object of arrays of strings")),
    "tool_name": _optional(STRING),
    "tool_call_id": _optional(STRING),
    "tool_args": _optional(FieldRule(lambda v: isinstance(v, dict), "an object")),
    "tool_error": _optional(STRING),
    "correlation_id": _optional(STRING),
    "tags": _optional(STRINGS),
    "tool_result_ref": _optional(STRING),
}
RULES: dict[MemoryKind, dict[str, FieldRule]] = {
    MemoryKind.raw_trace: RAW_TRACE_RULES,
    MemoryKind.archived_trace: RAW_TRACE_RULES,
    MemoryKind.episodic: {
        "id": STRING,
        "ts": NUMBER,
        "turn_ids": STRINGS,
        "summary": STRING,
        "salience": NUMBER,
        "tags": _optional(STRINGS),
    },
    MemoryKind.semantic: {
        "id": STRING,
        "ts": NUMBER,
        "fact": STRING,
        "confidence": NUMBER,
        "salience": NUMBER,
        "tags": _optional(STRINGS),
    },
}


def item_faults(kind: MemoryKind, item: Any, *path: str | int) -> list[tuple[str, str]]:
    if not isinstance(item, dict):
        return [(jsondoc.pointer(*path), "a memory item is a JSON object")]
    faults = []
    for name, rule in RULES[kind].items():
        where = jsondoc.pointer(*path, name)
        if name not in item:
            if rule.required:
                faults.append((where, "missing"))
        elif not rule.check(item[name]):
            faults.append((where, f"must be {rule.expected}"))
    return faults


def _ndjson_items(raw: bytes) -> list[Any]:
    """Every non-blank line (blank ones are skipped, as FileMemoryStore.list does)."""
    items = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            items.append(jsondoc.load(line))
        except MalformedDocument as exc:
            raise MalformedDocument(f"Line {number}: {exc.message}") from exc
    return items


def parse(raw: bytes, media_type: str | None, kind: MemoryKind) -> list[dict[str, Any]]:
    """The items of an append body: one JSON object, a JSON array of them, or NDJSON.

    Fault paths are JSON Pointers into the array, or the item's index among the NDJSON
    body's non-blank lines."""
    if media_type == NDJSON_MEDIA_TYPE:
        items = _ndjson_items(raw)
        prefix: tuple[str | int, ...] | None = None
    else:
        document = jsondoc.load(raw)
        items = document if isinstance(document, list) else [document]
        prefix = None if isinstance(document, list) else ()
    if not items:
        raise InvalidDocument("There is nothing to append.", [("", "no items")])
    faults = Faults()
    for index, item in enumerate(items):
        faults.extend(item_faults(kind, item, *((index,) if prefix is None else prefix)))
    if faults:
        raise InvalidDocument(f"The {kind.value} items are not valid.", faults)
    return items


def _turn_id(line: bytes) -> Any:
    return json.loads(line)["turn_id"]


def pruned_turns(stored: list[bytes], lines: list[bytes]) -> set[str] | None:
    """The turns whose traces ``lines`` (a raw_traces.jsonl) no longer holds, when it is the
    ``stored`` raw traces without every trace of those turns, then lines appended since: what
    ``FileMemoryStore.prune_raw_traces`` leaves after a compaction. None when it is not."""
    present = set(lines)
    pruned = {_turn_id(line) for line in stored if line not in present}
    kept = [line for line in stored if _turn_id(line) not in pruned]
    if not pruned or lines[: len(kept)] != kept:
        return None
    return pruned


def render_line(item: dict[str, Any]) -> bytes:
    """One line as the store writes it, without its newline: ``json.dumps(record)``."""
    return json.dumps(item).encode("ascii")


def render_file(lines: Iterable[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)
