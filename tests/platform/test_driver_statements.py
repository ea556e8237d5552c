"""``DriverStatement``: statements run on the driver's own cursor, one kept per connection."""

from typing import Any

import pytest
from sqlalchemy import (
    Integer,
    LargeBinary,
    Text,
    bindparam,
    func,
    literal,
    select,
    text,
    update,
)
from sqlalchemy.exc import DBAPIError
from sqlalchemy.types import TypeDecorator

from app.core.db import _DRIVER_CURSOR, _KEPT_VALUE_BYTES, DriverStatement, table_of
from app.projects.models import Project

FAILING = DriverStatement(text("SELECT * FROM no_such_table"))
ONE = DriverStatement(text("SELECT 1"))


def test_a_statement_that_fails_leaves_its_connection_able_to_run_the_next(app):
    """SQLAlchemy closes the cursor of a statement that failed; the connection's next statement
    must not be given that closed cursor."""
    with app.state.database.writer.connect() as connection:
        assert ONE.rows(connection, {}) == [(1,)]
        with pytest.raises(DBAPIError):
            FAILING.rows(connection, {})
        connection.rollback()
        assert ONE.rows(connection, {}) == [(1,)]


def test_a_cursor_given_a_large_document_is_closed_rather_than_kept(app):
    """psycopg's cursor holds its last statement's values: a connection idle in the pool must
    not keep a document alive through it. A document column's value reaches the driver
    wrapped (a ``memoryview`` for sqlite3, psycopg's ``Binary``), as a stored file's does."""
    length = DriverStatement(
        text("SELECT length(:content)").bindparams(bindparam("content", type_=LargeBinary))
    )
    for size in (100, _KEPT_VALUE_BYTES + 1):
        with app.state.database.writer.connect() as connection:
            info = connection.connection.info
            assert ONE.rows(connection, {}) == [(1,)]
            kept = info[_DRIVER_CURSOR]
            assert length.rows(connection, {"content": b"x" * size}) == [(size,)]
            if size > _KEPT_VALUE_BYTES:
                assert _DRIVER_CURSOR not in info
                assert ONE.rows(connection, {}) == [(1,)]
                assert info[_DRIVER_CURSOR] is not kept
            else:
                assert info[_DRIVER_CURSOR] is kept
            connection.rollback()


def test_a_cursor_that_fetched_many_rows_is_closed_rather_than_kept(app):
    """psycopg's cursor holds its last result too: a read of many rows (the pack's candidates)
    must not stay alive in an idle connection's cursor. A row or none keeps it."""
    numbers = DriverStatement(
        text(
            "SELECT n FROM (SELECT 1 AS n UNION ALL SELECT 2 UNION ALL SELECT 3) AS t"
            " WHERE n <= :upto ORDER BY n"
        )
    )
    with app.state.database.reader.connect() as connection:
        info = connection.connection.info
        assert ONE.rows(connection, {}) == [(1,)]
        kept = info[_DRIVER_CURSOR]
        assert numbers.rows(connection, {"upto": 0}) == []
        assert numbers.rows(connection, {"upto": 1}) == [(1,)]
        assert info[_DRIVER_CURSOR] is kept
        assert numbers.rows(connection, {"upto": 3}) == [(1,), (2,), (3,)]
        assert _DRIVER_CURSOR not in info
        connection.rollback()


def test_a_cursor_that_fetched_a_large_value_is_closed_rather_than_kept(app):
    """A row read whole (a write's look-up of a document's row) holds the document: psycopg's
    cursor would keep it alive in an idle connection until that connection's next statement.
    The value is made by the database: the statement is given only its size."""
    for size in (100, _KEPT_VALUE_BYTES + 1):
        with app.state.database.writer.connect() as connection:
            info = connection.connection.info
            assert ONE.rows(connection, {}) == [(1,)]
            kept = info[_DRIVER_CURSOR]
            text_of_size = DriverStatement(text(_TEXT_OF_SIZE[connection.dialect.name]))
            assert text_of_size.rows(connection, {"size": size}) == [("x" * size,)]
            if size > _KEPT_VALUE_BYTES:
                assert _DRIVER_CURSOR not in info
            else:
                assert info[_DRIVER_CURSOR] is kept
            connection.rollback()


# A text of ``:size`` characters, made by the database.
_TEXT_OF_SIZE = {
    "sqlite": "SELECT printf('%.*c', :size, 'x')",
    "postgresql": "SELECT repeat('x', :size)",
}


