"""Keyset pagination behind an opaque cursor: stable under concurrent inserts, O(limit).

A cursor is the last item's sort values, packed and sealed (``app/core/cursors.py``): a client
can neither read them (a primary key would tell how much other tenants wrote) nor forge them,
and one list's cursor is refused by every other list, tenant and project."""

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Query, Request
from sqlalchemy import ColumnElement, TypeDecorator, UnaryExpression, and_, inspect, or_
from sqlalchemy.orm import InstrumentedAttribute
from sqlalchemy.orm.interfaces import ORMOption
from sqlmodel import Session, select
from sqlmodel.sql.expression import SelectOfScalar

from app.core.constraints import MAX_LIMIT
from app.core.cursors import CursorSeal, Scope
from app.core.db import DATABASE, Database, searchable
from app.core.deps import get_settings
from app.core.errors import FieldError, InvalidContent

Row = TypeVar("Row")

# The types of the values a cursor carries (``_pack``, ``_unpack``).
_ENCODED = (datetime, int, str)

Limit = Annotated[
    int,
    Query(
        ge=1,
        le=MAX_LIMIT,
        description=f"The most items a page holds, at most {MAX_LIMIT}. A list of documents "
        "(memory items, handovers, an agent's memory) ends a page sooner, once its items hold "
        "the body limit (`MAX_BODY_BYTES`) together, with at least one item: a page may hold "
        "fewer items while more follow, so page on until `next_cursor` is null.",
    ),
]
# What every cursor handed out is made of: unpadded URL-safe base64 (``CursorSeal.seal``).
CURSOR_PATTERN = r"^[A-Za-z0-9_-]+$"
Cursor = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=1024,
        pattern=CURSOR_PATTERN,
        description="Opaque cursor from a previous page's `next_cursor` (unpadded URL-safe "
        "base64, encrypted and authenticated by the server: it cannot be read or made). Only a "
        "cursor this list handed out to the same tenant, for the same project, is accepted, "
        "and only while the server keeps its key; any other is a 422: request the list again "
        "without a cursor.",
    ),
]


async def _page_bytes(request: Request) -> int:
    # Async: FastAPI runs a sync dependency in a worker thread of its own, a thread hop (and a
    # turn behind other tenants' requests, app/core/fair.py) to read a setting.
    return get_settings(request).max_body_bytes


# The most bytes a page's items hold together (``ByteBound``): the body limit, read per request.
PageBytes = Annotated[int, Depends(_page_bytes)]


@dataclass(frozen=True, init=False)
class SortKey:
    column: InstrumentedAttribute[Any]
    descending: bool
    # The Python type of the column's values, which its cursors encode.
    value_type: type
    # The model's and the column's names: a list's name, in its cursors' seal, is its keys'.
    name: str

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
        object.__setattr__(self, "name", f"{attribute.class_.__name__}.{attribute.key}")


def ordering(keys: list[SortKey]) -> list[UnaryExpression[Any]]:
    """The ORDER BY of rows sorted by ``keys``."""
    return [key.column.desc() if key.descending else key.column.asc() for key in keys]


