import functools
import secrets
from collections.abc import Sequence
from datetime import datetime

import sqlalchemy
from sqlalchemy import (
    BigInteger,
    BindParameter,
    ColumnElement,
    Connection,
    Delete,
    Insert,
    Integer,
    String,
    Table,
    bindparam,
    delete,
    exists,
    func,
    or_,
    tuple_,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, SQLModel, col, select

from app.core.db import DriverStatement, UTCDateTime, table_of
from app.core.pagination import SortKey, paginate
from app.projects.models import Project
from app.projects.resources import PROJECT_RESOURCES

PROJECT_ORDER = [SortKey(Project.created_at), SortKey(Project.id)]

# The tenant a project is moved to when its delete begins, under its id as its name. No tenant
# has this name (a tenant is an identifier: app/core/identifiers.py), so from that first write
# every query of a tenant's projects, which all look them up by tenant and name, finds it gone,
# and a write to its name makes a new project, while its rows are deleted in batches. A
# feature's or a run's delete moves its row into a new project of this tenant
# (``new_hidden_project``), whose rows the deleter deletes in the same way.
DELETING_TENANT = "#deleting"


# The keys domain's table, by its name and the two columns the upsert reads, rather than its
# model: the keys domain sits above this one (its routes write through app/storage), so this
# one imports nothing of it. A rename there fails the revocation tests (tests/platform).
_API_KEYS = sqlalchemy.table("api_keys", sqlalchemy.column("id"), sqlalchemy.column("revoked_at"))


def _touch_statement(
    dialect: type[sqlite.Insert] | type[postgresql.Insert], *, confirming_key: bool
) -> Insert:
    now: BindParameter[datetime] = bindparam("now", type_=UTCDateTime())
    table = table_of(Project)
    names = (bindparam("tenant", type_=String()), bindparam("name", type_=String()))
    if confirming_key:
        keys = _API_KEYS
        key_is_active = exists().where(
            keys.c.id == bindparam("key_id"), keys.c.revoked_at.is_(None)
        )
        statement = dialect(table).from_select(
            ["tenant", "name", "created_at", "last_write_at"],
            sqlalchemy.select(*names, now, now).where(key_is_active),
        )
    else:
        statement = dialect(table).values(
            tenant=names[0], name=names[1], created_at=now, last_write_at=now
        )
    return statement.on_conflict_do_update(
        index_elements=["tenant", "name"], set_={"last_write_at": now}
    ).returning(table.c.id)


# Every write runs this upsert first. Built once, with its values as parameters (building it
# per request, with the values inline, cost more than running it), on the table rather than
# the ORM class and run on the driver. A write whose remembered key is still to be confirmed
# (app/core/deps.py) confirms it in the same statement: on PostgreSQL that saves a round trip
# (about 100 µs of the client's CPU) on every write.
TOUCH = {
    (name, confirming_key): DriverStatement(_touch_statement(insert, confirming_key=confirming_key))
    for name, insert in (("sqlite", sqlite.Insert), ("postgresql", postgresql.Insert))
    for confirming_key in (False, True)
}

_PROJECTS = table_of(Project)
# Every read of a project's contents looks its id up first: built once, on the driver (through
# the ORM, the object loaded and its statement built per call, it cost 0.36 ms more a read).
_SELECT_PROJECT_ID = sqlalchemy.select(_PROJECTS.c.id).where(
    _PROJECTS.c.tenant == bindparam("tenant"), _PROJECTS.c.name == bindparam("name")
)
PROJECT_ID = DriverStatement(_SELECT_PROJECT_ID)
# A write that only takes away (a prune) finds its project first, locked (PostgreSQL) until
# the write ends, so that it cannot be deleted meanwhile and then made again by the upsert.
LOCKED_PROJECT_ID = DriverStatement(_SELECT_PROJECT_ID.with_for_update())
# Run by every save import, on the driver too (the ORM's UPDATE around it, which synchronises
# the session's objects with what it changed, cost 0.8 ms of an import's CPU).
NEXT_SAVE_NUMBER = DriverStatement(
    update(_PROJECTS)
    .where(_PROJECTS.c.id == bindparam("project_id"))
    .values(last_save_number=_PROJECTS.c.last_save_number + 1)
    .returning(_PROJECTS.c.last_save_number)
)


def project_id(
    connection: Connection, tenant: str, name: str, *, locked: bool = False
) -> int | None:
    """The project's id (None: no such project of this tenant); with ``locked``, its row
    locked until the transaction ends."""
    statement = LOCKED_PROJECT_ID if locked else PROJECT_ID
    found = statement.first(connection, {"tenant": tenant, "name": name})
    return None if found is None else int(found[0])


def touch_project(
    connection: Connection,
    tenant: str,
    name: str,
    now: datetime,
    *,
    confirming_key: str | None = None,
) -> int | None:
    """Create the project if it is new and record a write; returns its id. One statement, so
    that two first writes racing each other both succeed. With ``confirming_key``, only while
    that API key is active: None, and nothing written, once it is revoked."""
    statement = TOUCH[connection.dialect.name, confirming_key is not None]
    parameters = {"tenant": tenant, "name": name, "now": now, "key_id": confirming_key}
    found = statement.first(connection, parameters)
    return None if found is None else int(found[0])


@functools.cache
def _held_rows_deletes() -> tuple[Delete, ...]:
    """One DELETE for each table that holds a project's rows, leaves first: what the project's
    row cascades to (every table with a foreign key to ``projects``, and every table with one
    to such a table, as ``save_phase_statuses`` to ``saves``), found in the tables' own
    foreign keys. Each deletes up to ``:rows`` of the project's (``:project_id``) rows, so that
    no delete cascades beyond its own. Built at the first delete, when every table is defined
    (the app factory imports them all, ``app/models.py``)."""
    project_id = bindparam("project_id", type_=BigInteger())
    rows = bindparam("rows", type_=Integer())
    projects = table_of(Project)
    # Each held table's rows of the project; a dict keeps the tables in their order.
    scopes: dict[Table, ColumnElement[bool]] = {}
    for table in SQLModel.metadata.sorted_tables:  # a table after every table it refers to
        # A row is the project's by any of its keys: a handover by its own key to the project
        # and by its context's. The two differ once a feature's delete has moved its context
        # into a hidden project (``new_hidden_project``), its handovers still the old
        # project's: each project's delete takes them a batch at a time, whichever comes first,
        # rather than leave them to the cascade of the last row they hang from, one statement.
        held_by = [
            key.parent == project_id
            if key.column.table is projects
            else key.parent.in_(sqlalchemy.select(key.column).where(scopes[key.column.table]))
            for key in sorted(table.foreign_keys, key=lambda key: key.parent.name)
            if key.column.table is projects or key.column.table in scopes
        ]
        if held_by:
            scopes[table] = or_(*held_by)
    deletes = []
    for table, scope in reversed(scopes.items()):
        primary = tuple(table.primary_key.columns)
        chosen = sqlalchemy.select(*primary).where(scope).limit(rows)
        row = primary[0] if len(primary) == 1 else tuple_(*primary)
        deletes.append(delete(table).where(row.in_(chosen)))
    return tuple(deletes)


_DELETE_PROJECT = delete(_PROJECTS).where(_PROJECTS.c.id == bindparam("project_id"))
# What ``delete_project_rows`` answers once the project's own row is gone.
PROJECT_GONE = -1


def delete_project_rows(connection: Connection, project_id: int, rows: int, table: int) -> int:
    """Deletes up to ``rows`` of the project's rows from the first table, leaves first, from
    the ``table``-th on, that holds any; once none is left, the project's own row. The table
    it deleted from (the next delete starts there: the tables before it are empty), or
    ``PROJECT_GONE``. In a write that holds the project's row (``lock_hidden_project``)."""
    deletes = _held_rows_deletes()
    for index in range(table, len(deletes)):
        parameters = {"project_id": project_id, "rows": rows}
        if connection.execute(deletes[index], parameters).rowcount:
            return index
    connection.execute(_DELETE_PROJECT, {"project_id": project_id})
    return PROJECT_GONE


_LOCK_HIDDEN_PROJECT = (
    sqlalchemy.select(_PROJECTS.c.id)
    .where(_PROJECTS.c.id == bindparam("project_id"), _PROJECTS.c.tenant == DELETING_TENANT)
    .with_for_update()
)


def lock_hidden_project(connection: Connection, project_id: int) -> bool:
    """The hidden project's row locked until the write ends; False: another process deleted
    it. Every process's deleter deletes every hidden project it finds (each looks at its
    start), and on PostgreSQL two of them on one project at once went wrong: a statement that
    found the rows it chose deleted by the other's write took the table for empty, and the
    project's row then took the rest with it in one statement, the long write the batches are
    there to avoid (two deleters on a hidden project of 20,000 decisions, twice: a statement
    of 1.0 s and one of 1.4 s, against none over 0.36 s with the row held). With the row held
    their writes take turns, each reading what the one before it left. (SQLite's one writer
    takes them in turn already.)"""
    found = connection.execute(_LOCK_HIDDEN_PROJECT, {"project_id": project_id}).first()
    return found is not None


def new_hidden_project(connection: Connection, now: datetime) -> int:
    """A new project of ``DELETING_TENANT``, under a name of its own, empty: a row a delete
    moves into it (a feature's context, a run's state) is gone from its project's sight from
    that write's commit, its name free, and the deleter deletes it, and every row that hangs
    from it, as it deletes a hidden project's rows."""
    table = _PROJECTS
    statement = (
        sqlalchemy.insert(table)
        .values(
            tenant=DELETING_TENANT, name=secrets.token_hex(16), created_at=now, last_write_at=now
        )
        .returning(table.c.id)
    )
    return int(connection.execute(statement).scalar_one())


def in_their_project(table: Table) -> list[ColumnElement[bool]]:
    """The conditions a row of ``table`` (a table a project holds by its ``project_id``) meets
    when it is its project's to show: each row it hangs from in another such table is in the
    same project. A feature's delete moves its context into a hidden project
    (``new_hidden_project``) and leaves its handovers, which keep their ``project_id``, to the
    deleter: from that write's commit they are no longer their project's. (A look-up of the
    row it hangs from by its key, a row at a time.)"""
    return [
        exists().where(
            key.column == key.parent, key.column.table.c.project_id == table.c.project_id
        )
        for key in sorted(table.foreign_keys, key=lambda key: key.parent.name)
        if key.column.table is not _PROJECTS and "project_id" in key.column.table.c
    ]


def projects_being_deleted(connection: Connection) -> list[int]:
    """The projects whose delete began (``ProjectRepository.hide``) and has not ended."""
    statement = (
        sqlalchemy.select(_PROJECTS.c.id)
        .where(_PROJECTS.c.tenant == DELETING_TENANT)
        .order_by(_PROJECTS.c.id)
    )
    return [int(found) for found in connection.execute(statement).scalars()]


class ProjectRepository:
    """Every query is scoped by tenant here, so no caller can forget to."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, tenant: str, name: str, *, for_update: bool = False) -> Project | None:
        statement = select(Project).where(Project.tenant == tenant, Project.name == name)
        if for_update:
            statement = statement.with_for_update()
        return self.session.exec(statement).first()

    def id_of(self, tenant: str, name: str) -> int | None:
        """The project's id (None: no such project of this tenant)."""
        return project_id(self.session.connection(), tenant, name)

    def next_save_number(self, project_id: int) -> int:
        """Counts a new save in the project and returns its number. One statement that reads
        and writes the counter under the row's lock: two imports never take the same number."""
        ((number,),) = NEXT_SAVE_NUMBER.rows(self.session.connection(), {"project_id": project_id})
        return int(number)

    def page(self, tenant: str, cursor: str | None, limit: int) -> tuple[list[Project], str | None]:
        statement = select(Project).where(Project.tenant == tenant)
        return paginate(self.session, statement, PROJECT_ORDER, cursor, limit, scope=(tenant,))

    def counts(self, project_ids: Sequence[int]) -> dict[int, dict[str, int]]:
        """Per project, how many of each resource it holds."""
        counts: dict[int, dict[str, int]] = {
            project_id: dict.fromkeys(PROJECT_RESOURCES, 0) for project_id in project_ids
        }
        if not project_ids:
            return counts
        for resource, model in PROJECT_RESOURCES.items():
            # Every model in PROJECT_RESOURCES has project_id; the mapping is typed as SQLModel's.
            project_column = col(model.project_id)  # type: ignore[attr-defined]
            statement = (
                select(project_column, func.count())
                .where(project_column.in_(project_ids), *in_their_project(table_of(model)))
                .group_by(project_column)
            )
            for project_id, count in self.session.exec(statement):
                counts[project_id][resource] = count
        return counts

    def hide(self, project_id: int) -> None:
        """The project moved out of its tenant's sight (``DELETING_TENANT``), its name free."""
        self.session.connection().execute(
            update(_PROJECTS)
            .where(_PROJECTS.c.id == project_id)
            .values(tenant=DELETING_TENANT, name=str(project_id))
        )
