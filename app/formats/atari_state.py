"""atari's run state (seed 002): ``.atari/state.json`` as atari's Go writer writes it.

atari keeps the file as a Go struct and saves it with ``json.MarshalIndent(state, "", "  ")``.
So the file's layout is the struct's, not the input's: its fields in declaration order, the
``omitempty`` ones left out when empty, the ``history`` map's keys sorted, floats in Go's
shortest form, non-ASCII written raw, ``<``, ``>``, ``&``, U+2028 and U+2029 escaped, no
newline at the end. ``render`` writes exactly that.

The struct is atari's ``State`` (``internal/events/statesink.go``): version 1 is the documented
format; version 2, the tool's current one, adds the stall fields and ``created_beads`` at the
end, all tagged ``omitempty``. ``stalled_at`` is a ``time.Time``, and ``omitempty`` never
leaves out a struct: every version 2 state carries it, ``"0001-01-01T00:00:00Z"`` (Go's zero
time) when nothing is stalled. Version 1's struct has no such field, so a version 1 document
goes without it.

Go drops fields its struct does not have; this store keeps them (after the known ones, in the
order they came), since real files carry fields the documents never mention.

``parse`` reads a document the way Go's ``json.Unmarshal`` would accept it into that struct and
refuses anything else. Strictly: integers must be integer literals in 64-bit range, times
RFC 3339 as Go parses them, and a key that Go would match only case-insensitively, a duplicate
key or a lone surrogate is refused rather than guessed at. Timestamps are kept as written.
"""

import calendar
import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Literal

from app.formats import parts
from app.formats.errors import (
    Faults,
    FormatError,
    InvalidDocument,
    MalformedDocument,
    Notes,
    quoted,
)
from app.formats.jsondoc import INT64, pointer

CURRENT_VERSION = 2
KNOWN_VERSIONS = (1, 2)
FILENAME = "state.json"
BACKUP_FILENAME = "state.json.backup"
# What Go writes for a zero time.Time.
ZERO_TIME = "0001-01-01T00:00:00Z"


class Number(str):
    """A JSON number as written. Known fields convert it; unknown fields keep the literal."""

    @property
    def is_integer_literal(self) -> bool:
        return not any(mark in self for mark in ".eE")

    def int64(self) -> int | None:
        """An integer literal's value when 64 bits hold it, else None. Its length is looked at
        first: no 64-bit integer takes more than 20 characters, and Python refuses to convert
        more than 4,300 digits (a ValueError: a 5,000-digit version was a 500)."""
        if len(self) > 20:
            return None
        value = int(self)
        return value if value in INT64 else None


@dataclass(frozen=True)
class Field:
    name: str
    kind: str  # int, string, float, time, history, strings
    omitempty: bool = False
    since: int = 1  # the state version whose struct added the field

    @property
    def always_written(self) -> bool:
        """Whether Go writes the field even at its zero value: ``omitempty`` leaves out false,
        0, "", nil and empty slices and maps, never a struct such as ``time.Time``."""
        return not self.omitempty or self.kind == "time"


STATE_FIELDS = (
    Field("version", "int"),
    Field("status", "string"),
    Field("iteration", "int"),
    Field("current_bead", "string", omitempty=True),
    Field("history", "history"),
    Field("total_cost", "float"),
    Field("total_turns", "int"),
    Field("updated_at", "time"),
    Field("active_top_level", "string", omitempty=True),
    Field("active_top_level_title", "string", omitempty=True),
    # Version 2.
    Field("stalled_bead_id", "string", omitempty=True),
    Field("stalled_bead_title", "string", omitempty=True),
    Field("stall_reason", "string", omitempty=True),
    Field("stalled_at", "time", omitempty=True, since=2),
    Field("stall_type", "string", omitempty=True),
    Field("created_beads", "strings", omitempty=True),
)
ENTRY_FIELDS = (
    Field("id", "string"),
    Field("status", "string"),
    Field("attempts", "int"),
    Field("last_attempt", "time"),
    Field("last_error", "string", omitempty=True),
    Field("last_session_id", "string", omitempty=True),
)
ZERO_VALUES: dict[str, Any] = {
    "int": 0,
    "string": "",
    "float": 0.0,
    "time": ZERO_TIME,
    "history": {},
    "strings": None,
}


@dataclass(frozen=True)
class Note:
    """Something ``parse`` did to a document: a zero value filled in, an empty field dropped."""

    path: str
    message: str


