from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, bindparam, delete
from sqlalchemy import select as select_rows
from sqlmodel import col, select

from app.core.db import DriverStatement, indexed, insert_bound, table_of
from app.core.pagination import SortKey, paginate
from app.saves.models import Save, SavePhaseStatus
from app.storage.repository import ProjectScopedRepository, unread_columns, within

# A list of saves answers their summaries: it reads no file.
SUMMARY_ONLY = unread_columns(col(Save.content))

# By number, not the primary key, where saves of one timestamp need an order: the cursor
# carries these values, and the primary key would tell how much other tenants store.
NEWEST_FIRST = [SortKey(Save.timestamp), SortKey(Save.number)]
INSERT_PHASE_STATUSES = DriverStatement(
    insert_bound(table_of(SavePhaseStatus), ("save_id", "phase", "status"))
)

# The project's newest save, its file read only if it is not too large (``within``).
LATEST_WITHIN = within(
    select_rows(Save)
    .where(col(Save.project_id) == bindparam("project_id"))
    .order_by(col(Save.timestamp).desc(), col(Save.number).desc())
    .limit(1),
    col(Save.content),
    col(Save.size_bytes),
)

Position = tuple[datetime, int]
"""Where a save stands among its project's saves: its ``timestamp``, then its ``number``."""


@dataclass(frozen=True)
class SaveFilter:
    """Which of a project's saves a list shows; a filter that is None is left out."""

    phase: str | None = None
    filename: str | None = None
    since: datetime | None = None
    until: datetime | None = None


class SaveRepository(ProjectScopedRepository[Save]):
    """A project's saves, by number (the id the API shows)."""

    model = Save
    key = ("number",)
    # The file's own size: what a client that takes no gzip is sent.
    documents = {"content": col(Save.size_bytes)}

    def add_phase_statuses(self, save_id: int, phase_statuses: dict[str, str]) -> None:
        # Keyed as stored: names that differ only in unstorable characters, or past the
        # characters an index holds, become one row.
        rows = {indexed(phase): status for phase, status in phase_statuses.items()}
        INSERT_PHASE_STATUSES.run_many(
            self.connection(),
            [
                {"save_id": save_id, "phase": phase, "status": status}
                for phase, status in rows.items()
            ],
        )

    def find_file(self, project_id: int, filename: str, etag: str) -> int | None:
        """The number of a save of the project with this name whose file has this ETag."""
        statement = select(Save.number).where(
            Save.project_id == project_id, Save.filename == filename, Save.etag == etag
        )
        return self.session.exec(statement).first()

    def latest_within(self, project_id: int, up_to: int) -> tuple[Save, int] | None:
        """The newest save (by ``timestamp``) as ``get_within`` reads one."""
        parameters = {"project_id": project_id, "up_to": up_to}
        return self.read_within(LATEST_WITHIN, parameters, "content")

    def position_of_newest(self, project_id: int, nth: int) -> Position | None:
        """The position of the project's ``nth`` newest save (1: the latest); None when it
        has fewer saves."""
        statement = (
            select(Save.timestamp, Save.number)
            .where(Save.project_id == project_id)
            .order_by(col(Save.timestamp).desc(), col(Save.number).desc())
            .offset(nth - 1)
            .limit(1)
        )
        row = self.session.exec(statement).first()
        return None if row is None else (row[0], row[1])

    def page(
        self, project_id: int, where: SaveFilter, cursor: str | None, limit: int
    ) -> tuple[list[Save], str | None]:
        statement = select(Save).where(Save.project_id == project_id).options(*SUMMARY_ONLY)
        if where.phase is not None:
            statement = statement.where(Save.current_phase == where.phase)
        if where.filename is not None:  # ix_saves_project_filename
            statement = statement.where(Save.filename == where.filename)
        if where.since is not None:
            statement = statement.where(col(Save.timestamp) >= where.since)
        if where.until is not None:
            statement = statement.where(col(Save.timestamp) <= where.until)
        return paginate(self.session, statement, NEWEST_FIRST, cursor, limit, scope=(project_id,))

    def delete_before(self, project_id: int, position: Position | None) -> int:
        """Delete the project's saves that come before ``position`` (every save for None);
        returns how many."""
        statement = delete(Save).where(col(Save.project_id) == project_id)
        if position is not None:
            timestamp, number = position
            statement = statement.where(
                (col(Save.timestamp) < timestamp)
                | ((col(Save.timestamp) == timestamp) & (col(Save.number) < number))
            )
        # Counts the saves alone: their phase statuses go by the foreign key's cascade.
        return cast(CursorResult[Any], self.session.execute(statement)).rowcount
