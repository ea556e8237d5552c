"""MDAN-AUTO context saves (seed 000): ``mdan-save-<unix seconds>.json``.

``parse`` checks every documented field: a missing or invalid one gets a warning and the
documented default, in place (a missing key goes at the end of its object, as a writer adding
it would put it). Unknown fields are kept where they are. ``render`` is the reference writer,
``json.dump(state, f, indent=2)``. What that writer writes is valid: integers of any size,
NaN and the infinities (``json.dump``'s defaults) are numbers, kept as written; only the
listing's columns, which cannot hold them, show null (``summarize`` says which).
"""

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from app.formats import jsondoc
from app.formats.errors import InvalidDocument, Notes, quoted
from app.formats.timestamps import parse_iso8601

VERSION = "1.0"
PHASE_STATUSES = ("pending", "in_progress", "complete", "failed")
DEFAULT_TOKEN_LIMIT = 128000


@dataclass(frozen=True)
class FieldWarning:
    path: str
    message: str


Default = Callable[[dict[str, Any], datetime], Any]


@dataclass(frozen=True)
class Spec:
    """One documented field: its JSON type, its default, and its documented children."""

    kind: str
    default: Default
    children: dict[str, "Spec"] = field(default_factory=dict)
    allowed: tuple[str, ...] = ()


def _const(value: Any) -> Default:
    # A fresh copy each time: a shared [] or {} default must never be aliased.
    return lambda _doc, _now: _fresh_copy(value)


def _fresh_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _fresh_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fresh_copy(v) for v in value]
    return value


