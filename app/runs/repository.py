from sqlalchemy import bindparam, delete, func, update
from sqlmodel import Session, col, select

from app.core.db import (
    DriverStatement,
    WriteSession,
    conflict_insert,
    connection_of,
    insert_bound,
    session_of,
    table_of,
)
from app.core.pagination import SortKey, paginate
from app.runs.models import RunBead, RunCountedSession, RunState
from app.storage.repository import ProjectScopedRepository, unread_columns

# A list of runs answers their summaries: it reads neither state nor backup.
SUMMARY_ONLY = unread_columns(col(RunState.content), col(RunState.backup))

RECENTLY_WRITTEN_FIRST = [SortKey(RunState.updated_at), SortKey(RunState.id)]

# An iteration's statements on a run's beads, built once, their values bound per call.
BEADS = table_of(RunBead)
# Not the columns' names, which an UPDATE keeps for its values.
OF_RUN = BEADS.c.run_state_id == bindparam("state_id")
PARTS = select(BEADS.c.part).where(OF_RUN).order_by(BEADS.c.bead)
INSERT_BEADS = DriverStatement(insert_bound(BEADS, BEADS.columns.keys()))
REPLACE_PART = DriverStatement(
    update(BEADS)
    .where(OF_RUN, BEADS.c.bead_key == bindparam("key"))
    .values(part=bindparam("new_part"))
)


class RunRepository(ProjectScopedRepository[RunState]):
    model = RunState
    key = ("run",)
    # The state's head (``size_bytes`` the whole file's, its entries included) and its backup.
    documents = {"content": col(RunState.size_bytes), "backup": func.length(col(RunState.backup))}
    # The stored part of the bead an iteration changes (``bead_key``), if the run has one.
    read_along = (
        select(BEADS.c.part)
        .where(
            BEADS.c.run_state_id == table_of(RunState).c.id,
            BEADS.c.bead_key == bindparam("bead_key"),
        )
        .scalar_subquery()
    )

    def page(
        self, project_id: int, cursor: str | None, limit: int
    ) -> tuple[list[RunState], str | None]:
        statement = select(RunState).where(RunState.project_id == project_id).options(*SUMMARY_ONLY)
        return paginate(
            self.session, statement, RECENTLY_WRITTEN_FIRST, cursor, limit, scope=(project_id,)
        )

    def count_session(self, run_state_id: int, session_id: str) -> bool:
        """Record that a session's cost was counted; False if it already was."""
        statement = (
            conflict_insert(self.session, RunCountedSession)
            .values(run_state_id=run_state_id, session_id=session_id)
            .on_conflict_do_nothing()
            .returning(col(RunCountedSession.session_id))
        )
        return self.session.execute(statement).scalar_one_or_none() is not None


class BeadRepository:
    """A run's history entries, each as it stands in its ``state.json`` (``RunBead``): rows
    of a run's row, which its write holds locked."""

    def __init__(self, session: Session | WriteSession, run_state_id: int) -> None:
        self._source = session
        self.run_state_id = run_state_id

    def parts(self) -> list[bytes]:
        """Every entry, in the order Go writes the map: by the bytes of the bead id."""
        found = session_of(self._source).execute(PARTS, {"state_id": self.run_state_id})
        return list(found.scalars())

    def insert(self, entries: list[tuple[str, bytes, bytes]]) -> None:
        """New entries, by ``(key, bead id's UTF-8, part)``."""
        if entries:
            rows = [
                {"run_state_id": self.run_state_id, "bead_key": key, "bead": bead, "part": part}
                for key, bead, part in entries
            ]
            INSERT_BEADS.run_many(connection_of(self._source), rows)

    def replace(self, key: str, part: bytes) -> None:
        parameters = {"state_id": self.run_state_id, "key": key, "new_part": part}
        REPLACE_PART.rows(connection_of(self._source), parameters)

    def delete_all(self) -> None:
        statement = delete(RunBead).where(col(RunBead.run_state_id) == self.run_state_id)
        session_of(self._source).execute(statement)
