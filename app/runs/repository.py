from sqlmodel import Session, col, select

from app.core.db import conflict_insert
from app.core.pagination import SortKey, paginate
from app.runs.models import RunCountedSession, RunState

RECENTLY_WRITTEN_FIRST = [SortKey(RunState.modified_at), SortKey(RunState.id)]


class RunRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, project_id: int, run: str, *, for_update: bool = False) -> RunState | None:
        statement = select(RunState).where(RunState.project_id == project_id, RunState.run == run)
        if for_update:
            statement = statement.with_for_update()
        return self.session.exec(statement).first()

    def save(self, state: RunState) -> RunState:
        self.session.add(state)
        self.session.flush()
        return state

    def delete(self, state: RunState) -> None:
        self.session.delete(state)
        self.session.flush()

    def page(
        self, project_id: int, cursor: str | None, limit: int
    ) -> tuple[list[RunState], str | None]:
        statement = select(RunState).where(RunState.project_id == project_id)
        return paginate(self.session, statement, RECENTLY_WRITTEN_FIRST, cursor, limit)

    def count_session(self, run_state_id: int, session_id: str) -> bool:
        """Record that a session's cost was counted; False if it already was."""
        statement = (
            conflict_insert(self.session, RunCountedSession)
            .values(run_state_id=run_state_id, session_id=session_id)
            .on_conflict_do_nothing()
            .returning(col(RunCountedSession.session_id))
        )
        return self.session.execute(statement).scalar_one_or_none() is not None