_INT64 = struct.Struct(">q")
_LENGTH = struct.Struct(">I")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _pack(values: Sequence[Any], types: Sequence[type]) -> bytes:
    """A position's values in fixed-width binary (the text of a string, after its length):
    every cursor of a list is as long as every other, whatever the values, so that not even
    its length tells how large a primary key has grown."""
    parts = []
    for value, expected in zip(values, types, strict=True):
        if expected is datetime:
            parts.append(_INT64.pack((value - _EPOCH) // _MICROSECOND))
        elif expected is int:
            parts.append(_INT64.pack(value))
        else:
            text = value.encode()
            parts.append(_LENGTH.pack(len(text)) + text)
    return b"".join(parts)


def _unpack(position: bytes, types: Sequence[type]) -> list[Any]:
    """The values ``_pack`` packed; a ValueError (or an OverflowError or struct.error) for any
    other bytes. Only the server's own positions get here (the seal checks that): these checks
    are a second line, should a position ever be sealed wrong."""
    values: list[Any] = []
    offset = 0
    for expected in types:
        if expected is str:
            (length,) = _LENGTH.unpack_from(position, offset)
            start, offset = offset + _LENGTH.size, offset + _LENGTH.size + length
            if offset > len(position):
                raise ValueError("text cut short")
            text = position[start:offset].decode()  # UnicodeDecodeError is a ValueError
            if searchable(text) != text:
                raise ValueError("text a column cannot hold")
            values.append(text)
            continue
        (number,) = _INT64.unpack_from(position, offset)
        offset += _INT64.size
        values.append(_EPOCH + number * _MICROSECOND if expected is datetime else number)
    if offset != len(position):
        raise ValueError("bytes after the position")
    return values


def _invalid_cursor() -> InvalidContent:
    return InvalidContent(
        "The cursor is not one this list handed out to this caller, or the server's key has "
        "changed since it was handed out: request the list again without a cursor.",
        errors=[FieldError("query.cursor", "invalid or foreign cursor")],
    )


def cursor_seal(session: Session) -> CursorSeal:
    """The seal of the database ``session`` reads (``Database`` names itself in its sessions)."""
    database = session.info.get(DATABASE)
    if not isinstance(database, Database):
        raise RuntimeError("a list read on a session its Database did not make")
    return database.cursors


def encode_position(
    seal: CursorSeal, list_name: str, scope: Scope, types: Sequence[type], values: Sequence[Any]
) -> str:
    """A cursor: the last item's ``values`` (of ``types``) in list ``list_name`` of ``scope``
    (the tenant, project and kind its items are of), sealed (``app/core/cursors.py``)."""
    return seal.seal(_pack(values, types), list_name, scope)


def decode_position(
    seal: CursorSeal, list_name: str, scope: Scope, types: Sequence[type], cursor: str
) -> list[Any]:
    """The values of a cursor ``encode_position`` made for the same list and scope; any other
    text is the caller's 422."""
    position = seal.open(cursor, list_name, scope)
    if position is None:
        raise _invalid_cursor()
    try:
        return _unpack(position, types)
    except (ValueError, OverflowError, struct.error) as exc:
        raise _invalid_cursor() from exc


def list_name_of(keys: list[SortKey]) -> str:
    """The name a list sorted by ``keys`` seals its cursors under: its models' and columns'."""
    return ",".join(key.name for key in keys)


def encode_cursor(seal: CursorSeal, keys: list[SortKey], scope: Scope, row: Any) -> str:
    values = [getattr(row, key.column.key) for key in keys]
    return encode_position(seal, list_name_of(keys), scope, [k.value_type for k in keys], values)


def decode_cursor(seal: CursorSeal, keys: list[SortKey], scope: Scope, cursor: str) -> list[Any]:
    types = [key.value_type for key in keys]
    return decode_position(seal, list_name_of(keys), scope, types, cursor)


@dataclass(frozen=True)
class ByteBound:
    """How many bytes a page's items may hold together: ``size`` is one item's bytes as SQL
    that reads none of them (``length`` of a document column: SQLite reads a blob's header,
    PostgreSQL its TOAST pointer), ``most`` the bound (the body limit: an item is at most one
    body, so a page is at most about one body too, whatever its ``limit``)."""

    size: ColumnElement[int]
    most: int
    # The list statement's loader options (columns it leaves unread), for the rows chosen: they
    # are read by their ids alone, not through the statement's conditions again (a search's
    # full-text match ran twice).
    options: Sequence[ORMOption] = ()


def _after(keys: list[SortKey], values: Sequence[Any]) -> ColumnElement[bool]:
    """(k1, k2, ...) after (v1, v2, ...), spelt out so that mixed directions work everywhere."""
    alternatives = []
    for position, key in enumerate(keys):
        equal_prefix = [
            earlier.column == value for earlier, value in zip(keys[:position], values, strict=False)
        ]
        beyond = key.column < values[position] if key.descending else key.column > values[position]
        alternatives.append(and_(*equal_prefix, beyond))
    return or_(*alternatives)


def paginate(
    session: Session,
    statement: SelectOfScalar[Row],
    keys: list[SortKey],
    cursor: str | None,
    limit: int,
    *,
    scope: Scope,
    bound: ByteBound | None = None,
) -> tuple[list[Row], str | None]:
    """One page of ``statement`` in ``keys`` order, and the cursor of the next page.

    ``scope`` is what ``statement`` limits the list to (its tenant, or its project, and the
    kind of item): the cursor is good for that list alone. A project's id stands for its
    tenant (a project is one tenant's); ids go into no cursor, only into the seal's check.

    With a ``bound``, a list whose items are documents (up to a body each) also ends its page
    before the item that would take its bytes past ``bound.most`` (the first item always goes
    in, whatever its size); the cursor then continues right after the last item given."""
    seal = cursor_seal(session)
    if cursor is not None:
        statement = statement.where(_after(keys, decode_cursor(seal, keys, scope, cursor)))
    ordered = statement.order_by(*ordering(keys))
    if bound is not None:
        return _page_within(session, seal, ordered, keys, limit, scope, bound)
    rows = list(session.exec(ordered.limit(limit + 1)))
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    return rows, encode_cursor(seal, keys, scope, rows[-1])


def _page_within(
    session: Session,
    seal: CursorSeal,
    ordered: SelectOfScalar[Row],
    keys: list[SortKey],
    limit: int,
    scope: Scope,
    bound: ByteBound,
) -> tuple[list[Row], str | None]:
    """``paginate`` of a list with a ``bound``: the rows' positions and sizes first, without
    their documents, then only the rows that fit. Loading 500 rows and cutting after would
    hold 500 documents of up to a body each (234 MB for 60 of 3.9 MB) in the worker."""
    entity = ordered.column_descriptions[0]["entity"]
    (identity,) = inspect(entity).primary_key
    # Labelled: a select drops a column it names twice (the identity may be a sort key).
    sized = ordered.with_only_columns(
        identity.label("page_identity"),
        *(key.column.label(f"page_key_{index}") for index, key in enumerate(keys)),
        bound.size.label("page_size"),
    ).limit(limit + 1)
    positions = session.execute(sized).all()
    taken = total = 0
    for _identity, *_position, size in positions[:limit]:
        if taken and total + size > bound.most:
            break
        total += size
        taken += 1
    if not taken:
        return [], None
    # By their ids: exactly the rows measured, even if a write came between the statements.
    chosen = [position[0] for position in positions[:taken]]
    by_ids = select(entity).where(identity.in_(chosen)).options(*bound.options)
    rows = list(session.exec(by_ids.order_by(*ordering(keys))))
    if taken == len(positions):
        return rows, None
    last = positions[taken - 1][1:-1]
    types = [key.value_type for key in keys]
    return rows, encode_position(seal, list_name_of(keys), scope, types, last)