def _typed_text_of_size(dialect: str) -> DriverStatement:
    size = bindparam("size", type_=Integer)
    made = {
        "sqlite": func.printf("%.*c", size, literal("x"), type_=Text),
        "postgresql": func.repeat(literal("x"), size, type_=Text),
    }[dialect]
    return DriverStatement(select(made.label("made"), bindparam("content", type_=LargeBinary)))


class _BytesOverInteger(TypeDecorator[bytes]):
    """A decorator may bind anything, whatever its implementation's type."""

    impl = Integer
    cache_ok = True

    def process_bind_param(self, value: bytes | None, dialect: object) -> bytes | None:
        return value


def test_a_large_value_given_and_not_returned_closes_the_cursor(app):
    """A statement sent a large value in a bytes parameter, a variant that is bytes on this
    database, or through a type decorator, whose result holds only a number: the value alone
    closes the cursor. The parameter's name has a dot, which PostgreSQL's driver takes escaped
    and SQLite's by position: it is bound all the same. (PostgreSQL casts a value to its
    parameter's declared type: bytes over an integer only on SQLite.)"""
    types: list[Any] = [
        LargeBinary(),
        Integer().with_variant(LargeBinary(), "sqlite", "postgresql"),
    ]
    if app.state.database.writer.dialect.name == "sqlite":
        types.append(_BytesOverInteger())
    for type_ in types:
        length = DriverStatement(select(func.length(bindparam("the.content", type_=type_))))
        for size, kept_after in ((100, True), (_KEPT_VALUE_BYTES + 1, False)):
            with app.state.database.writer.connect() as connection:
                info = connection.connection.info
                assert ONE.rows(connection, {}) == [(1,)]
                kept = info[_DRIVER_CURSOR]
                assert length.rows(connection, {"the.content": b"y" * size}) == [(size,)]
                assert (info.get(_DRIVER_CURSOR) is kept) is kept_after, (type_, size)
                connection.rollback()


def test_a_typed_statement_looks_at_its_text_and_bytes_for_a_large_value(app):
    """A Core statement's values and columns of number types are not looked at (a decision's
    append looked at 33 values, 8 of which can hold text or bytes): a large value in its bytes
    parameter or in its text column still closes the cursor."""
    cases = [(100, 100, True), (_KEPT_VALUE_BYTES + 1, 1, False), (1, _KEPT_VALUE_BYTES + 1, False)]
    for made, sent, kept_after in cases:
        with app.state.database.writer.connect() as connection:
            info = connection.connection.info
            statement = _typed_text_of_size(connection.dialect.name)
            assert ONE.rows(connection, {}) == [(1,)]
            kept = info[_DRIVER_CURSOR]
            content = b"y" * sent
            assert statement.rows(connection, {"size": made, "content": content}) == [
                ("x" * made, content)
            ]
            assert (info.get(_DRIVER_CURSOR) is kept) is kept_after, (made, sent)
            connection.rollback()


class _DescriptionCounted:
    """The driver's cursor, counting the reads of its description (psycopg builds a column
    object for each column at each read)."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor
        self.description_reads = 0

    @property
    def description(self) -> Any:
        self.description_reads += 1
        return self._cursor.description

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


def test_a_core_statement_reads_the_drivers_description_until_it_is_described_only(app):
    """A SELECT's rows are fetched without the description once its result processors are
    chosen; a change without RETURNING fetches nothing and reads none; a ``TextClause``, whose
    rows only the description tells of, reads it each time."""
    selected = DriverStatement(select(literal(7, Integer).label("seven")))
    changed = DriverStatement(
        update(table_of(Project)).where(table_of(Project).c.id == -1).values(name="none")
    )
    with app.state.database.writer.connect() as connection:
        driver = connection.connection
        counted = _DescriptionCounted(driver.cursor())
        driver.info[_DRIVER_CURSOR] = counted
        assert [selected.rows(connection, {}) for _ in range(3)] == [[(7,)]] * 3
        assert counted.description_reads == 1
        assert [changed.rows(connection, {}) for _ in range(2)] == [[], []]
        assert counted.description_reads == 1
        assert [ONE.rows(connection, {}) for _ in range(2)] == [[(1,)]] * 2
        assert counted.description_reads == 3
        assert driver.info[_DRIVER_CURSOR] is counted
        connection.rollback()