# ---------------------------------------------------------------------------------------------
# Reading


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for key, value in pairs:
        if key in document:
            # Go keeps the last of duplicate keys; which one a writer meant cannot be known.
            raise InvalidDocument(
                f"The key {quoted(key)} appears twice in one object.",
                [("", f"duplicate key {quoted(key)}")],
            )
        document[key] = value
    return document


def decode(raw: bytes) -> Any:
    """The JSON value of ``raw``, read as Go reads it: UTF-8 only, no byte order mark."""
    if raw.startswith(b"\xef\xbb\xbf"):
        raise MalformedDocument("The body starts with a byte order mark, which Go's JSON refuses.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MalformedDocument("The body is not valid UTF-8.") from exc
    try:
        return json.loads(
            text,
            object_pairs_hook=_object,
            parse_int=Number,
            parse_float=Number,
            parse_constant=_refuse_constant,
        )
    except InvalidDocument:
        raise
    except json.JSONDecodeError as exc:
        raise MalformedDocument(
            f"The body is not well-formed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}."
        ) from exc
    except (ValueError, RecursionError) as exc:
        raise MalformedDocument(f"The body is not acceptable JSON: {exc}.") from exc


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_SURROGATE = re.compile("[\ud800-\udfff]")
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-](\d{2}):(\d{2}))\Z", re.ASCII
)


def is_text(value: str) -> bool:
    """False for a string holding a lone surrogate, which JSON can escape but UTF-8 not hold."""
    return _SURROGATE.search(value) is None


def is_rfc3339(text: str) -> bool:
    """What Go's ``time.Time`` accepts from JSON: RFC 3339 with real dates and times."""
    match = _RFC3339.match(text)
    if match is None:
        return False
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    if not 1 <= month <= 12 or not 1 <= day <= _days_in(year, month):
        return False
    offset_ok = match.group(9) is None or (int(match.group(9)) <= 23 and int(match.group(10)) <= 59)
    return hour <= 23 and minute <= 59 and second <= 59 and offset_ok


def _days_in(year: int, month: int) -> int:
    if month == 2 and calendar.isleap(year):
        return 29
    return (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)[month - 1]


@dataclass(frozen=True)
class _Struct:
    """A struct's fields as the reader looks them up, built once: by name, and their names by
    case-folded name (what Go's decoder would match a key to)."""

    fields: tuple[Field, ...]
    by_name: dict[str, Field]
    by_folded: dict[str, str]

    @classmethod
    def of(cls, fields: tuple[Field, ...]) -> "_Struct":
        return cls(
            fields,
            {field.name: field for field in fields},
            {field.name.casefold(): field.name for field in fields},
        )


_STATE = _Struct.of(STATE_FIELDS)
_ENTRY = _Struct.of(ENTRY_FIELDS)


