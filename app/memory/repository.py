import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy
from sqlalchemy import (
    BigInteger,
    BindParameter,
    ColumnElement,
    bindparam,
    case,
    func,
    literal,
    text,
    update,
)
from sqlmodel import col, select
from sqlmodel.sql.expression import SelectOfScalar

from app.core.db import DriverStatement, table_of
from app.core.pagination import ByteBound, SortKey, ordering, paginate
from app.memory.models import MemoryFileStyle, MemoryItem, MemorySummary
from app.storage.repository import ProjectScopedRepository, prebuilt, unread_columns

NEWEST_FIRST = [SortKey(MemoryItem.timestamp), SortKey(MemoryItem.id)]
# What a listed item costs: its document, the one column of it an answer holds.
ITEM_BYTES = func.length(col(MemoryItem.content))
# The searched copy of an item's text, as large as its document: no listing shows it, so none
# reads it (``col`` types the column as Mapped: at runtime it is the attribute defer takes).
UNREAD_SEARCH_TEXT = unread_columns(col(MemoryItem.search_text))
# By the names of the columns an append writes (``ItemRepository.append``).
_APPENDS: dict[frozenset[str], DriverStatement] = {}
WORD = re.compile(r"\w+")
# SQLite's full-text index keys an item by ``project_id * PROJECT_RANGE + id`` (migration 0018):
# a project's items are one range of it.
PROJECT_RANGE = 2**32


@dataclass(frozen=True)
class ItemFilter:
    feature_id: str | None = None
    category: str | None = None
    severity: str | None = None
    since: int | None = None
    until: int | None = None
    q: str | None = None
    include_archived: bool = False
    # Epoch ms: constraints that expired by then are left out. None keeps them.
    active_at: int | None = None


class StoredItem(NamedTuple):
    """A stored item's row id, and its document when it is live (None: archived)."""

    id: int
    live_content: bytes | None


@dataclass(frozen=True)
class AppendedItem:
    """What the INSERT of a new item read as it wrote, for its response: the file's style
    (None: never written)."""

    style: str | None


def _live(
    kind: str | BindParameter[str], project_id: int | BindParameter[int]
) -> list[ColumnElement[bool]]:
    return [
        col(MemoryItem.project_id) == project_id,
        col(MemoryItem.kind) == kind,
        col(MemoryItem.archived_at).is_(None),
    ]


# The bytes of the items a list file holds, together (not correlated to the rows around it).
LIVE_SIZE = (
    select(func.coalesce(func.sum(func.length(col(MemoryItem.content))), 0))
    .where(*_live(bindparam("kind"), bindparam("project_id")))
    .correlate(None)
    .scalar_subquery()
)
# Each live item's document in file order when they are at most ``up_to`` bytes together,
# else a NULL each.
LIVE_CONTENTS_WITHIN = (
    select(case((bindparam("up_to") >= LIVE_SIZE, col(MemoryItem.content))))
    .where(*_live(bindparam("kind"), bindparam("project_id")))
    .order_by(col(MemoryItem.position), col(MemoryItem.id))
)


class SummaryRepository(ProjectScopedRepository[MemorySummary]):
    """A project's running summary: its one row."""

    model = MemorySummary
    documents = {"content": func.length(col(MemorySummary.content))}


class FileStyleRepository(ProjectScopedRepository[MemoryFileStyle]):
    """The key style each list file was last written in, by kind."""

    model = MemoryFileStyle
    key = ("kind",)

    def styles(self, project_id: int) -> dict[str, str]:
        """Each written file's style, by kind."""
        statement = select(MemoryFileStyle.kind, MemoryFileStyle.style).where(
            MemoryFileStyle.project_id == project_id
        )
        return dict(self.session.exec(statement).all())


