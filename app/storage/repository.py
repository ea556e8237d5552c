"""The repository every project-scoped table shares: one row by the project and its key,
added, deleted. Each statement is built once per table, its values bound at each call."""

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Generic, cast

from sqlalchemy import (
    ColumnElement,
    Connection,
    Executable,
    ScalarSelect,
    bindparam,
    case,
    delete,
    inspect,
    update,
)
from sqlalchemy import Select as RowsSelect
from sqlalchemy import select as select_rows
from sqlalchemy.orm import (
    Mapped,
    QueryableAttribute,
    configure_mappers,
    defer,
    make_transient_to_detached,
)
from sqlalchemy.orm.attributes import set_committed_value
from sqlalchemy.orm.exc import StaleDataError
from sqlalchemy.orm.interfaces import ORMOption
from sqlmodel import Session, SQLModel, select
from sqlmodel.sql.expression import Select, SelectOfScalar

from app.core.db import (
    DriverStatement,
    RowT,
    WriteSession,
    connection_of,
    insert_bound,
    session_of,
    table_of,
)


class ProjectScopedRepository(Generic[RowT]):
    """A table whose rows belong to a project (``project_id``) and are named within it by
    ``key`` (column names; none for a project's single row). Every look-up is scoped by the
    project here, so that no caller can reach another project's row (or tenant's: a write's
    project comes from ``Write``, a read's from ``project_id``, both scoped by tenant)."""

    model: ClassVar[type[SQLModel]]
    key: ClassVar[tuple[str, ...]] = ()
    read_along: ClassVar[ScalarSelect[Any] | None] = None
    """A value some writes need with the row, read in its locking look-up (``locked_with``):
    a scalar subquery of another table correlated to this one, whose parameters the caller
    binds (None: the table has none)."""
    documents: ClassVar[Mapping[str, ColumnElement[int] | Mapped[int]]] = {}
    """The row's documents a client downloads, by column, each with its size in bytes as an
    expression of the row (a size column, or the column's ``length``, for which neither
    database reads the value: SQLite reads a blob's header, PostgreSQL its TOAST pointer):
    ``get_within`` reads such a document only when it is not too large."""
    _lookups: ClassVar[dict[bool, SelectOfScalar[Any]]]
    _lookups_within: ClassVar[dict[str, RowsSelect[Any]]]
    # The locking look-up with ``read_along``: through the ORM session, and on the connection.
    _lookup_along: ClassVar[Select[SQLModel, Any]]
    _driver_lookup_along: ClassVar[DriverStatement]
    # The same look-ups on a write's connection, before it has an ORM session, and the
    # attributes their columns fill, in order.
    _driver_lookups: ClassVar[dict[bool, DriverStatement]]
    _attributes: ClassVar[tuple[str, ...]]
    # The INSERTs ``create`` and the UPDATEs ``store`` have run, by the columns they set.
    _inserts: ClassVar[dict[frozenset[str], DriverStatement]]
    _updates: ClassVar[dict[frozenset[str], DriverStatement]]
    _delete_by_id: ClassVar[DriverStatement]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        table = table_of(cls.model)
        conditions = [table.c[name] == bindparam(name) for name in ("project_id", *cls.key)]
        lookup = select(cls.model).where(*conditions)
        cls._lookups = {False: lookup, True: lookup.with_for_update()}
        cls._lookups_within = {
            name: within(
                select_rows(cls.model).where(*conditions),
                getattr(cls.model, name),
                size,
                # A row's other documents are not what is downloaded: never read (a state's
                # GET read its backup, up to the body limit or beyond, whatever its size).
                [getattr(cls.model, other) for other in cls.documents if other != name],
            )
            for name, size in cls.documents.items()
        }
        driver_lookup = table.select().where(*conditions)
        cls._driver_lookups = {
            False: DriverStatement(driver_lookup),
            True: DriverStatement(driver_lookup.with_for_update()),
        }
        if cls.read_along is not None:
            cls._lookup_along = (
                select(cls.model, cls.read_along).where(*conditions).with_for_update(of=cls.model)
            )
            cls._driver_lookup_along = DriverStatement(
                table.select()
                .add_columns(cls.read_along)
                .where(*conditions)
                .with_for_update(of=table)
            )
        mapper = inspect(cls.model)
        cls._attributes = tuple(mapper.get_property_by_column(c).key for c in table.columns)
        cls._inserts = {}
        cls._updates = {}
        cls._delete_by_id = DriverStatement(delete(table).where(table.c.id == bindparam("row_id")))

    def __init__(self, session: Session | WriteSession) -> None:
        self._source = session

    @property
    def session(self) -> Session:
        """The ORM session: a read's, or a write's (made on its first use)."""
        return session_of(self._source)

    def connection(self) -> Connection:
        """The connection of the session's transaction, for prebuilt statements (a write's
        own, without making its ORM session)."""
        return connection_of(self._source)

    def get(self, project_id: int, *key: Any, for_update: bool = False) -> RowT | None:
        """The row, locked until commit when ``for_update`` (SQLite: the writer holds the
        whole database already)."""
        parameters = self._parameters(project_id, key)
        found = self._look_up(
            self._driver_lookups[for_update], self._lookups[for_update], parameters
        )
        row: RowT | None = None if found is None else found[0]
        return row

    def get_within(
        self, project_id: int, *key: Any, document: str, up_to: int
    ) -> tuple[RowT, int] | None:
        """The row (as ``get``) and the size of its ``document`` (one of ``documents``), whose
        bytes are read only if they are at most ``up_to``: else the row's attribute is left
        unread (reading it raises), for a download that must take a turn before it reads them.
        One statement either way, as ``get``."""
        parameters = {**self._parameters(project_id, key), "up_to": up_to}
        return self.read_within(self._lookups_within[document], parameters, document)

    def read_within(
        self, statement: RowsSelect[Any], parameters: Mapping[str, Any], document: str
    ) -> tuple[RowT, int] | None:
        """The first row of a statement made by ``within`` (``document`` its column's name),
        and its document's size; the document's bytes set as the row's when they were read."""
        found = self.session.execute(statement, parameters).first()
        if found is None:
            return None
        row, size, content = found
        if content is not None:
            set_committed_value(row, document, content)
        return row, size

    def locked_with(self, project_id: int, *key: Any, **bound: Any) -> tuple[RowT | None, Any]:
        """As ``get(..., for_update=True)``, and ``read_along``'s value for the row (``bound``
        its parameters; None without a row), in the same statement: a round trip fewer than
        reading it after. Read after the project's lock, which every write takes first in a
        statement of its own, so that every write that changed the value before has committed
        (on PostgreSQL, each statement of a READ COMMITTED transaction sees what had committed
        when it began)."""
        if self.read_along is None:
            raise TypeError(f"{type(self).__name__} reads nothing along its rows")
        # The project and the key last: no caller's binding can widen the look-up's scope.
        parameters = {**bound, **self._parameters(project_id, key)}
        found = self._look_up(self._driver_lookup_along, self._lookup_along, parameters)
        return (None, None) if found is None else (found[0], found[1])

    def _look_up(
        self, driver: DriverStatement, lookup: Executable, parameters: Mapping[str, Any]
    ) -> tuple[Any, ...] | None:
        """The look-up's first row: this table's row, then whatever it reads after the row's
        columns. A write that has no ORM session yet reads it on its connection, without
        making one (a handover's or an iteration's append then makes none): the row is
        detached, as the session would have loaded it, and the write's ``WriteSession``
        keeps it for the session it may make later."""
        source = self._source
        if isinstance(source, WriteSession) and not source.made:
            found = driver.first(source.connection, parameters)
            if found is None:
                return None
            width = len(self._attributes)
            return (source.loaded(self._detached(found[:width])), *found[width:])
        in_session = self.session.execute(lookup, parameters).first()
        return None if in_session is None else tuple(in_session)

    def _parameters(self, project_id: int, key: tuple[Any, ...]) -> dict[str, Any]:
        return {"project_id": project_id, **dict(zip(self.key, key, strict=True))}

    @classmethod
    def _detached(cls, values: tuple[Any, ...]) -> RowT:
        """A row of these column values as the ORM loads one (no ``__init__``, the values as
        stored, no change pending), with its identity, in no session."""
        mapper = inspect(cls.model)
        if not mapper.configured:
            # The ORM completes its mappings on its first use, which may come after this (a
            # server's first request an append, with auth off): a row needs them complete.
            configure_mappers()
        row: RowT = mapper.class_manager.new_instance()
        row.__dict__.update(zip(cls._attributes, values, strict=True))
        make_transient_to_detached(row)
        return row

    def add(self, row: RowT) -> RowT:
        self.session.add(row)
        self.session.flush()
        return row

    def create(self, columns: Mapping[str, Any]) -> int:
        """A new row of ``columns``, in one prebuilt INSERT (built once per set of column names)
        without the ORM's unit of work, which cost more than the statement; returns its id.
        ``columns`` are all the row has: only the database's own defaults fill in the rest,
        never the model's."""
        statement = prebuilt(self._inserts, self._insert_of, columns)
        ((row_id,),) = statement.rows(self.connection(), columns)
        return int(row_id)

    def store(self, row: RowT, columns: Mapping[str, Any]) -> None:
        """Write ``columns`` of a row stored already, by its id, in one prebuilt UPDATE (the unit
        of work's flush cost as much again as the statement), and give ``row`` their new values
        as its stored ones, so that the commit has nothing more to write. The row must still be
        there (the write holds it locked): if not, ``StaleDataError``, as the ORM's flush
        raises, rather than a change silently lost."""
        statement = prebuilt(self._updates, self._update_of, columns)
        row_id = row.id  # type: ignore[attr-defined]  # every project-scoped table has its id
        if not statement.rows(self.connection(), {"row_id": row_id, **columns}):
            raise StaleDataError(f"{self.model.__name__} {row_id} was not there to update")
        for name, value in columns.items():
            set_committed_value(row, name, value)

    def create_many(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """New rows, each of the same columns (as ``create``'s), in one prebuilt INSERT run
        over them all (the driver's ``executemany``)."""
        if rows:
            statement = prebuilt(self._inserts, self._insert_of, rows[0])
            statement.run_many(self.connection(), rows)

    def store_many(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """``store`` for rows of the same columns, each by its ``row_id``, in one prebuilt
        UPDATE run over them all. For rows the write has read under its lock, and not loaded
        into its ORM session (whose copies would not see the change)."""
        if rows:
            columns = {name: value for name, value in rows[0].items() if name != "row_id"}
            statement = prebuilt(self._updates, self._update_of, columns)
            statement.run_many(self.connection(), rows)

    def delete_many(self, row_ids: Sequence[int]) -> None:
        """The rows of these ids, in one prebuilt DELETE run over them all; as ``store_many``,
        for rows not in the ORM session."""
        self._delete_by_id.run_many(self.connection(), [{"row_id": row_id} for row_id in row_ids])

    @classmethod
    def _insert_of(cls, names: frozenset[str]) -> DriverStatement:
        table = table_of(cls.model)
        return DriverStatement(insert_bound(table, sorted(names)).returning(table.c.id))

    @classmethod
    def _update_of(cls, names: frozenset[str]) -> DriverStatement:
        table = table_of(cls.model)
        return DriverStatement(
            update(table)
            .where(table.c.id == bindparam("row_id"))
            .values({name: bindparam(name) for name in sorted(names)})
            .returning(table.c.id)
        )

    def delete(self, row: RowT) -> None:
        self.session.delete(row)
        self.session.flush()


def unread_columns(*columns: Mapped[Any]) -> list[ORMOption]:
    """Options that leave ``columns`` out of a statement's rows (reading one raises rather
    than load it unseen): a list of summaries reads none of its rows' documents, each up to a
    body or the bulk limit (a page of 500 saves loaded them all to answer a few KB)."""
    # ``col`` types a column as Mapped; at runtime it is the class's attribute, as defer takes.
    return [defer(cast(QueryableAttribute[Any], column), raiseload=True) for column in columns]


def within(
    statement: RowsSelect[Any],
    document: Mapped[Any],
    size: ColumnElement[int] | Mapped[int],
    unread: Sequence[Mapped[Any]] = (),
) -> RowsSelect[Any]:
    """``statement`` of a table's rows with two columns more: ``size``, and ``document``'s
    bytes when ``size`` is at most the bound ``up_to`` (else NULL); the row's own attribute
    for it, and those of ``unread``, are never loaded (reading one raises rather than load
    bytes unseen)."""
    return statement.add_columns(size, case((size <= bindparam("up_to"), document))).options(
        *unread_columns(document, *unread)
    )


def prebuilt(
    statements: dict[frozenset[str], DriverStatement],
    build: Callable[[frozenset[str]], DriverStatement],
    columns: Mapping[str, Any],
) -> DriverStatement:
    """The statement for these columns' names, built on first use (two threads racing may both
    build it: one is kept)."""
    names = frozenset(columns)
    statement = statements.get(names)
    if statement is None:
        statement = statements.setdefault(names, build(names))
    return statement