class _Reader:
    """Checks one document against the struct, collecting every fault with its path."""

    def __init__(self, *, zero_missing: bool, version: int) -> None:
        self.zero_missing = zero_missing
        self.version = version
        self.errors = Faults()
        self.notes: Notes[Note] = Notes()

    def fault(self, path: str, message: str) -> None:
        self.errors.append((path, message))

    def struct(self, value: Any, struct: "_Struct", path: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fault(pointer(*path), "must be an object")
            return {}
        fields, by_name, by_folded = struct.fields, struct.by_name, struct.by_folded
        result: dict[str, Any] = {}
        for key, item in value.items():
            field = by_name.get(key)
            if field is None:
                if key.casefold() in by_folded:
                    self.fault(
                        pointer(*path, key),
                        f"Go would read this as {by_folded[key.casefold()]!r}; use that name",
                    )
                result[self.text(key, (*path, key))] = self.unknown(item, (*path, key))
            elif item is None and not field.omitempty:
                if self.zero_missing:
                    self.zero(result, field, path, "null")
                else:
                    self.fault(pointer(*path, key), "must not be null")
            elif item is None:
                # Go leaves the field at its zero value, as if it were missing.
                self.left_out(field, path, "null")
            else:
                converted = self.known(field, item, (*path, key))
                if _is_empty(field, converted):
                    self.left_out(field, path, "empty")
                else:
                    result[key] = converted
        for field in fields:
            if field.name in value:
                continue
            if not field.omitempty:
                if self.zero_missing:
                    self.zero(result, field, path, "missing")
                else:
                    self.fault(pointer(*path, field.name), "missing; atari always writes it")
            elif self.written_as_zero(field):
                self.left_out(field, path, "missing")
        return result

    def written_as_zero(self, field: Field) -> bool:
        """An ``omitempty`` field that Go writes all the same (``stalled_at``, a ``time.Time``)
        in the document's version. A document may lack it, strict reading or not: the tag makes
        it optional, and version 2 states this service exported before it wrote the field lack
        it. ``render`` writes its zero value."""
        return field.always_written and field.since <= self.version

    def left_out(self, field: Field, path: tuple[str, ...], why: str) -> None:
        """A missing, null or empty ``omitempty`` field is not kept; the note says what atari
        writes in its place."""
        if not self.notes.room():
            return
        written = (
            f"atari writes Go's zero value, {ZERO_VALUES[field.kind]}"
            if self.written_as_zero(field)
            else "atari omits it"
        )
        self.notes.append(Note(pointer(*path, field.name), f"{why}; {written}"))

    def zero(self, result: dict[str, Any], field: Field, path: tuple[str, ...], why: str) -> None:
        result[field.name] = _fresh(ZERO_VALUES[field.kind])
        if self.notes.room():
            self.notes.append(Note(pointer(*path, field.name), f"{why}; Go's zero value used"))

    def known(self, field: Field, value: Any, path: tuple[str, ...]) -> Any:
        # The value's pointer is made only for a fault: a valid document (every stored
        # state a change loads) needs none.
        if field.kind == "int":
            if not isinstance(value, Number) or not value.is_integer_literal:
                self.fault(pointer(*path), "must be an integer")
            elif (number := value.int64()) is None:
                self.fault(pointer(*path), "must fit in a 64-bit integer")
            else:
                return number
        elif field.kind == "float":
            if not isinstance(value, Number) or not math.isfinite(float(value)):
                self.fault(pointer(*path), "must be a finite number")
            else:
                return float(value)
        elif field.kind == "string":
            if not isinstance(value, str) or isinstance(value, Number):
                self.fault(pointer(*path), "must be a string")
            else:
                return self.text(value, path)
        elif field.kind == "time":
            if not isinstance(value, str) or isinstance(value, Number) or not is_rfc3339(value):
                self.fault(pointer(*path), "must be an RFC 3339 timestamp")
            else:
                return value
        elif field.kind == "strings":
            if not isinstance(value, list):
                self.fault(pointer(*path), "must be a list of strings")
            else:
                return [
                    self.known(Field("", "string"), v, (*path, str(i))) for i, v in enumerate(value)
                ]
        else:
            return self.history(value, path)
        return value

    def history(self, value: Any, path: tuple[str, ...]) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fault(pointer(*path), "must be an object of history entries")
            return {}
        return {
            self.text(key, (*path, key)): self.struct(entry, _ENTRY, (*path, key))
            for key, entry in value.items()
        }

    def text(self, value: str, path: tuple[str, ...]) -> str:
        if not is_text(value):
            self.fault(pointer(*path), "contains a lone surrogate, which is not text")
        return value

    def unknown(self, value: Any, path: tuple[str, ...]) -> Any:
        if isinstance(value, dict):
            for key, item in value.items():
                self.text(key, (*path, key))
                self.unknown(item, (*path, key))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                self.unknown(item, (*path, str(index)))
        elif isinstance(value, str) and not isinstance(value, Number):
            self.text(value, path)
        return value


def _is_empty(field: Field, value: Any) -> bool:
    return not field.always_written and value in ("", [])


def _fresh(value: Any) -> Any:
    return {} if isinstance(value, dict) else value


def read(document: Any, *, zero_missing: bool = False) -> tuple[dict[str, Any], Notes[Note]]:
    """Check a decoded document against the struct; any version number is accepted here.

    ``zero_missing`` reads as Go does, a missing or null field taking its zero value (each one
    noted); otherwise such a field is a fault. An ``omitempty`` field may be missing, null or
    empty either way: it is dropped, and noted unless it was missing and atari omits it.
    """
    reader = _Reader(zero_missing=zero_missing, version=_version_of(document))
    state = reader.struct(document, _STATE, ())
    if reader.errors:
        raise InvalidDocument("The document is not an atari run state.", reader.errors)
    return state, reader.notes


def _version_of(document: Any) -> int:
    """The document's version if it is a readable one (else 0, which nothing accepts)."""
    version = document.get("version") if isinstance(document, dict) else None
    if isinstance(version, Number) and version.is_integer_literal:
        return version.int64() or 0
    return 0


def parse(raw: bytes) -> tuple[dict[str, Any], Notes[Note]]:
    """A state document of a version this store understands (1 or 2), strictly."""
    state, notes = read(decode(raw))
    if state["version"] not in KNOWN_VERSIONS:
        raise InvalidDocument(
            f"Version {state['version']} is not one this store understands.",
            [("/version", "must be 1 or 2")],
        )
    return state, notes


def migrate(state: dict[str, Any]) -> dict[str, Any]:
    """Version 1 to version 2: as in atari, only the number changes; the new fields hold their
    zero values (``render`` writes ``stalled_at`` as the zero time)."""
    return {**state, "version": CURRENT_VERSION}


def fresh(now: datetime) -> dict[str, Any]:
    """The state atari starts from when it has none, saved at ``now``."""
    return {
        "version": CURRENT_VERSION,
        "status": "",
        "iteration": 0,
        "history": {},
        "total_cost": 0.0,
        "total_turns": 0,
        "updated_at": go_time(now),
    }


LoadOutcome = Literal["stored", "migrated", "reset"]


@dataclass(frozen=True)
class Loaded:
    """What atari's own load makes of a file: ``stored``, ``migrated`` or ``reset``."""

    outcome: LoadOutcome
    state: dict[str, Any]
    reason: str
    file_version: int | None
    notes: Notes[Note]


def load(raw: bytes, now: datetime) -> Loaded:
    """atari's ``StateSink.Load``: a file Go cannot read, or of a version it does not know
    (missing, zero, future), is set aside and the state starts fresh; version 1 is migrated.
    Fields Go would leave at their zero value are filled in, and noted."""
    try:
        state, notes = read(decode(raw), zero_missing=True)
    except FormatError as exc:
        faults: Notes[Note] = Notes()
        faults.extend(Note(path, message) for path, message in exc.errors)
        faults.more = exc.more
        return Loaded("reset", fresh(now), f"unreadable: {exc.message}", None, faults)
    version = state["version"]
    if version == CURRENT_VERSION:
        return Loaded("stored", state, "version 2, the current version", version, notes)
    if version == 1:
        return Loaded("migrated", migrate(state), "version 1, migrated to 2", version, notes)
    reason = "no version (0)" if version == 0 else f"version {version} is not 1 or 2"
    return Loaded("reset", fresh(now), reason, version, Notes())


def go_time(moment: datetime) -> str:
    """A UTC moment as Go's ``time.Time`` writes it (RFC 3339, fraction without trailing 0s)."""
    moment = moment.astimezone(UTC)
    fraction = f"{moment.microsecond:06d}".rstrip("0")
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if fraction else "") + "Z"


