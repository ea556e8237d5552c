from datetime import datetime

from sqlalchemy import ColumnElement, delete, func
from sqlmodel import Session, col, select

from app.core.db import searchable
from app.core.pagination import SortKey, paginate
from app.saves.models import Save, SavePhaseStatus

# By number, not the primary key, where saves of one timestamp need an order: the cursor
# carries these values, and the primary key would tell how much other tenants store.
NEWEST_FIRST = [SortKey(Save.timestamp), SortKey(Save.number)]


class SaveRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, save: Save, phase_statuses: dict[str, str]) -> Save:
        self.session.add(save)
        self.session.flush()
        assert save.id is not None
        # Keyed as stored: names that differ only in unstorable characters become one row.
        rows = {searchable(phase): status for phase, status in phase_statuses.items()}
        self.session.add_all(
            SavePhaseStatus(save_id=save.id, phase=phase, status=status)
            for phase, status in rows.items()
        )
        self.session.flush()
        return save

    def get(self, project_id: int, number: int, *, for_update: bool = False) -> Save | None:
        statement = select(Save).where(Save.project_id == project_id, Save.number == number)
        if for_update:
            statement = statement.with_for_update()
        return self.session.exec(statement).first()

    def find_file(self, project_id: int, filename: str, etag: str) -> int | None:
        """The number of a save of the project with this name whose file has this ETag."""
        statement = select(Save.number).where(
            Save.project_id == project_id, Save.filename == filename, Save.etag == etag
        )
        return self.session.exec(statement).first()

    def latest(self, project_id: int) -> Save | None:
        statement = (
            select(Save)
            .where(Save.project_id == project_id)
            .order_by(col(Save.timestamp).desc(), col(Save.number).desc())
            .limit(1)
        )
        return self.session.exec(statement).first()

    def page(
        self,
        project_id: int,
        *,
        phase: str | None,
        since: datetime | None,
        until: datetime | None,
        cursor: str | None,
        limit: int,
    ) -> tuple[list[Save], str | None]:
        statement = select(Save).where(Save.project_id == project_id)
        if phase is not None:
            statement = statement.where(Save.current_phase == phase)
        if since is not None:
            statement = statement.where(col(Save.timestamp) >= since)
        if until is not None:
            statement = statement.where(col(Save.timestamp) <= until)
        return paginate(self.session, statement, NEWEST_FIRST, cursor, limit)

    def update(self, save: Save) -> None:
        self.session.add(save)
        self.session.flush()

    def delete(self, save: Save) -> None:
        self.session.delete(save)
        self.session.flush()

    def delete_older(self, project_id: int, than: Save) -> int:
        """Delete the project's saves that come before ``than`` (by timestamp, then number)."""
        older = (col(Save.timestamp) < than.timestamp) | (
            (col(Save.timestamp) == than.timestamp) & (col(Save.number) < than.number)
        )
        return self._delete_where(project_id, older)

    def keep_latest(self, project_id: int, keep: int) -> int:
        """Delete all but the ``keep`` newest saves of the project."""
        kept = (
            select(Save.id)
            .where(Save.project_id == project_id)
            .order_by(col(Save.timestamp).desc(), col(Save.number).desc())
            .limit(keep)
        )
        return self._delete_where(project_id, col(Save.id).not_in(kept.scalar_subquery()))

    def _delete_where(self, project_id: int, condition: ColumnElement[bool]) -> int:
        count_statement = (
            select(func.count())
            .select_from(Save)
            .where(
                Save.project_id == project_id,
                condition,
            )
        )
        count = self.session.exec(count_statement).one()
        if count:
            self.session.execute(delete(Save).where(col(Save.project_id) == project_id, condition))
        return count
