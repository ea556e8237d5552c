"""JSON as Python's ``json`` module reads and writes it: the reference writer of most formats."""

import json
import math
from typing import Any

from app.formats.errors import InvalidDocument, MalformedDocument

# The integers a BIGINT column (and Go's int64, and every 64-bit reader of these files) holds.
INT64 = range(-(2**63), 2**63)
INT64_MIN = INT64.start
INT64_MAX = INT64.stop - 1


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    # 1e999 parses as inf, which json.dumps would write back as Infinity: not what was written
    # (Python's json writes an infinity as Infinity, never as an overflowing literal).
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text} is out of the range of a double")
    return value


def is_storable(text: str) -> bool:
    """A string a database text column can hold: no NUL, no lone surrogate (both valid JSON)."""
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# Deeper documents are refused: every writer here (json.dumps, the Go-style renderer) recurses
# once per level, and real agent state is a handful of levels deep.
MAX_DEPTH = 256


def _depth_exceeds(document: Any, limit: int) -> bool:
    """Whether containers nest more than ``limit`` deep; level by level and iterative, so any
    depth is safe. Only containers are carried from one level to the next: the strings and
    numbers that make up most of a large document are looked at once, in a comprehension."""
    level = [document] if type(document) in (dict, list) else []
    for _depth in range(limit):
        if not level:
            return False
        children = [
            child
            for value in level
            for child in (value.values() if type(value) is dict else value)
            if type(child) in (dict, list)
        ]
        level = children
    return bool(level)


def _too_deep() -> InvalidDocument:
    return InvalidDocument(
        f"The document nests more than {MAX_DEPTH} levels deep.", [("", "nested too deeply")]
    )


def load(raw: bytes, *, allow_nan: bool = True) -> Any:
    """Parse JSON as Python's ``json`` writes it: UTF-8 (a BOM allowed), integers of any size,
    and (unless ``allow_nan`` is false) ``NaN``, ``Infinity`` and ``-Infinity``, which
    ``json.dump`` writes by default and so every Python writer of these formats may write.
    ``allow_nan=False`` reads strict JSON: the service's own request bodies (merge patches,
    items sent to its API) are JSON, not a tool's file. At most ``MAX_DEPTH`` levels of
    nesting. Key order is kept."""
    try:
        document = json.loads(
            raw,
            parse_float=_finite_float,
            parse_constant=None if allow_nan else _refuse_constant,
        )
    except RecursionError as exc:
        raise _too_deep() from exc
    except UnicodeDecodeError as exc:
        raise MalformedDocument("The body is not valid UTF-8.") from exc
    except json.JSONDecodeError as exc:
        raise MalformedDocument(
            f"The body is not well-formed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}."
        ) from exc
    except ValueError as exc:
        raise MalformedDocument(f"The body is not acceptable JSON: {exc}.") from exc
    if _depth_exceeds(document, MAX_DEPTH):
        raise _too_deep()
    return document


def dumps_indent2(document: Any) -> bytes:
    """Byte for byte what ``json.dumps(document, indent=2)`` writes (ASCII, no newline at end)."""
    return json.dumps(document, indent=2).encode("ascii")


def pointer(*parts: str | int) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7396 JSON merge patch, applied in place where ``target`` is an object. A key that
    is replaced keeps its place; a new key goes at the end of its object."""
    try:
        return _merge(target, patch)
    except RecursionError as exc:
        raise InvalidDocument("The merge patch is nested too deeply.", [("", "too deep")]) from exc


def _merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = _merge(target.get(key), value)
    return target