# ---------------------------------------------------------------------------------------------
# Writing


_GO_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Go 1.22+ writes \b and \f short; other control characters, the HTML-sensitive <, >, & and
# the JavaScript line terminators U+2028 and U+2029 as \u00XX.
_GO_ESCAPES |= {"\b": "\\b", "\f": "\\f"}
_GO_NEEDS_ESCAPE = re.compile('["\\\\\x00-\x1f<>&\u2028\u2029]')


def go_string(text: str) -> str:
    return '"' + _GO_NEEDS_ESCAPE.sub(_go_escape, text) + '"'


def _go_escape(match: re.Match[str]) -> str:
    char = match.group()
    return _GO_ESCAPES.get(char) or f"\\u{ord(char):04x}"


def go_float(value: float) -> str:
    """``encoding/json``'s float64: shortest digits, exponent form below 1e-6 or from 1e21."""
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    exponent += len(digit_tuple) - len(digits)
    prefix = "-" if sign else ""
    magnitude = abs(value)
    if magnitude < 1e-6 or magnitude >= 1e21:
        scientific = len(digits) - 1 + exponent
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        # strconv writes at least two exponent digits; encoding/json trims e-07 to e-7.
        written = f"{scientific:+03d}" if scientific >= 0 else f"-{-scientific}"
        return f"{prefix}{mantissa}e{written}"
    if exponent >= 0:
        return prefix + digits + "0" * exponent
    point = len(digits) + exponent
    if point > 0:
        return f"{prefix}{digits[:point]}.{digits[point:]}"
    return f"{prefix}0.{'0' * -point}{digits}"


Spec = tuple[Field, ...] | Field | None
"""How to write a value: a struct (its fields), a known field, or plain JSON (None)."""


