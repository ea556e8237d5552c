from typing import Any

from sqlalchemy import ColumnElement, delete, func, insert
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select
from sqlmodel.sql.expression import SelectOfScalar

from app.agents.models import AgentMemoryItem, AgentMemoryTurn, AgentSnapshot, turn_key
from app.core.db import table_of, utcnow
from app.core.pagination import ByteBound, SortKey, paginate
from app.formats.agent_memory import MemoryKind
from app.storage.repository import ProjectScopedRepository

OLDEST_FIRST = [SortKey(AgentMemoryItem.id, descending=False)]
# What a listed item costs: its line, which the answer holds.
LINE_BYTES = func.length(col(AgentMemoryItem.line))
# Appends are the hot path: Core INSERTs built once, no unit of work. Traces return their ids,
# in the order given, for the turns they begin.
INSERT_ITEMS = insert(table_of(AgentMemoryItem))
INSERT_TRACES = insert(table_of(AgentMemoryItem)).returning(
    table_of(AgentMemoryItem).c.id, sort_by_parameter_order=True
)
# One per database: the generic INSERT has no ON CONFLICT (``conflict_insert``, chosen once).
REGISTER_TURNS = {
    name: dialect.insert(table_of(AgentMemoryTurn)).on_conflict_do_nothing(
        index_elements=["project_id", "agent", "turn_key"]
    )
    for name, dialect in (("sqlite", sqlite), ("postgresql", postgresql))
}
# Ids a statement names at most: well under SQLite's and PostgreSQL's parameter limits.
DELETE_BATCH = 1000


class SnapshotRepository(ProjectScopedRepository[AgentSnapshot]):
    """Each agent's working context snapshot cache: one row per agent."""

    model = AgentSnapshot
    key = ("agent",)
    documents = {"content": func.length(col(AgentSnapshot.content))}


class AgentMemoryRepository:
    """An agent's memory items of one kind, always in append order.

    Not a ``ProjectScopedRepository``: these are the lines of an append-only log, not
    documents named by a key (no row is looked up, locked or given an ETag alone), so this
    one is bound to its log (project, agent, kind) and reads and appends its lines."""

    def __init__(self, session: Session, project_id: int, agent: str, kind: MemoryKind) -> None:
        self.session = session
        self.project_id = project_id
        self.agent = agent
        self.kind = kind

    def _of_log(self) -> tuple[ColumnElement[bool], ...]:
        return (
            col(AgentMemoryItem.project_id) == self.project_id,
            col(AgentMemoryItem.agent) == self.agent,
            col(AgentMemoryItem.kind) == self.kind.value,
        )

    def _select(self) -> SelectOfScalar[AgentMemoryItem]:
        return select(AgentMemoryItem).where(*self._of_log())

    def add(self, lines: list[tuple[bytes, str | None]]) -> None:
        """Append ``(line, turn_id)`` pairs, in order; raw traces also register their turns.
        Only raw traces keep their turn: restore reads the recent turns from them alone, not
        from the archive of pruned traces."""
        traces = self.kind is MemoryKind.raw_trace
        now = utcnow()
        rows: list[dict[str, Any]] = [
            {
                "project_id": self.project_id,
                "agent": self.agent,
                "kind": self.kind.value,
                "line": line,
                "turn_id": turn_id if traces else None,
                "turn_key": turn_key(turn_id) if traces and turn_id is not None else None,
                "created_at": now,
            }
            for line, turn_id in lines
        ]
        if not traces:
            self.session.execute(INSERT_ITEMS, rows)
            return
        ids = self.session.execute(INSERT_TRACES, rows).scalars().all()
        self._register_turns(
            [(row["turn_key"], item_id) for row, item_id in zip(rows, ids, strict=True)]
        )

    def _register_turns(self, traces: list[tuple[str | None, int]]) -> None:
        """Each turn's first trace, from the ``(turn_key, id)`` of the traces appended. A turn
        seen in an earlier append keeps its row: appends to a project are serialised by its
        row lock (``app/storage/writes.py``), so that row's trace is the turn's first."""
        first_items: dict[str, int] = {}
        for key, item_id in traces:
            if key is not None:
                first_items.setdefault(key, item_id)
        if not first_items:
            return
        dialect = self.session.get_bind().dialect.name
        self.session.execute(
            REGISTER_TURNS[dialect],
            [
                {
                    "project_id": self.project_id,
                    "agent": self.agent,
                    "turn_key": key,
                    "first_item_id": item_id,
                }
                for key, item_id in first_items.items()
            ],
        )

    def remove(self, items: list[AgentMemoryItem]) -> None:
        """Take these items out, and the turns they were the first trace of (a pruned turn
        goes whole, so no trace of it is left to point at)."""
        ids = [item.id for item in items]
        for start in range(0, len(ids), DELETE_BATCH):
            batch = ids[start : start + DELETE_BATCH]
            self.session.execute(
                delete(AgentMemoryTurn).where(
                    col(AgentMemoryTurn.project_id) == self.project_id,
                    col(AgentMemoryTurn.agent) == self.agent,
                    col(AgentMemoryTurn.first_item_id).in_(batch),
                )
            )
            self.session.execute(delete(AgentMemoryItem).where(col(AgentMemoryItem.id).in_(batch)))

    def page(
        self, cursor: str | None, limit: int, most_bytes: int
    ) -> tuple[list[AgentMemoryItem], str | None]:
        """A page of lines that hold at most ``most_bytes`` together (``ByteBound``)."""
        scope = (self.project_id, self.agent, self.kind.value)
        bound = ByteBound(LINE_BYTES, most_bytes)
        return paginate(
            self.session, self._select(), OLDEST_FIRST, cursor, limit, scope=scope, bound=bound
        )

    def all(self) -> list[AgentMemoryItem]:
        return list(self.session.exec(self._select().order_by(col(AgentMemoryItem.id))))

    def lines(self) -> list[bytes]:
        """Every item's line, in append order: the column alone, no row objects (a file of
        100,000 lines is read to be sent whole)."""
        statement = select(AgentMemoryItem.line).where(*self._of_log())
        return list(self.session.exec(statement.order_by(col(AgentMemoryItem.id))))

    def latest(self, count: int) -> list[AgentMemoryItem]:
        """The last ``count`` items, oldest first."""
        newest = self._select().order_by(col(AgentMemoryItem.id).desc()).limit(count)
        return list(reversed(list(self.session.exec(newest))))

    def of_last_turns(self, turns: int) -> list[AgentMemoryItem]:
        """The items of the last ``turns`` turns by first appearance, in append order.

        Both steps are bounded by what they return, whatever the history's length: the last
        turns come newest first from their register, their traces by turn_key. A trace must
        also have its turn's turn_id, so that two ids whose keys collide never mix."""
        last_turns = (
            select(AgentMemoryTurn.turn_key, AgentMemoryTurn.first_item_id)
            .where(
                AgentMemoryTurn.project_id == self.project_id,
                AgentMemoryTurn.agent == self.agent,
            )
            .order_by(col(AgentMemoryTurn.first_item_id).desc())
            .limit(turns)
            .subquery()
        )
        first_trace = aliased(AgentMemoryItem)
        statement = (
            self._select()
            .join(last_turns, col(AgentMemoryItem.turn_key) == last_turns.c.turn_key)
            .join(first_trace, col(first_trace.id) == last_turns.c.first_item_id)
            .where(col(AgentMemoryItem.turn_id) == col(first_trace.turn_id))
            .order_by(col(AgentMemoryItem.id))
        )
        return list(self.session.exec(statement))
