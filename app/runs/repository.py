from sqlmodel import col, select

from app.core.db import conflict_insert
from app.core.pagination import SortKey, paginate
from app.runs.models import RunCountedSession, RunState
from app.storage.repository import ProjectScopedRepository

RECENTLY_WRITTEN_FIRST = [SortKey(RunState.updated_at), SortKey(RunState.id)]


class RunRepository(ProjectScopedRepository[RunState]):
    model = RunState
    key = ("run",)

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