def _ordered(value: dict[str, Any], fields: tuple[Field, ...]) -> list[tuple[str, Any, Spec]]:
    """The struct's fields in declaration order, then the unknown ones as they came."""
    known = {field.name for field in fields}
    members: list[tuple[str, Any, Spec]] = [
        (field.name, value[field.name], field) for field in fields if field.name in value
    ]
    members += [(key, item, None) for key, item in value.items() if key not in known]
    return members


def _write(value: Any, spec: Spec, indent: str, out: list[str]) -> None:
    if isinstance(spec, tuple):
        _write_object(_ordered(value, spec), indent, out)
    elif isinstance(spec, Field) and spec.kind == "history":
        # Go's encoder sorts map keys (byte order of UTF-8, which is code point order).
        _write_object([(key, value[key], ENTRY_FIELDS) for key in sorted(value)], indent, out)
    elif isinstance(value, dict):
        _write_object([(key, item, None) for key, item in value.items()], indent, out)
    elif isinstance(value, list):
        _write_list(value, indent, out)
    elif isinstance(value, Number):
        out.append(value)
    elif isinstance(value, str):
        out.append(go_string(value))
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, float):
        out.append(go_float(value))
    elif value is None:
        out.append("null")
    else:
        out.append(str(value))


def _write_object(members: list[tuple[str, Any, Spec]], indent: str, out: list[str]) -> None:
    if not members:
        out.append("{}")
        return
    inner = indent + "  "
    out.append("{")
    for position, (key, item, spec) in enumerate(members):
        out.append(("\n" if position == 0 else ",\n") + inner + go_string(key) + ": ")
        _write(item, spec, inner, out)
    out.append("\n" + indent + "}")


def _write_list(items: list[Any], indent: str, out: list[str]) -> None:
    if not items:
        out.append("[]")
        return
    inner = indent + "  "
    out.append("[")
    for position, item in enumerate(items):
        out.append(("\n" if position == 0 else ",\n") + inner)
        _write(item, None, inner, out)
    out.append("\n" + indent + "]")


def _as_struct(state: dict[str, Any]) -> dict[str, Any]:
    """The values of the struct atari marshals: a field of the document's version that it
    lacks holds its zero value (which Go writes if ``omitempty`` does not leave it out)."""
    version = state["version"]
    zeros = {
        field.name: _fresh(ZERO_VALUES[field.kind])
        for field in STATE_FIELDS
        if field.always_written and field.since <= version and field.name not in state
    }
    return {**state, **zeros}


def render(state: dict[str, Any]) -> bytes:
    """Byte for byte what atari's ``json.MarshalIndent(state, "", "  ")`` writes."""
    out: list[str] = []
    _write(_as_struct(state), STATE_FIELDS, "", out)
    return "".join(out).encode("utf-8")


# ---------------------------------------------------------------------------------------------
# As parts: the state's head, and its history's entries (``app/formats/parts.py``)

# The state's fields with ``history`` written as the marker ``parts.hole`` looks for.
_HEAD_FIELDS = tuple(
    Field(field.name, "string") if field.kind == "history" else field for field in STATE_FIELDS
)


def entry_part(bead: str, entry: dict[str, Any]) -> bytes:
    """A history entry as a member of ``history`` (``parts.join``): its key and its value."""
    out = [go_string(bead), ": "]
    _write(entry, ENTRY_FIELDS, "", out)
    return "".join(out).encode("utf-8")


def entry_of_part(part: bytes) -> tuple[str, dict[str, Any]]:
    """The key and the entry of an ``entry_part``."""
    [(bead, value)] = decode(b"{" + part + b"}").items()
    reader = _Reader(zero_missing=False, version=CURRENT_VERSION)
    entry = reader.struct(value, _ENTRY, ("history", bead))
    if reader.errors:
        raise InvalidDocument("The history entry is not atari's.", reader.errors)
    return bead, entry


def split(state: dict[str, Any]) -> tuple[parts.Head, list[tuple[str, bytes]]]:
    """A state as its head and its history's entries, by key in the order Go writes them
    (``parts.join`` of the two is ``render(state)``). Go always writes ``history``."""
    struct = _as_struct(state)
    history: dict[str, Any] = struct["history"]

    def render_with(marker: str) -> bytes:
        out: list[str] = []
        _write({**struct, "history": marker}, _HEAD_FIELDS, "", out)
        return "".join(out).encode("utf-8")

    head = parts.hole(render_with, lambda text: go_string(text).encode("utf-8"), b"{}")
    return head, [(bead, entry_part(bead, history[bead])) for bead in sorted(history)]
