"""Engines, sessions and the column types every table shares.

SQLite allows one writer at a time. Rather than letting concurrent writers collide on
"database is locked", writes go through a dedicated engine with exactly one connection whose
transactions start with ``BEGIN IMMEDIATE``: writers queue in this process, take the file's
write lock up front, and wait out other processes with ``busy_timeout``. Reads use their own
pool and never block writers (WAL). PostgreSQL needs none of this: both roles share one pool.
"""

import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from operator import itemgetter
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import (
    BigInteger,
    Connection,
    DateTime,
    Engine,
    Insert,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    bindparam,
    create_engine,
    event,
    insert,
    inspect,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect, make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.pool import QueuePool
from sqlalchemy.sql import sqltypes
from sqlalchemy.sql.expression import ReturnsRows, TextClause
from sqlalchemy.types import TypeDecorator, TypeEngine
from sqlmodel import Session, SQLModel

from app.core.checkpoints import BACKSTOP_PAGES, WalCheckpoints
from app.core.config import Settings, sqlite_file
from app.core.cursors import CursorSeal
from app.core.write_turns import WriteTurns

log = logging.getLogger(__name__)

# Constraint names are part of the schema that migrations manage: make them deterministic.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
SQLModel.metadata.naming_convention = NAMING_CONVENTION
metadata: MetaData = SQLModel.metadata

# A table's row, as a repository or a write's session gives it.
RowT = TypeVar("RowT", bound=SQLModel)

# Where a session made by ``Database`` names it (``session.info``): every list reads through
# a session, so ``paginate`` finds its database's cursor seal there, one per database and so
# per app (a process may serve two, as the tests' SQLite and PostgreSQL apps do).
DATABASE = "database"

# A 64-bit surrogate key; SQLite only auto-increments a column declared INTEGER.
BigIntPK = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that is always timezone-aware UTC on the way in and out.

    SQLite has no time zones and hands back naive values; refusing naive input keeps a local
    time from ever being stored as if it were UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    @property
    def python_type(self) -> type[datetime]:
        return datetime

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given where a UTC timestamp is required")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class SearchableText(TypeDecorator[str]):
    """Text copied out of a document into a column that lists filter on.

    The document keeps its exact text; the column only has to find it. PostgreSQL text holds
    neither NUL nor lone surrogates, so those become U+FFFD here, on the way in and in every
    comparison (the same rule applies to a filter's value, so a search still matches), and
    its indexes no long text, so the column keeps the first ``INDEXED_CHARACTERS``.
    """

    impl = String()
    cache_ok = True

    @property
    def python_type(self) -> type[str]:
        return str

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return None if value is None else indexed(value)


class SearchableLongText(SearchableText):
    """SearchableText in an unbounded TEXT column, whole (no B-tree index holds it)."""

    impl = Text()
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return None if value is None else searchable(value)


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def searchable(text: str) -> str:
    return _UNSTORABLE.sub("\ufffd", text)


# PostgreSQL's B-tree index takes a row of at most 2,704 bytes: an indexed column's copy of a
# document's text keeps this many characters of it (2,048 bytes of UTF-8 at most), and so does
# a value compared with it. A save whose project name was 3,000 characters was a 500.
INDEXED_CHARACTERS = 512


def indexed(text: str) -> str:
    """``text`` as an indexed column holds it: storable, and its first ``INDEXED_CHARACTERS``."""
    return searchable(text[:INDEXED_CHARACTERS])


def table_of(model: type[SQLModel]) -> Table:
    """A table model's Core table: for statements built once and run outside the ORM."""
    table: Table = model.__table__  # type: ignore[attr-defined]  # SQLModel sets it (table=True)
    return table


def insert_bound(table: Table, names: Iterable[str]) -> Insert:
    """An INSERT of the columns ``names``, each value bound by its column's name: a row as a
    ``DriverStatement`` takes it, by its columns' values."""
    # Inline: PostgreSQL's dialect would add a RETURNING of the new row's id, which the
    # server then sends and the driver holds, for a statement whose rows nobody reads; a
    # caller that wants the id asks for it (``.returning``).
    return insert(table).values({name: bindparam(name) for name in names}).inline()


def utcnow() -> datetime:
    return datetime.now(UTC)


def conflict_insert(session: Session, model: Any) -> postgresql.Insert | sqlite.Insert:
    """An INSERT of the session's database, whose ``on_conflict_*`` clauses both dialects
    spell alike (the generic INSERT has none)."""
    if session.get_bind().dialect.name == "sqlite":
        return sqlite.insert(model)
    return postgresql.insert(model)


# The driver cursor DriverStatements run on, one kept per driver connection (in its ``info``,
# which lives as long as that connection): a new psycopg cursor builds its parameter and result
# adapters again, 15-35 µs a statement here. Not after a statement given a large value or
# fetching one (a write's look-up of a document's row), nor one that fetched more than a row:
# psycopg's cursor holds its last statement's values and result until the next, and an idle
# pooled connection would keep a document, or a read's rows (the pack's 500 candidates, each
# up to 100,000 characters of text), alive; nor after an executemany.
_DRIVER_CURSOR = "driver_statement_cursor"
_KEPT_VALUE_BYTES = 64 * 1024


_SIZED = (bytes, bytearray, memoryview, str)
# Values that never wrap another: looked past at once (a missing attribute's look-up raises
# and catches inside ``getattr``, the dearest step of this check).
_PLAIN = frozenset({int, float, bool, type(None), datetime})
# Types whose values are never large (numbers, truth values, times): a statement's values and
# result columns of these types are not looked at. A decision's append looked at 33 values,
# 2.3% of its POST's instructions (callgrind, 2026-11-26), of which 8 can be text or bytes.
_NEVER_LARGE = (
    sqltypes.Integer,
    sqltypes.Numeric,
    sqltypes.Boolean,
    sqltypes.DateTime,
    sqltypes.Date,
    sqltypes.Time,
    sqltypes.Interval,
)


def _may_be_large(type_: TypeEngine[Any], dialect: Dialect) -> bool:
    """By the type as the dialect has it (a variant resolved); a type decorator's may bind
    anything, whatever its implementation's type."""
    type_ = type_.dialect_impl(dialect)
    return isinstance(type_, TypeDecorator) or not isinstance(type_, _NEVER_LARGE)


def _is_large(value: Any) -> bool:
    """Whether a value is over the limit, as the driver has it: a ``LargeBinary``'s bytes
    arrive as a ``memoryview`` (sqlite3) or wrapped in psycopg's ``Binary`` (``obj``)."""
    if isinstance(value, _SIZED):
        return len(value) > _KEPT_VALUE_BYTES
    if type(value) in _PLAIN:
        return False
    wrapped = getattr(value, "obj", None)
    return isinstance(wrapped, _SIZED) and len(wrapped) > _KEPT_VALUE_BYTES


def _holds_large_value(values: Any, keys: Sequence[Any] | None) -> bool:
    """Whether the values at ``keys`` (names, or positions; None: all of them) of a statement's
    values or a fetched row hold one over the limit."""
    if keys is None:
        return any(map(_is_large, values.values() if isinstance(values, dict) else values))
    return any(_is_large(values[key]) for key in keys)


class DriverStatement:
    """A Core statement that every write runs (the key's confirmation, the project's upsert, an
    append's own), or a read that runs on every request of its route (a project's id, the
    pack's candidates), compiled once per dialect and run on a driver cursor of the connection (the
    one it keeps, ``_DRIVER_CURSOR``), in its transaction. SQLAlchemy's execution around a
    cached statement (its context, the parameters and the result objects) cost 30-45 µs a
    statement over the driver's own call here, more than SQLite spends running it. Bound values
    go through their types' processors and result values through theirs, as SQLAlchemy's would;
    the engine's ``before_cursor_execute`` listeners see the statement; a driver error is
    SQLAlchemy's error, as from ``execute``, and a lost connection is invalidated. Only
    statements whose values are all bound explicitly (no column defaults filled in by
    SQLAlchemy at execution) belong here."""

    def __init__(self, statement: ReturnsRows | TextClause) -> None:
        self.statement = statement
        self._compiled: dict[str, _CompiledStatement] = {}

    def rows(self, connection: Connection, parameters: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        compiled = self._compiled_for(connection.dialect)
        fetched = self._run(connection, compiled, compiled.values(parameters), many=False)
        return compiled.results(fetched)

    def run_many(self, connection: Connection, parameter_sets: Sequence[Mapping[str, Any]]) -> None:
        """The statement once for each set of parameters (an INSERT of many rows), in one call
        of the driver's ``executemany``; a single set as ``rows`` runs it (psycopg's
        ``executemany`` enters pipeline mode, which costs a synchronisation more)."""
        if len(parameter_sets) == 1:
            self.rows(connection, parameter_sets[0])
        elif parameter_sets:
            compiled = self._compiled_for(connection.dialect)
            values = [compiled.values(each) for each in parameter_sets]
            self._run(connection, compiled, values, many=True)

    def _compiled_for(self, dialect: Dialect) -> "_CompiledStatement":
        compiled = self._compiled.get(dialect.name)
        if compiled is None:
            compiled = self._compiled[dialect.name] = _CompiledStatement(self.statement, dialect)
        return compiled

    @staticmethod
    def _run(
        connection: Connection, compiled: "_CompiledStatement", values: Any, *, many: bool
    ) -> Sequence[Any]:
        """Run on the connection's driver cursor: ``values`` one set, or (``many``) a list of
        them. Returns what the driver fetched (nothing, when run many)."""
        driver = connection.connection
        # Taken out while in use; a statement that fails leaves it out (SQLAlchemy closes it).
        cursor = driver.info.pop(_DRIVER_CURSOR, None) or driver.cursor()
        try:
            for listener in connection.dispatch.before_cursor_execute:
                listener(connection, cursor, compiled.sql, values, None, many)
            fetched: Sequence[Any] = []
            if many:
                cursor.executemany(compiled.sql, values)
            else:
                cursor.execute(compiled.sql, values)
                if compiled.returns_rows is None or not compiled.described:
                    # Read once, and only until the statement is described: psycopg builds
                    # its list of columns at each read.
                    description = cursor.description
                    if description is not None:
                        fetched = cursor.fetchall()
                        compiled.describe(description)
                elif compiled.returns_rows:
                    fetched = cursor.fetchall()
        except BaseException as exc:
            # SQLAlchemy's own handling, as its execute has it (private, but the one path that
            # does all of it): the driver's error wrapped as SQLAlchemy's (which the error
            # handlers answer), ``handle_error`` listeners, and on a lost connection this one
            # invalidated and every connection the pool held before it replaced at checkout.
            connection._handle_dbapi_exception(exc, compiled.sql, values, cursor, None)
        if (
            many
            or len(fetched) > 1
            or _holds_large_value(values, compiled.sized_values)
            or (fetched and _holds_large_value(fetched[0], compiled.sized_columns))
        ):
            cursor.close()
        else:
            driver.info[_DRIVER_CURSOR] = cursor
        return fetched

    def first(
        self, connection: Connection, parameters: Mapping[str, Any]
    ) -> tuple[Any, ...] | None:
        found = self.rows(connection, parameters)
        return found[0] if found else None


class _CompiledStatement:
    """A statement's SQL for one dialect, the order of its parameters and their processors."""

    def __init__(self, statement: ReturnsRows | TextClause, dialect: Dialect) -> None:
        self._compiled = statement.compile(dialect=dialect)
        self.sql = self._compiled.string
        # Each bind parameter under its name in the values ``construct_params`` makes: an
        # anonymous bind's resolved, and escaped where the dialect escapes it (a name with a
        # dot or a space), as the order, the processors and the look for large values take it.
        escaped = self._compiled.escaped_bind_names
        given = {escaped.get(name, name): bind for bind, name in self._compiled.bind_names.items()}
        order = (
            [escaped.get(name, name) for name in self._compiled.positiontup or ()]
            if dialect.positional
            else None
        )
        self._ordered = None if order is None else _picker(order)
        self._binds = {
            name: processor
            for name, bind in given.items()
            if (processor := bind.type.dialect_impl(dialect).bind_processor(dialect)) is not None
        }
        self._dialect = dialect
        # A SELECT's columns, or an INSERT's RETURNING (none without one).
        self._columns = list(getattr(statement, "exported_columns", ()))  # none in a TextClause
        # Whether it returns rows: a SELECT and a RETURNING do, any other Core statement not;
        # of a TextClause only the driver's description tells (None).
        self.returns_rows = None if isinstance(statement, TextClause) else bool(self._columns)
        # Where a value over the kept cursor's limit may be: the values' names (or positions)
        # and the result's positions of the types that may hold one (None: look at all).
        self.sized_values: list[Any] | None = (
            [name for name, bind in given.items() if _may_be_large(bind.type, dialect)]
            if order is None
            else [
                index
                for index, name in enumerate(order)
                if _may_be_large(given[name].type, dialect)
            ]
        )
        self.sized_columns: list[int] | None = (
            [
                index
                for index, column in enumerate(self._columns)
                if _may_be_large(column.type, dialect)
            ]
            if self._columns
            else None
        )
        # Their result processors, known at the first rows fetched: a type's may depend on the
        # driver's type of the column (PostgreSQL's float8 or numeric for a Float).
        self._results: list[Any] | None = None
        self.described = not self._columns

    def describe(self, description: Sequence[Any]) -> None:
        """The result processors, from the driver's description of the first rows fetched."""
        if self.described:
            return
        processors = [
            column.type.dialect_impl(self._dialect).result_processor(self._dialect, described[1])
            for column, described in zip(self._columns, description, strict=True)
        ]
        self._results = processors if any(processors) else None
        self.described = True

    def values(self, parameters: Mapping[str, Any]) -> Any:
        values = self._compiled.construct_params(parameters)
        for name, processor in self._binds.items():
            if name in values:
                values[name] = processor(values[name])
        return values if self._ordered is None else self._ordered(values)

    def results(self, fetched: Sequence[Any]) -> list[tuple[Any, ...]]:
        if self._results is None:
            return [tuple(row) for row in fetched]
        processors = self._results
        return [
            tuple(
                value if process is None else process(value)
                for process, value in zip(processors, row, strict=True)
            )
            for row in fetched
        ]


def _picker(names: Sequence[str]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """The values of ``names``, in their order, as a positional driver takes them."""
    if len(names) > 1:
        return itemgetter(*names)  # in C; with one name it gives the value alone
    return lambda values: tuple(values[name] for name in names)


class _Held:
    """The connection a write turn holds, once its first write has checked it out, and how
    many of the pool's connections had been invalidated then."""

    connection: Connection | None = None
    invalidations: int = 0


class WriterConnections:
    """The writer's connections, as a write takes one: from the pool for each write, or, in a
    write turn (``app/core/write_turns.py``), one checked out at the turn's first write and
    returned when the turn ends. A turn's writes run one after another in one thread, so its
    writes after the first skip the pool's checkout and check-in: 117,000 instructions a write
    on SQLite and 133,000 on PostgreSQL (callgrind, a transaction of one statement taken both
    ways, 2026-11-26), 3.5-5.5% of an append's. Between two writes the connection is in no
    transaction: it holds no lock, and a turn returns it within ``TURN_WRITES`` writes. A write
    that raises gives its connection back to the pool at once (one a lost server invalidated
    among them), and the turn's next write checks out another. So does a write after any of
    the pool's connections was invalidated: a write that finds the server gone makes the pool
    replace every connection older than that at checkout, which a connection a turn already
    holds would otherwise escape (its next write failing on it once more)."""

    def __init__(self, engine: Engine, at_turn_end: Callable[[object], None] | None = None) -> None:
        self.engine = engine
        # Run on the driver's connection a turn holds once its last write has ended, before
        # it goes back to the pool: SQLite's WAL rewind (``WalCheckpoints.rewind``).
        self._at_turn_end = at_turn_end
        # A turn's thread holds its ``_Held`` here while the turn runs; a thread running a
        # write outside any turn (a large one) has none.
        self._turns = threading.local()
        self._invalidations = 0
        event.listen(engine, "invalidate", self._invalidated)

    def _invalidated(self, *_connection: object) -> None:
        # Not under a lock: two threads' increments may count as one, and the count has
        # still changed, which is all a turn looks at.
        self._invalidations += 1

    @contextmanager
    def turn(self) -> Iterator[None]:
        """Around a turn's writes, in its thread: the connection its first write checks out
        is returned when the block ends."""
        held = self._turns.held = _Held()
        try:
            yield
        finally:
            self._turns.held = None
            if held.connection is not None:
                try:
                    if self._at_turn_end is not None:
                        self._at_turn_end(held.connection.connection.driver_connection)
                except Exception:
                    # Housekeeping: its failure must not fail the writes queued for the turn's
                    # thread (nor skip returning the connection).
                    log.exception("a write turn's end failed")
                finally:
                    held.connection.close()

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A connection in a transaction: committed when the block succeeds, rolled back when
        it raises (or ended by the block)."""
        held: _Held | None = getattr(self._turns, "held", None)
        if held is None:
            with self.engine.connect() as connection, connection.begin():
                yield connection
            return
        if held.connection is not None and held.invalidations != self._invalidations:
            held.connection.close()
            held.connection = None
        if held.connection is None:
            held.invalidations = self._invalidations
            held.connection = self.engine.connect()
        connection = held.connection
        try:
            with connection.begin():
                yield connection
        except BaseException:
            held.connection = None
            connection.close()
            raise


@dataclass(frozen=True)
class Database:
    reader: Engine
    writer: Engine
    # Where the small writes run, each in its turn (app/core/write_turns.py), on the writer's
    # connections as their turns hold them.
    write_turns: WriteTurns
    writer_connections: WriterConnections
    # The secret the lists' cursors are sealed under (a key is derived from it), read when a
    # list is first paged: a command that pages none never reads (or makes) a key file.
    cursor_secret: Callable[[], bytes]
    # A SQLite file's WAL checkpoints (app/core/checkpoints.py); none on PostgreSQL.
    checkpoints: WalCheckpoints | None = None

    def engines(self) -> dict[str, Engine]:
        """Each engine once, by role (PostgreSQL's one pool serves reads and writes)."""
        if self.writer is self.reader:
            return {"shared": self.reader}
        return {"reader": self.reader, "writer": self.writer}

    def dispose(self) -> None:
        self.write_turns.shutdown()
        if self.checkpoints is not None:
            self.checkpoints.stop()
        for engine in self.engines().values():
            engine.dispose()

    @cached_property
    def cursors(self) -> CursorSeal:
        """The seal of the lists' cursors (app/core/cursors.py)."""
        return CursorSeal(self.cursor_secret())

    @cached_property
    def _snapshot_reader(self) -> Engine:
        """The reader, its transactions each seeing one snapshot: SQLite's WAL read
        transactions always do; PostgreSQL's READ COMMITTED shows each statement the latest
        commits, so a document read as its head and then its parts (a feature's context, a
        run's state) could join a head of one version with the parts of the next, under the
        first's ETag, and an archive mix versions. A read-only transaction never fails to
        serialize, and psycopg sends the level with its BEGIN: no round trip more."""
        if self.reader.dialect.name == "postgresql":
            return self.reader.execution_options(isolation_level="REPEATABLE READ")
        return self.reader

    def read_session(self) -> Session:
        return Session(self._snapshot_reader, expire_on_commit=False, info={DATABASE: self})

    def write_session(self) -> Session:
        return Session(self.writer, expire_on_commit=False, info={DATABASE: self})

    @contextmanager
    def write_connection(self) -> Iterator[Connection]:
        """The writer's connection in a transaction: committed when the block succeeds, rolled
        back when it raises (or ended by the block). A project's writes
        (``app/storage/route.py``), which make an ORM session over it only when they need one."""
        with self.writer_connections.transaction() as connection:
            yield connection

    def write_transaction(self) -> AbstractContextManager[Session]:
        """The writer's session: committed when the block succeeds, rolled back when it
        raises. For the writes that change no project's contents (an API key); a project's
        writes, and its delete's, run on ``write_connection``."""
        return session_scope(self.write_session())


class WriteSession:
    """The ORM session of a write, made on first use, over the write's connection and in its
    transaction: an append that runs only prebuilt statements on the connection never makes
    one (a session's begin, flush, commit and close cost a decision POST 67 µs of its 420 in
    the write, SQLite, in process, 2026-11-26). The write commits the connection; the session
    only flushes into it (``rollback_only``: it never commits the transaction it joined).

    Rows a write reads before it has a session are read on the connection and kept here
    (``loaded``), detached, as the session would have loaded them; a session made later holds
    them as its own, and a change made to one by attribute is written at ``flush`` as the
    session's would be, the session then made for it."""

    def __init__(self, connection: Connection, session: Session | None = None) -> None:
        self.connection = connection
        self._session = session
        # By identity, as a session's identity map holds them.
        self._loaded: dict[Any, SQLModel] = {}

    @property
    def made(self) -> bool:
        return self._session is not None

    def get(self) -> Session:
        if self._session is None:
            self._session = Session(
                bind=self.connection,
                expire_on_commit=False,
                join_transaction_mode="rollback_only",
            )
            for row in self._loaded.values():
                self._session.add(row)
        return self._session

    def loaded(self, row: RowT) -> RowT:
        """A row read on the connection while there is no session (``made`` false), detached
        with its identity: the session, once made, holds it. A row read again is the instance
        read first, with any change made to it since, as a session's identity map gives it."""
        assert self._session is None, "with a session, rows are the session's to load"
        identity = inspect(row).key
        kept = self._loaded.get(identity)
        if isinstance(kept, type(row)):  # an identity names its model
            return kept
        self._loaded[identity] = row
        return row

    def flush(self) -> None:
        """What the session holds, written into the transaction before it commits; a loaded
        row changed by attribute, with no session yet, is written through one made for it."""
        if self._session is None and any(inspect(row).modified for row in self._loaded.values()):
            self.get()
        if self._session is not None:
            self._session.flush()

    def close(self) -> None:
        """The session closed, if one was made (the transaction is the connection's to end).
        For the write's runner (``app/storage/route.py``); a session given here (the archive
        import's own) is its owner's to close."""
        if self._session is not None:
            self._session.close()


def session_of(source: Session | WriteSession) -> Session:
    """A read's session, or a write's (made on its first use)."""
    return source.get() if isinstance(source, WriteSession) else source


def connection_of(source: Session | WriteSession) -> Connection:
    """The connection of a read's session's transaction, or a write's own (without making its
    session): for prebuilt statements."""
    return source.connection if isinstance(source, WriteSession) else source.connection()


# Connections a pool may open beyond one per worker thread: a request's session is ended
# (committed, closed) in a thread of its own, outside the worker limit, so for a moment its
# connection is held while its worker thread already serves the next request.
DB_POOL_MARGIN = 4


class ObservedQueuePool(QueuePool):
    """A QueuePool that counts the threads waiting for a connection now and reports how long
    each waited (``on_wait``, set by the metrics): the queueing the pool's own gauges hide."""

    # Log as the stock QueuePool does, under SQLAlchemy's loggers (quiet below WARNING), not
    # under a logger named after this module.
    _sqla_logger_namespace = "sqlalchemy.pool.impl.QueuePool"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.waiting = 0
        self._waiting_lock = threading.Lock()
        self.on_wait: Callable[[float], None] | None = None

    def _count_waiting(self, change: int) -> None:
        with self._waiting_lock:
            self.waiting += change

    def _do_get(self) -> Any:
        self._count_waiting(1)
        started = time.perf_counter()
        try:
            return super()._do_get()
        finally:
            self._count_waiting(-1)
            if self.on_wait is not None:
                self.on_wait(time.perf_counter() - started)


def _pool_args(settings: Settings) -> dict[str, Any]:
    """Room for one connection per worker thread (and the margin), ``db_pool_size`` kept."""
    capacity = settings.worker_threads + DB_POOL_MARGIN
    kept = min(settings.db_pool_size, capacity)
    return {
        "poolclass": ObservedQueuePool,
        "pool_size": kept,
        "max_overflow": capacity - kept,
        "pool_timeout": settings.db_pool_timeout_seconds,
    }


def ensure_sqlite_directory(database_url: str) -> None:
    """SQLite creates the file but not its directory (``./data`` on a fresh checkout)."""
    path = sqlite_file(database_url)
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)


def _sqlite_engine(settings: Settings, *, writer: bool) -> Engine:
    ensure_sqlite_directory(settings.database_url)
    url = make_url(settings.database_url)
    pool_args = _pool_args(settings)
    if writer:
        pool_args.update(pool_size=1, max_overflow=0)
    engine = create_engine(
        url,
        # Sessions hop between the event loop's threads; each connection is used by one at a time.
        connect_args={"check_same_thread": False},
        hide_parameters=True,
        **pool_args,
    )
    busy_timeout = settings.sqlite_busy_timeout_ms

    @event.listens_for(engine, "connect")
    def configure(dbapi_connection: Any, _record: Any) -> None:
        # pysqlite's own transaction handling defers BEGIN and cannot BEGIN IMMEDIATE;
        # switch it off and emit BEGIN ourselves (SQLAlchemy's documented recipe).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout)}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        if writer:
            # Checkpoints are the checkpoint thread's (create_database); a commit makes one
            # only when that thread has fallen far behind.
            cursor.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_PAGES}")
        cursor.close()

    # The transaction's BEGIN, as the dialect's own ``do_begin`` (which SQLAlchemy calls at
    # every begin, its driver errors wrapped as SQLAlchemy's), rather than the documented
    # recipe's "begin" listener: any connection event makes every Connection of the engine
    # join the engine's events and check them at each step, about 5% of a decision POST's
    # instructions (callgrind, 2026-11-26).
    begin_statement = "BEGIN IMMEDIATE" if writer else "BEGIN"

    def begin(dbapi_connection: Any) -> None:
        dbapi_connection.execute(begin_statement)

    engine.dialect.do_begin = begin  # type: ignore[method-assign]  # this engine's dialect alone: create_engine made it for this engine
    return engine


# Both engines are made with hide_parameters=True: a database error's message then names the
# statement but not its bound values, which are documents and keys, so that a logged error
# (app/core/errors.py) never carries what a client sent.


# A pooled PostgreSQL connection that was in use this recently is taken without a ping. SQLAlchemy's
# pool_pre_ping sends one before every checkout: a round trip (about 100 µs of the client's CPU)
# per request, whose only catch is a connection that died while it sat in the pool, which under
# load it hardly does. One idle longer is pinged, and replaced when the ping finds it dead (a
# server restarted while the service was quiet). One that died within the second costs its
# request a 503 "unreachable; retry shortly", and SQLAlchemy then replaces every connection
# the pool held before it (app/core/errors.py).
PING_AFTER_IDLE_SECONDS = 1.0
_RETURNED_AT = "returned_at"


def _ping_when_idle(engine: Engine) -> None:
    dialect = engine.dialect

    @event.listens_for(engine, "connect")
    @event.listens_for(engine, "checkin")
    def returned(_dbapi_connection: Any, record: Any) -> None:
        record.info[_RETURNED_AT] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def ping_if_idle(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if time.monotonic() - record.info.get(_RETURNED_AT, 0.0) < PING_AFTER_IDLE_SECONDS:
            return
        try:
            dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as exc:
            if dialect.is_disconnect(exc, dbapi_connection, None):
                # The pool discards this connection and checks out another (its documented
                # answer to this error, raised in a checkout listener).
                raise DisconnectionError(str(exc)) from exc
            raise


def create_database(settings: Settings) -> Database:
    if settings.is_sqlite:
        reader = _sqlite_engine(settings, writer=False)
        writer = _sqlite_engine(settings, writer=True)
        path = sqlite_file(settings.database_url)
        checkpoints = None
        if path is not None:
            # Absolute: the thread finds the file whatever the process's directory becomes.
            checkpoints = WalCheckpoints(os.path.abspath(path))
            checkpoints.start()
        return _database(settings, reader, writer, checkpoints)
    engine = create_engine(settings.database_url, hide_parameters=True, **_pool_args(settings))
    _ping_when_idle(engine)
    return _database(settings, engine, engine, None)


def _database(
    settings: Settings, reader: Engine, writer: Engine, checkpoints: WalCheckpoints | None
) -> Database:
    """The database over its engines, its small writes in turns that hold the writer's
    connection: on SQLite one turn for every write, on PostgreSQL one per project."""
    connections = WriterConnections(
        writer, at_turn_end=None if checkpoints is None else checkpoints.rewind
    )
    write_turns = WriteTurns(
        settings.db_pool_timeout_seconds,
        one_writer=settings.is_sqlite,
        turn_scope=connections.turn,
    )
    return Database(
        reader=reader,
        writer=writer,
        write_turns=write_turns,
        writer_connections=connections,
        cursor_secret=lambda: settings.fingerprint_secret,
        checkpoints=checkpoints,
    )


@contextmanager
def session_scope(session: Session) -> Iterator[Session]:
    """Commit when the work succeeded, roll back when it raised."""
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()