def _now_text(_doc: dict[str, Any], now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _save_timestamp(doc: dict[str, Any], now: datetime) -> str:
    value = doc.get("timestamp")
    return value if isinstance(value, str) else _now_text(doc, now)


def _token_percentage(doc: dict[str, Any], _now: datetime) -> float:
    usage = (doc.get("context") or {}).get("token_usage") or {}
    total, limit = usage.get("total"), usage.get("limit")
    if _is_number(total) and _is_number(limit) and limit:
        try:
            percentage: float = round(total / limit, 4)
        except OverflowError:  # integers whose quotient no float holds
            return 0.0
        if math.isfinite(percentage):
            return percentage
    return 0.0


def _string(default: Default) -> Spec:
    return Spec("string", default)


SCHEMA = Spec(
    "object",
    _const({}),
    {
        "version": _string(_const(VERSION)),
        "mode": _string(_const("auto")),
        "timestamp": Spec("timestamp", _now_text),
        "project": Spec(
            "object",
            _const({}),
            {
                "name": _string(_const("")),
                "description": _string(_const("")),
                "tech_stack": Spec("object", _const({})),
            },
        ),
        "phases": Spec(
            "object",
            _const({}),
            {
                "current": _string(_const("")),
                "completed": Spec("array", _const([])),
                "status": Spec("phase_statuses", _const({}), allowed=PHASE_STATUSES),
            },
        ),
        "context": Spec(
            "object",
            _const({}),
            {
                "token_usage": Spec(
                    "object",
                    _const({}),
                    {
                        "total": Spec("number", _const(0)),
                        "limit": Spec("number", _const(DEFAULT_TOKEN_LIMIT)),
                        "percentage": Spec("number", _token_percentage),
                    },
                ),
                "conversation_history": Spec("array", _const([])),
                "artifacts": Spec("object", _const({})),
                "decisions": Spec("array", _const([])),
            },
        ),
        "debates": Spec("array", _const([])),
        "errors": Spec("array", _const([])),
        "quality_gates": Spec("object", _const({})),
        "configuration": Spec(
            "object",
            _const({}),
            {
                "token_limit": Spec("number", _const(DEFAULT_TOKEN_LIMIT)),
                "save_threshold": Spec("number", _const(0.8)),
                "output_dir": _string(_const("./mdan-auto-output")),
                "log_level": _string(_const("INFO")),
                "fail_fast": Spec("boolean", _const(True)),
                "debate_enabled": Spec("boolean", _const(True)),
            },
        ),
        "metadata": Spec(
            "object",
            _const({}),
            {
                "created_at": Spec("timestamp", _save_timestamp),
                "updated_at": Spec("timestamp", _save_timestamp),
                "save_count": Spec("integer", _const(1)),
                "resume_count": Spec("integer", _const(0)),
            },
        ),
    },
)


def _is_integer(value: Any) -> bool:
    # Of any size: Python's int has no bound and json writes every digit.
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    # NaN and the infinities too: json.dump writes them (NaN, Infinity, -Infinity).
    return isinstance(value, float) or _is_integer(value)


def _valid(spec: Spec, value: Any) -> bool:
    match spec.kind:
        case "string":
            return isinstance(value, str)
        case "timestamp":
            return parse_iso8601(value) is not None
        case "number":
            return _is_number(value)
        case "integer":
            return _is_integer(value)
        case "boolean":
            return isinstance(value, bool)
        case "array":
            return isinstance(value, list)
        case "object" | "phase_statuses":
            return isinstance(value, dict)
    raise AssertionError(spec.kind)


_EXPECTED = {
    "string": "a string",
    "timestamp": "an ISO 8601 timestamp",
    "number": "a number",
    "integer": "an integer",
    "boolean": "true or false",
    "array": "an array",
    "object": "an object",
    "phase_statuses": "an object",
}


def _apply(
    spec: Spec,
    node: dict[str, Any],
    path: tuple[str, ...],
    root: dict[str, Any],
    now: datetime,
    warnings: Notes[FieldWarning],
) -> None:
    for name, child in spec.children.items():
        where = jsondoc.pointer(*path, name)
        if name not in node:
            node[name] = child.default(root, now)
            warnings.append(FieldWarning(where, f"missing; default {node[name]!r} used"))
        elif not _valid(child, node[name]):
            node[name] = child.default(root, now)
            warnings.append(
                FieldWarning(where, f"invalid, {_EXPECTED[child.kind]} expected; default used")
            )
        value = node[name]
        if child.kind == "object":
            _apply(child, value, (*path, name), root, now, warnings)
        elif child.kind == "phase_statuses":
            for phase, status in value.items():
                if status not in child.allowed:
                    value[phase] = "pending"
                    if warnings.room():
                        warnings.append(
                            FieldWarning(
                                jsondoc.pointer(*path, name, phase),
                                f"status {quoted(status)} is not one of "
                                f"{', '.join(child.allowed)}; 'pending' used",
                            )
                        )


def parse(raw: bytes, now: datetime) -> tuple[dict[str, Any], Notes[FieldWarning]]:
    """A save document with every documented field present and valid, and what was filled."""
    document = jsondoc.load(raw)
    if not isinstance(document, dict):
        raise InvalidDocument("A context save is a JSON object.", [("", "not an object")])
    version = document.get("version", VERSION)
    if version != VERSION:
        raise InvalidDocument(
            f"Save format version {quoted(version)} is not supported; "
            f"this service reads {VERSION!r}.",
            [("/version", f"must be {VERSION!r}")],
        )
    warnings: Notes[FieldWarning] = Notes()
    _apply(SCHEMA, document, (), document, now, warnings)
    return document, warnings


def render(document: dict[str, Any]) -> bytes:
    return jsondoc.dumps_indent2(document)


@dataclass(frozen=True)
class Summary:
    """The fields a listing shows and queries, read from a parsed (valid) document. A number
    that its column cannot hold exactly is None there, and ``unlisted`` names it."""

    timestamp: datetime
    project_name: str
    current_phase: str
    phase_statuses: dict[str, str]
    token_total: float | None
    token_limit: float | None
    token_percentage: float | None
    save_count: int | None
    resume_count: int | None
    unlisted: list[FieldWarning]

    @property
    def all_phases_complete(self) -> bool:
        statuses = self.phase_statuses.values()
        return bool(self.phase_statuses) and all(s == "complete" for s in statuses)


# The writer's name, mdan-save-<unix seconds at save time>.json; at most 40 digits, so that
# a name always fits its column.
FILENAME_PATTERN = r"^mdan-save-[0-9]{1,40}\.json$"
FILENAME_RULE = "mdan-save-<1 to 40 digits>.json"
_FILENAME = re.compile(FILENAME_PATTERN)


def is_filename(name: str) -> bool:
    return _FILENAME.fullmatch(name) is not None


def filename_for(timestamp: datetime) -> str:
    """The name of a save that came without one: its ``timestamp`` in unix seconds."""
    return f"mdan-save-{int(timestamp.timestamp())}.json"


def saved_at(filename: str) -> datetime | None:
    """The second a save's name says it was written at, when a datetime can hold it."""
    seconds = int(filename.removeprefix("mdan-save-").removesuffix(".json"))
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _double_column(value: float | int) -> float | None:
    """``value`` as a double column holds it, or None when it would not come back the same:
    NaN and the infinities (SQLite cannot store NaN, JSON answers cannot carry either), and
    integers a double does not hold exactly."""
    try:
        as_float = float(value)
    except OverflowError:
        return None
    if not math.isfinite(as_float) or as_float != value:
        return None
    return as_float


def _bigint_column(value: int) -> int | None:
    return value if value in jsondoc.INT64 else None


def summarize(document: dict[str, Any], listed_characters: int) -> Summary:
    """``listed_characters``: the most of a text the listing's columns hold (the rest is kept
    in the file, and ``unlisted`` names each text cut)."""
    timestamp = parse_iso8601(document["timestamp"])
    assert timestamp is not None, "summarize() takes a document that parse() has checked"
    usage = document["context"]["token_usage"]
    metadata = document["metadata"]
    unlisted: list[FieldWarning] = []

    def column(value: Any, as_column: Callable[[Any], Any], *path: str) -> Any:
        stored = as_column(value)
        if stored is None:
            unlisted.append(
                FieldWarning(
                    jsondoc.pointer(*path),
                    f"{quoted(value)} kept as written; "
                    "the saves listing cannot hold it and shows null",
                )
            )
        return stored

    held = f"the saves listing holds the first {listed_characters} characters"
    for path in (("project", "name"), ("phases", "current")):
        if len(document[path[0]][path[1]]) > listed_characters:
            unlisted.append(FieldWarning(jsondoc.pointer(*path), f"kept as written; {held}"))
    # One warning for them all: a save may name thousands of phases.
    long_phases = sum(len(phase) > listed_characters for phase in document["phases"]["status"])
    if long_phases:
        unlisted.append(
            FieldWarning(
                jsondoc.pointer("phases", "status"),
                f"{long_phases} phase name(s) kept as written; {held} of each",
            )
        )
    return Summary(
        timestamp=timestamp,
        project_name=document["project"]["name"],
        current_phase=document["phases"]["current"],
        phase_statuses=dict(document["phases"]["status"]),
        token_total=column(usage["total"], _double_column, "context", "token_usage", "total"),
        token_limit=column(usage["limit"], _double_column, "context", "token_usage", "limit"),
        token_percentage=column(
            usage["percentage"], _double_column, "context", "token_usage", "percentage"
        ),
        save_count=column(metadata["save_count"], _bigint_column, "metadata", "save_count"),
        resume_count=column(metadata["resume_count"], _bigint_column, "metadata", "resume_count"),
        unlisted=unlisted,
    )
