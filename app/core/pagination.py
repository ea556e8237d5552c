"""Keyset pagination behind an opaque cursor: stable under concurrent inserts, O(limit)."""

import base64
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, TypeVar

import orjson
from fastapi import Query
from sqlalchemy import TypeDecorator, UnaryExpression, and_, or_
from sqlalchemy.orm import InstrumentedAttribute
from sqlmodel import Session
from sqlmodel.sql.expression import SelectOfScalar

from app.core.constraints import MAX_LIMIT
from app.core.db import searchable
from app.core.errors import FieldError, InvalidContent
from app.formats.jsondoc import INT64
from app.formats.timestamps import to_utc

Row = TypeVar("Row")

# The types of the values a cursor carries (``_encode_value``, ``_decode_value``).
_ENCODED = (datetime, int, str)

Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"Page size, at most {MAX_LIMIT}.")]
# What every cursor handed out is made of: unpadded URL-safe base64 (``encode_cursor``).
CURSOR_PATTERN = r"^[A-Za-z0-9_-]+$"
Cursor = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=1024,
        pattern=CURSOR_PATTERN,
        description="Opaque cursor from a previous page's `next_cursor` (unpadded URL-safe "
        "base64); only a cursor this list handed out is accepted.",
    ),
]


@dataclass(frozen=True, init=False)
class SortKey:
    column: InstrumentedAttribute[Any]
    descending: bool
    # The Python type of the column's values, which its cursors encode.
    value_type: type

    def __init__(self, attribute: object, descending: bool = True) -> None:
        # SQLModel types a column attribute as its value (``Save.timestamp: datetime``); on the
        # class it is the ORM's InstrumentedAttribute, which is what a sort key needs.
        if not isinstance(attribute, InstrumentedAttribute):
            raise TypeError(f"not a mapped column: {attribute!r}")
        column_type = attribute.type
        value_type = column_type.python_type
        if value_type is object and isinstance(column_type, TypeDecorator):
            # SQLModel's AutoString (a ``str`` field) names no type of its own: its impl's.
            value_type = column_type.impl_instance.python_type
        # Checked here, when the list is defined: an admin's next page of keys was a 500.
        if value_type not in _ENCODED:
            raise TypeError(f"{attribute}: no cursor encoding for {value_type}")
        object.__setattr__(self, "column", attribute)
        object.__setattr__(self, "descending", descending)
        object.__setattr__(self, "value_type", value_type)


def ordering(keys: list[SortKey]) -> list[UnaryExpression[Any]]:
    """The ORDER BY of rows sorted by ``keys``."""
    return [key.column.desc() if key.descending else key.column.asc() for key in keys]


def _encode_value(value: Any) -> Any:
    return {"dt": value.isoformat()} if isinstance(value, datetime) else value


def _decode_value(value: Any, expected: type) -> Any:
    if expected is datetime:
        if not isinstance(value, dict) or not isinstance(value.get("dt"), str):
            raise ValueError("expected a timestamp")
        moment = datetime.fromisoformat(value["dt"])
        if moment.tzinfo is None or to_utc(moment) is None:
            raise ValueError("expected a UTC timestamp")
        return moment
    if not isinstance(value, expected) or isinstance(value, bool):
        raise ValueError(f"expected {expected.__name__}")
    if expected is int and value not in INT64:
        raise ValueError("integer out of range")
    if isinstance(value, str) and searchable(value) != value:
        raise ValueError("text a column cannot hold")
    return value


def _invalid_cursor() -> InvalidContent:
    return InvalidContent(
        "The cursor is not one this list handed out.",
        errors=[FieldError("query.cursor", "invalid or foreign cursor")],
    )


def encode_position(names: list[str], values: list[Any]) -> str:
    """A cursor: the sort keys' names and the last item's values."""
    payload = {"k": names, "v": [_encode_value(value) for value in values]}
    return base64.urlsafe_b64encode(orjson.dumps(payload)).decode().rstrip("=")


def decode_position(names: list[str], types: list[type], cursor: str) -> list[Any]:
    """The values of a cursor ``encode_position`` made for keys ``names`` of ``types``; any
    other text is the caller's 422."""
    try:
        payload = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if payload["k"] != names or len(payload["v"]) != len(names):
            raise ValueError("cursor for another list")
        return [
            _decode_value(value, expected)
            for expected, value in zip(types, payload["v"], strict=True)
        ]
    except (ValueError, TypeError, KeyError, orjson.JSONDecodeError) as exc:
        raise _invalid_cursor() from exc


def encode_cursor(keys: list[SortKey], row: Any) -> str:
    names = [key.column.key for key in keys]
    return encode_position(names, [getattr(row, name) for name in names])


def decode_cursor(keys: list[SortKey], cursor: str) -> list[Any]:
    names = [key.column.key for key in keys]
    return decode_position(names, [key.value_type for key in keys], cursor)


def paginate(
    session: Session,
    statement: SelectOfScalar[Row],
    keys: list[SortKey],
    cursor: str | None,
    limit: int,
) -> tuple[list[Row], str | None]:
    """One page of ``statement`` in ``keys`` order, and the cursor of the next page."""
    if cursor is not None:
        values = decode_cursor(keys, cursor)
        # (k1, k2, ...) after (v1, v2, ...), spelt out so that mixed directions work everywhere.
        alternatives = []
        for position, key in enumerate(keys):
            equal_prefix = [
                earlier.column == value
                for earlier, value in zip(keys[:position], values, strict=False)
            ]
            beyond = (
                key.column < values[position] if key.descending else key.column > values[position]
            )
            alternatives.append(and_(*equal_prefix, beyond))
        statement = statement.where(or_(*alternatives))
    rows = list(session.exec(statement.order_by(*ordering(keys)).limit(limit + 1)))
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    return rows, encode_cursor(keys, rows[-1])