def _append_statement(names: frozenset[str]) -> DriverStatement:
    """A new item's INSERT at the end of its kind's list, of the columns ``names`` (its
    project, kind and id among them), unless the kind holds its id already: the next position,
    the features completed so far (its ``features_mark``) and the file's style read in the same
    statement. Appends are the hot path: one statement is one round trip to PostgreSQL, where a
    SELECT before the INSERT was a second. Built on the tables, not the ORM classes, whose
    bulk-insert path around one row cost as much again as the statement."""
    items = table_of(MemoryItem)
    summaries, styles, column = table_of(MemorySummary).c, table_of(MemoryFileStyle).c, items.c
    values = {name: bindparam(name, type_=column[name].type) for name in sorted(names)}
    project_id, kind = values["project_id"], values["kind"]
    of_kind = (column.project_id == project_id, column.kind == kind)
    next_position = sqlalchemy.select(func.coalesce(func.max(column.position) + 1, 0)).where(
        *of_kind
    )
    completed = sqlalchemy.select(summaries.total_features_completed).where(
        summaries.project_id == project_id
    )
    id_taken = sqlalchemy.select(column.id).where(*of_kind, column.item_id == values["item_id"])
    style = sqlalchemy.select(styles.style).where(
        styles.project_id == project_id, styles.kind == kind
    )
    new_row = sqlalchemy.select(
        *values.values(),
        next_position.scalar_subquery(),
        func.coalesce(completed.scalar_subquery(), 0),
    ).where(~id_taken.exists())
    return DriverStatement(
        sqlalchemy.insert(items)
        .from_select([*values, "position", "features_mark"], new_row)
        .returning(style.scalar_subquery())
    )


# The first entry from the top of the index, whatever the planner's statistics say (a max()
# over rows it takes for few is read whole).
HIGHEST_ID_NUMBER = DriverStatement(
    sqlalchemy.select(table_of(MemoryItem).c.id_number)
    .where(
        table_of(MemoryItem).c.project_id == bindparam("project_id"),
        table_of(MemoryItem).c.kind == bindparam("kind"),
        table_of(MemoryItem).c.id_number.is_not(None),
    )
    .order_by(table_of(MemoryItem).c.id_number.desc())
    .limit(1)
)


class RankableRow(NamedTuple):
    """A live item as a ranking reads it: its columns, not its document (the pack ranks up to
    a thousand failures to keep five)."""

    id: int
    position: int
    feature_id: str | None
    timestamp: int
    search_text: str


# The characters of an item's text a ranking reads: a pack ranks up to a thousand failures,
# whose texts hold up to 100,000 characters each, and splitting them all into words cost a
# pack 0.8-1.1 s of CPU (a hostile client's 1,000 failures of 100 KB, 2026-11-27).
RANKED_CHARACTERS = 4_000


def _newest_rankable_statement(*, of_feature: bool) -> DriverStatement:
    live = _live(bindparam("kind"), bindparam("project_id"))
    if of_feature:
        live.append(col(MemoryItem.feature_id) == bindparam("feature_id"))
    items = table_of(MemoryItem).c
    text_read = func.substr(
        items.search_text, 1, RANKED_CHARACTERS, type_=items.search_text.type
    ).label("search_text")
    return DriverStatement(
        sqlalchemy.select(items.id, items.position, items.feature_id, items.timestamp, text_read)
        .where(*live)
        .order_by(*ordering(NEWEST_FIRST))
        .limit(bindparam("limit"))
    )


# On the driver, not through the session's result rows: at a million items the pack's two
# reads of 500 rows each cost 4.4 ms of CPU that way.
NEWEST_RANKABLE = {
    of_feature: _newest_rankable_statement(of_feature=of_feature) for of_feature in (False, True)
}


