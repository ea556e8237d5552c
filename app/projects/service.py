"""Projects spring into being on a first write and go away with everything in them.

A project's delete holds the writer a short write at a time. Its first write takes the
project's lock, checks the client's precondition and moves the project out of its tenant's
sight (``ProjectRepository.hide``): from its commit on the project is gone for every read, list
and delete, and a write to its name makes a new, empty project, a row of its own. The hidden
project's rows are then deleted in batches, each a write of its own in the write turns
(``app/core/write_turns.py``), so that the writes queued meanwhile, any tenant's, run between
them: SQLite has one writer, and a project of 1,000 failures of 100 KB deleted in one
transaction held it 15-22 s. The delete answers once the project's last row is gone. A delete
cut short (the process ended, a write failed, the request cancelled at shutdown) leaves the
project hidden, never half visible; each start deletes the rest (``finish_deletes``).
"""

import functools
import logging
import time
from dataclasses import dataclass, field

from anyio import to_thread
from sqlmodel import Session

from app.core.conditional import Precondition, etag_of
from app.core.db import Database, WriteSession
from app.core.errors import NotFound
from app.core.json import dumps
from app.projects.models import Project
from app.projects.repository import (
    DELETING_TENANT,
    PROJECT_GONE,
    ProjectRepository,
    delete_project_rows,
    projects_being_deleted,
)
from app.projects.schemas import ProjectPublic

log = logging.getLogger(__name__)

# A delete's write deletes the project's rows a statement at a time until
# ``DELETE_WRITE_SECONDS`` have passed (or the project is gone), then commits and lets the
# writes queued behind it run. A row's delete costs from a fraction of a millisecond (an item of
# 300 bytes) to 15 ms (a failure of 100 KB of distinct words, which SQLite's full-text index
# forgets word by word): a time, not a count of rows, bounds a write. A statement starts with
# ``DELETE_BATCH_ROWS`` rows and takes twice as many after one that took under a quarter of a
# write's time, half as many after one that took over half (up to ``DELETE_BATCH_ROWS_MOST``),
# so that small rows go many at a time and large ones one at a time. With one row a statement
# always, 10,000 small items took 2.0 s (2026-11-27).
DELETE_BATCH_ROWS = 1
DELETE_BATCH_ROWS_MOST = 256
DELETE_WRITE_SECONDS = 0.02


def project_not_found(name: str) -> NotFound:
    return NotFound(f"No project {name!r}.")


def project_id(session: Session, tenant: str, name: str) -> int:
    """For reads: the project's id, or 404 (also when it belongs to another tenant)."""
    found = ProjectRepository(session).id_of(tenant, name)
    if found is None:
        raise project_not_found(name)
    return found


def _public(project: Project, counts: dict[str, int]) -> ProjectPublic:
    return ProjectPublic(
        name=project.name,
        created_at=project.created_at,
        last_write_at=project.last_write_at,
        counts=counts,
    )


def project_etag(project: ProjectPublic) -> str:
    return etag_of(dumps(project.model_dump(mode="json")))


def _load(
    repository: ProjectRepository, tenant: str, name: str, *, for_update: bool = False
) -> tuple[int, ProjectPublic]:
    project = repository.get(tenant, name, for_update=for_update)
    if project is None or project.id is None:
        raise project_not_found(name)
    return project.id, _public(project, repository.counts([project.id])[project.id])


def get_project(session: Session, tenant: str, name: str) -> ProjectPublic:
    return _load(ProjectRepository(session), tenant, name)[1]


def list_projects(
    session: Session, tenant: str, cursor: str | None, limit: int
) -> tuple[list[ProjectPublic], str | None]:
    repository = ProjectRepository(session)
    projects, next_cursor = repository.page(tenant, cursor, limit)
    counts = repository.counts([p.id for p in projects if p.id is not None])
    return [_public(p, counts[p.id]) for p in projects if p.id is not None], next_cursor


async def delete_project(
    database: Database, tenant: str, name: str, precondition: Precondition
) -> None:
    """``precondition`` receives the current ETag in the delete's first write and raises to
    stop the delete, before anything has changed."""
    # In the project's turn, as its other writes: on PostgreSQL they wait for its lock.
    hide = functools.partial(_hide, database, tenant, name, precondition)
    await _delete_rows(database, await database.write_turns.run((tenant, name), hide))


async def finish_deletes(database: Database) -> None:
    """At start: the rest of every project whose delete began and did not end (on this
    database, by any process), deleted as a delete deletes it. A failure (a database not
    reachable or not migrated yet) is logged; the next start tries again."""
    try:
        unfinished = await to_thread.run_sync(_being_deleted, database)
        for hidden in unfinished:
            log.info("finishing the delete of project %d, begun before this start", hidden)
            await _delete_rows(database, hidden)
    except Exception:
        log.warning("finishing the deletes begun before this start failed", exc_info=True)


def _being_deleted(database: Database) -> list[int]:
    with database.read_session() as session:
        return projects_being_deleted(session.connection())


def _hide(database: Database, tenant: str, name: str, precondition: Precondition) -> int:
    """The delete's first write: the project's id, once it is hidden."""
    with database.write_connection() as connection:
        sessions = WriteSession(connection)
        try:
            repository = ProjectRepository(sessions.get())
            found, public = _load(repository, tenant, name, for_update=True)
            precondition(project_etag(public))
            repository.hide(found)
            return found
        finally:
            sessions.close()


@dataclass
class _DeleteProgress:
    """Where a delete's next statement starts (the tables before ``table`` are empty), and how
    many rows it deletes."""

    table: int = 0
    rows: int = field(default_factory=lambda: DELETE_BATCH_ROWS)

    def statement_took(self, seconds: float) -> None:
        if seconds < DELETE_WRITE_SECONDS / 4:
            self.rows = min(self.rows * 2, DELETE_BATCH_ROWS_MOST)
        elif seconds > DELETE_WRITE_SECONDS / 2:
            self.rows = max(self.rows // 2, 1)


async def _delete_rows(database: Database, hidden: int) -> None:
    """The hidden project's rows, a write at a time, then its own row."""
    # The hidden project's own turn (its tenant and name now): on PostgreSQL nothing else
    # writes to it, and a new project of its old name is written meanwhile without waiting.
    turn = (DELETING_TENANT, str(hidden))
    batches = functools.partial(_delete_batches, database, hidden, _DeleteProgress())
    while not await database.write_turns.run(turn, batches):
        pass


def _delete_batches(database: Database, hidden: int, progress: _DeleteProgress) -> bool:
    """One write of the delete: statements until ``DELETE_WRITE_SECONDS`` have passed or the
    project is gone. Whether it is."""
    with database.write_connection() as connection:
        started = time.monotonic()
        while True:
            statement_started = time.monotonic()
            progress.table = delete_project_rows(connection, hidden, progress.rows, progress.table)
            if progress.table == PROJECT_GONE:
                return True
            now = time.monotonic()
            progress.statement_took(now - statement_started)
            if now - started >= DELETE_WRITE_SECONDS:
                return False
