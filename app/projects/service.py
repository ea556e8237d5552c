"""Projects spring into being on a first write and go away with everything in them.

A project's delete is one write, then a deleter's work after the answer. The write takes the
project's lock, checks the client's precondition and moves the project out of its tenant's
sight (``ProjectRepository.hide``): from its commit on the project is gone for every read, list
and delete, and a write to its name makes a new, empty project, a row of its own; the answer
(204) comes then. The app's one ``ProjectDeleter`` then deletes the hidden project's rows in
batches, each a write of its own in the write turns (``app/core/write_turns.py``), so that the
writes queued meanwhile, any tenant's, run between them: SQLite has one writer, and a project
of 1,000 failures of 100 KB deleted in one transaction held it 15-22 s. (The answer waited for
the last batch before: 107,000 decisions took 121 s, past a client's timeout, and the client's
retry was a 404.) A delete cut short (the process ended, a batch failed) leaves the project
hidden, never half visible, and the deleter finishes it: after a pause, at the next delete or
at the next start. A feature's delete and a run's hide their row in a hidden project of its own
(``Write.hide``, ``app/storage/writes.py``), which this deleter deletes as any other.
"""

import asyncio
import contextlib
import functools
import logging
import threading
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
    lock_hidden_project,
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
# A pass of the deleter that failed (the database lost, a batch that waited too long for its
# turn) is tried again after this long, or at the next delete if it comes sooner.
DELETE_RETRY_SECONDS = 30.0


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


def _found(
    repository: ProjectRepository, tenant: str, name: str, *, for_update: bool = False
) -> tuple[int, Project]:
    project = repository.get(tenant, name, for_update=for_update)
    if project is None or project.id is None:
        raise project_not_found(name)
    return project.id, project


def _load(repository: ProjectRepository, tenant: str, name: str) -> ProjectPublic:
    found, project = _found(repository, tenant, name)
    return _public(project, repository.counts([found])[found])


def get_project(session: Session, tenant: str, name: str) -> ProjectPublic:
    return _load(ProjectRepository(session), tenant, name)


def list_projects(
    session: Session, tenant: str, cursor: str | None, limit: int
) -> tuple[list[ProjectPublic], str | None]:
    repository = ProjectRepository(session)
    projects, next_cursor = repository.page(tenant, cursor, limit)
    counts = repository.counts([p.id for p in projects if p.id is not None])
    return [_public(p, counts[p.id]) for p in projects if p.id is not None], next_cursor


class ProjectDeleter:
    """The one task of an app that deletes the hidden projects' rows, a project after another:
    a tenant that sends many deletes puts one delete's batches at a time in front of the other
    tenants' writes, not as many as it sent. Woken at start (the deletes an earlier process
    began and did not end, on this database, by any process) and by every delete once its
    project is hidden; started and stopped (cancelled) by the app's lifespan
    (``app/main.py``)."""

    def __init__(self, database: Database) -> None:
        self._database = database
        self._woken = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        # The wakes asked for, and those the last pass that ended answered (every wake asked
        # for before it began): ``wait_until_idle`` compares them from another thread.
        self._passes = threading.Condition()
        self._asked = 0
        self._answered = 0

    def start(self) -> None:
        """On the app's event loop: the task, woken once."""
        self._loop = asyncio.get_running_loop()
        self._task = self._loop.create_task(self._run(), name="project-deleter")
        self.wake()

    async def stop(self) -> None:
        """The task cancelled, and ended: a batch already running still commits (a write
        turn's write ends as it would have), and the project it was deleting stays hidden."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def wake(self) -> None:
        """A pass soon. From any thread: a test's client may serve a request on an event loop
        of its own. Once stopped, nothing: the next start finishes what is hidden."""
        with self._passes:
            self._asked += 1
        if self._loop is not None and self._task is not None and not self._task.done():
            self._loop.call_soon_threadsafe(self._woken.set)

    def wait_until_idle(self, timeout: float) -> bool:
        """From a thread other than the app's event loop: whether, within ``timeout``
        seconds, a pass begun after every wake asked for so far has ended (every project
        hidden before this call is gone)."""
        with self._passes:
            asked = self._asked
            return self._passes.wait_for(lambda: self._answered >= asked, timeout)

    async def _run(self) -> None:
        while True:
            await self._woken.wait()
            self._woken.clear()
            with self._passes:
                asked = self._asked
            try:
                await self._delete_hidden()
            except Exception:
                log.warning(
                    "deleting the rows of deleted projects failed; tried again in %s s, or at "
                    "the next delete",
                    DELETE_RETRY_SECONDS,
                    exc_info=True,
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._woken.wait(), DELETE_RETRY_SECONDS)
                self._woken.set()
                continue
            with self._passes:
                self._answered = asked
                self._passes.notify_all()

    async def _delete_hidden(self) -> None:
        """Every hidden project's rows, a project after another, until none is left (those
        hidden meanwhile included, by this process or another)."""
        while hidden := await to_thread.run_sync(_being_deleted, self._database):
            for project in hidden:
                await _delete_rows(self._database, project)


async def delete_project(
    database: Database,
    deleter: ProjectDeleter,
    tenant: str,
    name: str,
    precondition: Precondition | None,
) -> None:
    """Hides the project and wakes the deleter, which deletes its rows after the answer.
    ``precondition`` receives the current ETag in the hiding write and raises to stop the
    delete, before anything has changed; without one the ETag is not worked out (it counts
    every resource of the project, 0.1-0.27 s of the write for 20,000 items)."""
    # In the project's turn, as its other writes: on PostgreSQL they wait for its lock.
    hide = functools.partial(_hide, database, deleter, tenant, name, precondition)
    await database.write_turns.run((tenant, name), hide)


def _being_deleted(database: Database) -> list[int]:
    with database.read_session() as session:
        return projects_being_deleted(session.connection())


def _hide(
    database: Database,
    deleter: ProjectDeleter,
    tenant: str,
    name: str,
    precondition: Precondition | None,
) -> None:
    """The delete's write: the project hidden, and the deleter woken once it has committed."""
    with database.write_connection() as connection:
        sessions = WriteSession(connection)
        try:
            repository = ProjectRepository(sessions.get())
            found, project = _found(repository, tenant, name, for_update=True)
            if precondition is not None:
                precondition(project_etag(_public(project, repository.counts([found])[found])))
            repository.hide(found)
        finally:
            sessions.close()
    # Here, in the write's thread, rather than in the request once its turn has returned: a
    # request cancelled during its write (the server stopping) does not wait for it, and the
    # write commits all the same.
    deleter.wake()


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
        # Another process's deleter may be on this project too (each looks at its start):
        # their writes take turns on the project's row.
        if not lock_hidden_project(connection, hidden):
            return True
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