class ItemRepository(ProjectScopedRepository[MemoryItem]):
    """Decisions, failures and constraints, by kind and ``id``."""

    model = MemoryItem
    key = ("kind", "item_id")

    @property
    def _dialect(self) -> str:
        return self.session.get_bind().dialect.name

    def stored_items(self, project_id: int, kind: str) -> dict[str, StoredItem]:
        """Every item of ``kind``, archived ones included, by its ``item_id`` in file order:
        its row's id and, when it is live, its document (not its other columns: a row's
        search text is up to 100,000 characters). One read of the rows a list file's replace
        changes, and of the file it replaces."""
        column = table_of(MemoryItem).c
        live_content = case((column.archived_at.is_(None), column.content))
        statement = (
            sqlalchemy.select(column.item_id, column.id, live_content)
            .where(column.project_id == project_id, column.kind == kind)
            .order_by(column.position, column.id)
        )
        return {
            item_id: StoredItem(row_id, content)
            for item_id, row_id, content in self.connection().execute(statement)
        }

    def live_contents_within(self, project_id: int, kind: str, up_to: int) -> list[bytes] | None:
        """The documents of the items of ``kind`` not archived, in file order (the column
        alone), when they are at most ``up_to`` bytes together; else None, and none of them
        read. One statement either way."""
        parameters = {"kind": kind, "project_id": project_id, "up_to": up_to}
        contents = list(self.session.exec(LIVE_CONTENTS_WITHIN, params=parameters))
        return None if None in contents else contents

    def newest(self, project_id: int, kind: str, limit: int) -> list[MemoryItem]:
        """The ``limit`` newest live items of ``kind``."""
        statement = (
            select(MemoryItem)
            .where(*_live(kind, project_id))
            .order_by(*ordering(NEWEST_FIRST))
            .limit(limit)
        )
        return list(self.session.exec(statement))

    def newest_rankable(
        self, project_id: int, kind: str, limit: int, *, feature_id: str | None = None
    ) -> list[RankableRow]:
        """As ``newest`` (of one feature, when given), but only the columns a ranking reads,
        not the documents."""
        parameters: dict[str, Any] = {"project_id": project_id, "kind": kind, "limit": limit}
        if feature_id is not None:
            parameters["feature_id"] = feature_id
        statement = NEWEST_RANKABLE[feature_id is not None]
        return list(map(RankableRow._make, statement.rows(self.connection(), parameters)))

    def items(self, ids: Sequence[int]) -> list[MemoryItem]:
        return list(self.session.exec(select(MemoryItem).where(col(MemoryItem.id).in_(ids))))

    def active_constraints(self, project_id: int, now_ms: int) -> list[MemoryItem]:
        statement = (
            select(MemoryItem)
            .where(*_live("constraint", project_id), _unexpired(now_ms))
            .order_by(col(MemoryItem.position), col(MemoryItem.id))
        )
        return list(self.session.exec(statement))

    def append(self, columns: Mapping[str, Any]) -> AppendedItem | None:
        """A new item of ``columns`` (every column but its id, position, features mark and
        ``archived_at``) at the end of its kind's list, in one statement; None, and nothing
        written, when its kind holds its ``item_id`` already."""
        statement = prebuilt(_APPENDS, _append_statement, columns)
        appended = statement.rows(self.connection(), columns)
        if not appended:
            return None
        ((style,),) = appended
        return AppendedItem(style=style)

    def highest_id_number(self, project_id: int, kind: str) -> int | None:
        """The highest ``id_number`` of the kind's items: one read of its index."""
        parameters = {"project_id": project_id, "kind": kind}
        found = HIGHEST_ID_NUMBER.first(self.connection(), parameters)
        return None if found is None else int(found[0])

    def item_ids_numbered(self, project_id: int, kind: str, number: int) -> list[str]:
        statement = select(MemoryItem.item_id).where(
            MemoryItem.project_id == project_id,
            MemoryItem.kind == kind,
            MemoryItem.id_number == number,
        )
        return list(self.session.exec(statement))

    def page(
        self,
        project_id: int,
        kind: str,
        where: ItemFilter,
        cursor: str | None,
        limit: int,
        most_bytes: int,
    ) -> tuple[list[MemoryItem], str | None]:
        """A page of the kind's items whose documents hold at most ``most_bytes`` together
        (the first whatever its size: ``ByteBound``)."""
        statement = (
            select(MemoryItem)
            .where(MemoryItem.project_id == project_id, MemoryItem.kind == kind)
            .options(*UNREAD_SEARCH_TEXT)
        )
        statement = self._filtered(statement, project_id, where)
        return paginate(
            self.session,
            statement,
            NEWEST_FIRST,
            cursor,
            limit,
            scope=(project_id, kind),
            bound=ByteBound(ITEM_BYTES, most_bytes, UNREAD_SEARCH_TEXT),
        )

    def _filtered(
        self, statement: SelectOfScalar[MemoryItem], project_id: int, where: ItemFilter
    ) -> SelectOfScalar[MemoryItem]:
        equal = {
            MemoryItem.feature_id: where.feature_id,
            MemoryItem.category: where.category,
            MemoryItem.severity: where.severity,
        }
        for column, value in equal.items():
            if value is not None:
                statement = statement.where(col(column) == value)
        if where.since is not None:
            statement = statement.where(col(MemoryItem.timestamp) >= where.since)
        if where.until is not None:
            statement = statement.where(col(MemoryItem.timestamp) <= where.until)
        if not where.include_archived:
            statement = statement.where(col(MemoryItem.archived_at).is_(None))
        if where.active_at is not None:
            statement = statement.where(_unexpired(where.active_at))
        if where.q is not None:
            statement = statement.where(self._matches(project_id, where.q))
        return statement

    def _matches(self, project_id: int, query: str) -> ColumnElement[bool]:
        """Full-text match of every word of ``query`` among the project's items, through the
        database's own index."""
        words = WORD.findall(query)
        if self._dialect == "sqlite":
            # Each word a quoted FTS5 string: the user's text is never FTS5 syntax. The index
            # keys an item by its project's range (migration 0018), and FTS5 seeks each word's
            # list to the range: another project's matches are never read (they were, and
            # another tenant could time them).
            match = " ".join('"' + word.replace('"', '""') + '"' for word in words)
            first = project_id * PROJECT_RANGE
            matching_rows = text(
                "SELECT rowid - :first FROM memory_items_fts WHERE memory_items_fts MATCH :match "
                "AND rowid BETWEEN :first AND :last"
            ).bindparams(match=match, first=first, last=first + PROJECT_RANGE - 1)
            return col(MemoryItem.id).in_(matching_rows)
        # The GIN index's expression (migration 0018): an item's words under its project, and
        # the query's words under the searching project, so each list the index reads holds
        # this project's items only, and so do the planner's statistics of the words: another
        # tenant's matches are never read, nor weighed (they were, and decided the plan).
        terms = func.memory_search_lexemes(MemoryItem.project_id, MemoryItem.search_text)
        project = literal(project_id, BigInteger)
        return terms.op("@@")(func.memory_search_query(project, " ".join(words)))

    def archive(self, ids: Sequence[int], when: datetime) -> int:
        if not ids:
            return 0
        self.session.execute(
            update(MemoryItem).where(col(MemoryItem.id).in_(ids)).values(archived_at=when)
        )
        return len(ids)

    def stale(self, project_id: int, kind: str, mark_before: int, **extra: Any) -> list[int]:
        """Live items of ``kind`` that arrived when fewer than ``mark_before`` features were
        complete (and match ``extra`` column values)."""
        statement = select(MemoryItem.id).where(
            *_live(kind, project_id), col(MemoryItem.features_mark) <= mark_before
        )
        for name, value in extra.items():
            statement = statement.where(getattr(MemoryItem, name) == value)
        return [item_id for item_id in self.session.exec(statement) if item_id is not None]

    def expired(self, project_id: int, now_ms: int) -> list[int]:
        statement = select(MemoryItem.id).where(
            *_live("constraint", project_id),
            col(MemoryItem.expires_at).is_not(None),
            col(MemoryItem.expires_at) <= now_ms,
        )
        return [item_id for item_id in self.session.exec(statement) if item_id is not None]


def _unexpired(now_ms: int) -> ColumnElement[bool]:
    return col(MemoryItem.expires_at).is_(None) | (col(MemoryItem.expires_at) > now_ms)
