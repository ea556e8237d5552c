from sqlalchemy import func
from sqlmodel import Session, col, select

from app.agents.models import AgentMemoryItem, AgentSnapshot
from app.core.pagination import SortKey, paginate
from app.formats.agent_memory import MemoryKind

OLDEST_FIRST = [SortKey(AgentMemoryItem.id, descending=False)]  # type: ignore[arg-type]


class SnapshotRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, project_id: int, agent: str, *, for_update: bool = False) -> AgentSnapshot | None:
        statement = select(AgentSnapshot).where(
            AgentSnapshot.project_id == project_id, AgentSnapshot.agent == agent
        )
        if for_update:
            statement = statement.with_for_update()
        return self.session.exec(statement).first()

    def save(self, snapshot: AgentSnapshot) -> None:
        self.session.add(snapshot)
        self.session.flush()

    def delete(self, snapshot: AgentSnapshot) -> None:
        self.session.delete(snapshot)
        self.session.flush()


class MemoryRepository:
    """An agent's memory items of one kind, always in append order."""

    def __init__(self, session: Session, project_id: int, agent: str, kind: MemoryKind) -> None:
        self.session = session
        self.project_id = project_id
        self.agent = agent
        self.kind = kind

    def _select(self):  # type: ignore[no-untyped-def]
        return select(AgentMemoryItem).where(
            AgentMemoryItem.project_id == self.project_id,
            AgentMemoryItem.agent == self.agent,
            AgentMemoryItem.kind == self.kind.value,
        )

    def add(self, lines: list[tuple[bytes, str | None]]) -> None:
        """Append ``(line, turn_id)`` pairs, in order."""
        self.session.add_all(
            AgentMemoryItem(
                project_id=self.project_id,
                agent=self.agent,
                kind=self.kind.value,
                line=line,
                turn_id=turn_id,
            )
            for line, turn_id in lines
        )
        self.session.flush()

    def page(self, cursor: str | None, limit: int) -> tuple[list[AgentMemoryItem], str | None]:
        return paginate(self.session, self._select(), OLDEST_FIRST, cursor, limit)

    def all(self) -> list[AgentMemoryItem]:
        return list(self.session.exec(self._select().order_by(col(AgentMemoryItem.id))))

    def latest(self, count: int) -> list[AgentMemoryItem]:
        """The last ``count`` items, oldest first."""
        newest = self._select().order_by(col(AgentMemoryItem.id).desc()).limit(count)
        return list(reversed(list(self.session.exec(newest))))

    def of_last_turns(self, turns: int) -> list[AgentMemoryItem]:
        """The items of the last ``turns`` turns by first appearance, in append order."""
        first_seen = func.min(AgentMemoryItem.id)
        last_turns = (
            select(AgentMemoryItem.turn_id)
            .where(
                AgentMemoryItem.project_id == self.project_id,
                AgentMemoryItem.agent == self.agent,
                AgentMemoryItem.kind == self.kind.value,
            )
            .group_by(col(AgentMemoryItem.turn_id))
            .order_by(first_seen.desc())
            .limit(turns)
        )
        statement = (
            self._select()
            .where(col(AgentMemoryItem.turn_id).in_(last_turns.scalar_subquery()))
            .order_by(col(AgentMemoryItem.id))
        )
        return list(self.session.exec(statement))
