"""JSON as Python's ``json`` module reads and writes it: the reference writer of most formats."""

import codecs
import json
import math
from json.encoder import encode_basestring_ascii
from typing import Any

import orjson

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


# Values orjson reads and writes exactly as Python's json does: a document made of these, dicts,
# lists and floats may take orjson's C path. Subclasses and any other type (a tuple, an enum)
# take Python's path, the reference for them.
_PLAIN_SCALARS = frozenset({str, int, bool, type(None)})

# orjson reads an integer literal outside [-2**63, 2**64) as a float instead of refusing it;
# every float it makes so is at least this large.
_FLOATED_INTEGER = float(2**63)


def _escape_past_ascii_run(error: UnicodeError) -> tuple[str, int]:
    """An error handler for ``str.encode("ascii")``, which hands it each run of non-ASCII
    characters: the run escaped as Python's json escapes it (``ensure_ascii``). A run holds no
    quote, backslash or control character, so the escaper Python's encoder calls on each
    string gives the run's exact escapes."""
    assert isinstance(error, UnicodeEncodeError)
    return encode_basestring_ascii(error.object[error.start : error.end])[1:-1], error.end


codecs.register_error("jsondoc.ensure_ascii", _escape_past_ascii_run)

# The escaping above costs about 0.3 µs a run of non-ASCII characters on top of 0.6 ms a MB.
# Where UTF-8 spends more than one byte in 64 beyond a byte a character, the runs (one a
# character, at worst) could cost what Python's own encoder does, which then writes the
# document.
_MOSTLY_ASCII = 64


class _NotPlain(Exception):
    """The document holds a value of a type outside ``_PLAIN_SCALARS``, dict, list and float."""


def _floats_and_nesting(document: Any) -> tuple[list[float], int]:
    """Every float in the document, and how many containers deep it nests; level by level and
    iterative, so any depth is safe. Only the values that are not plain scalars are carried
    from one level to the next: the strings and integers that make up most of a large
    document are looked at once, in a comprehension. Raises ``_NotPlain``. Stops one level
    past ``MAX_DEPTH`` (a container that holds itself nests without end); the floats are then
    not all found."""
    floats: list[float] = []
    nesting = 0
    level = [document] if type(document) not in _PLAIN_SCALARS else []
    while level and nesting <= MAX_DEPTH:
        containers = [value for value in level if type(value) in (dict, list)]
        level_floats = [value for value in level if type(value) is float]
        if len(containers) + len(level_floats) != len(level):
            raise _NotPlain
        floats += level_floats
        nesting += bool(containers)
        level = [
            child
            for value in containers
            for child in (value.values() if type(value) is dict else value)
            if type(child) not in _PLAIN_SCALARS
        ]
    return floats, nesting


def nesting(document: Any) -> int:
    """How many containers deep a parsed document nests (a plain scalar: 0), counted up to one
    past ``MAX_DEPTH``."""
    return _floats_and_nesting(document)[1]


def _too_deep() -> InvalidDocument:
    return InvalidDocument(
        f"The document nests more than {MAX_DEPTH} levels deep.", [("", "nested too deeply")]
    )


def load(raw: bytes | str, *, allow_nan: bool = True) -> Any:
    """Parse JSON as Python's ``json`` writes it: UTF-8 (a BOM allowed), integers of any size,
    and (unless ``allow_nan`` is false) ``NaN``, ``Infinity`` and ``-Infinity``, which
    ``json.dump`` writes by default and so every Python writer of these formats may write.
    ``allow_nan=False`` reads strict JSON: the service's own request bodies (merge patches,
    items sent to its API) are JSON, not a tool's file. At most ``MAX_DEPTH`` levels of
    nesting. Key order is kept.

    orjson reads most documents in half the time and to the same objects (types, values, a
    duplicate key's last value in its first place). What it refuses goes to Python's json:
    what only Python accepts (a BOM, UTF-16 and UTF-32, ``NaN``, lone surrogate escapes,
    nesting past 1024), and what neither does, so that the error stays Python's. So does a
    document holding a float large enough to have been an integer orjson made a float.
    Unlike Python's json, UTF-8's form of a lone surrogate is refused (``text_of``)."""
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _load_with_python(raw, allow_nan)
    floats, nesting = _floats_and_nesting(document)
    if floats and max(map(abs, floats)) >= _FLOATED_INTEGER:
        return _load_with_python(raw, allow_nan)
    if nesting > MAX_DEPTH:
        raise _too_deep()
    return document


def text_of(raw: bytes) -> str:
    """JSON's bytes as text, in the Unicode encoding they are in (detected as ``json.loads``
    detects it: UTF-8, with or without a byte order mark, UTF-16 or UTF-32), strictly.
    ``json.loads`` of bytes decodes with ``surrogatepass``, which reads UTF-8's form of a
    lone surrogate (``ED A0 80``), not UTF-8, as one; its escape (``\\ud800``) is JSON, and
    stays so. Raises ``UnicodeDecodeError``."""
    return raw.decode(json.detect_encoding(raw))


def _load_with_python(raw: bytes | str, allow_nan: bool) -> Any:
    try:
        document = json.loads(
            raw if isinstance(raw, str) else text_of(raw),
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
    if _floats_and_nesting(document)[1] > MAX_DEPTH:
        raise _too_deep()
    return document


def dumps_indent2(document: Any) -> bytes:
    """Byte for byte what ``json.dumps(document, indent=2)`` writes (ASCII, no newline at end).

    Python's indenting encoder is pure Python (7 ms for 1 MB); orjson's writes the same bytes
    in C (0.2 ms) wherever each token is the same, and lays tokens out the same way (the
    property tests in tests/formats/test_jsondoc.py). Where the two could differ:
    - integers past 64 bits, lone surrogates, keys that are not strings, nesting past 255
      (a container holding itself): orjson refuses them, and Python writes the document (or
      refuses it, as ``json.dumps`` does);
    - floats (Python writes ``NaN`` and ``Infinity``, orjson ``null``; each its own shortest
      digits): every float of the document is written by both, and Python writes the
      document unless all are the same;
    - strings: orjson escapes exactly what Python's json escapes with ``ensure_ascii=False``
      (every code point is checked in the tests); DEL and non-ASCII characters, which Python
      escapes by default and orjson writes as they are (only ever inside strings), are
      escaped afterwards, by Python's own string escaper;
    - any other type, or a subclass: Python writes the document."""
    try:
        # orjson first: it refuses a container that holds itself at once, where the walk would
        # go on down it (doubling at each level if it holds itself twice); after it, the
        # document is a tree.
        rendered = orjson.dumps(document, option=orjson.OPT_INDENT_2)
        floats, nesting = _floats_and_nesting(document)
    except (_NotPlain, orjson.JSONEncodeError):
        return _dumps_indent2_with_python(document)
    # Past MAX_DEPTH the floats were not all found; and each must be written as Python does.
    if nesting > MAX_DEPTH or (
        floats and orjson.dumps(floats) != json.dumps(floats, separators=(",", ":")).encode()
    ):
        return _dumps_indent2_with_python(document)
    if not rendered.isascii():
        text = rendered.decode()
        if (len(rendered) - len(text)) * _MOSTLY_ASCII > len(text):
            return _dumps_indent2_with_python(document)
        rendered = text.encode("ascii", "jsondoc.ensure_ascii")
    # DEL is ASCII, and in UTF-8 its byte stands for nothing else: orjson writes it as it is.
    return rendered.replace(b"\x7f", b"\\u007f")


def _dumps_indent2_with_python(document: Any) -> bytes:
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
