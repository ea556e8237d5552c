"""A write: the one way a service changes a project.

Locks are always taken in one order, so that two writes never wait on each other's locks in
opposite orders (a deadlock on PostgreSQL): the project's row first (``begin_write``, which
also creates the project on its first write and records the write), then the Idempotency-Key
(``app/storage/route.py``), then the resource's row (``Write.locked``). A service gets a
``Write`` only from ``begin_write``, so it cannot change a project without its lock, or take
that lock late. A write that then fails (a 404 for what it was to change) rolls back, the
project it would have created included.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session

from app.core.conditional import Precondition
from app.core.db import RowT, WriteSession, utcnow
from app.core.deps import take_key_confirmation
from app.core.documents import StoredDocument
from app.core.errors import NotFound
from app.projects.repository import new_hidden_project, project_id, touch_project
from app.projects.service import project_not_found
from app.storage.repository import ProjectScopedRepository


@dataclass(frozen=True)
class Write:
    """A write in progress: its transaction (``sessions``: the connection, and the ORM session
    over it, ``session``, made on first use), and the project it changes, whose row it holds
    locked until commit."""

    sessions: WriteSession
    tenant: str
    project: str
    project_id: int

    @property
    def session(self) -> Session:
        return self.sessions.get()

    def locked(
        self,
        repository: ProjectScopedRepository[RowT],
        *key: Any,
        precondition: Precondition | None = None,
    ) -> RowT | None:
        """The resource's row (None when it does not exist), locked, and the client's
        precondition checked against the version this write will change."""
        return _checked(repository.get(self.project_id, *key, for_update=True), precondition)

    def existing(
        self,
        repository: ProjectScopedRepository[RowT],
        *key: Any,
        missing: NotFound,
        precondition: Precondition | None = None,
    ) -> RowT:
        """As ``locked``, for a change to a row that must exist: ``missing`` when it does not."""
        row = repository.get(self.project_id, *key, for_update=True)
        return _required(row, missing, precondition)

    def locked_with(
        self,
        repository: ProjectScopedRepository[RowT],
        *key: Any,
        bound: Mapping[str, Any],
        precondition: Precondition | None = None,
    ) -> tuple[RowT | None, Any]:
        """As ``locked``, and the repository's ``read_along`` value for the row (``bound``: its
        parameters), read with it."""
        row, value = repository.locked_with(self.project_id, *key, **bound)
        return _checked(row, precondition), value

    def existing_with(
        self,
        repository: ProjectScopedRepository[RowT],
        *key: Any,
        bound: Mapping[str, Any],
        missing: NotFound,
        precondition: Precondition | None = None,
    ) -> tuple[RowT, Any]:
        """As ``existing``, and the repository's ``read_along`` value for the row (``bound``:
        its parameters), read with it."""
        row, value = repository.locked_with(self.project_id, *key, **bound)
        return _required(row, missing, precondition), value

    def hide(self, repository: ProjectScopedRepository[RowT], row: RowT) -> None:
        """A delete of ``row`` and of every row that hangs from it (a feature's handovers, a
        run's beads), in a write as short as the row: it moves into a new hidden project
        (``new_hidden_project``), gone from every read, list and count of its project from
        this write's commit, its name free, and the deleter deletes it after the answer, a
        short write at a time (``Writes.hide`` wakes it). Deleted here, its rows went with it
        in one statement, as long as they were many: SQLite's one writer, and every tenant's
        writes, waited 1.66 s for a feature of 3,000 handovers of 100 KB."""
        hidden = new_hidden_project(self.sessions.connection, utcnow())
        repository.store(row, {"project_id": hidden})


def _checked(row: RowT | None, precondition: Precondition | None) -> RowT | None:
    """``row``, once the client's precondition holds against its ETag (None: no such row yet)."""
    if precondition is not None:
        document: StoredDocument | None = row  # type: ignore[assignment]  # a row with a precondition stores a document
        precondition(None if document is None else document.etag)
    return row


def _required(row: RowT | None, missing: NotFound, precondition: Precondition | None) -> RowT:
    """``row``, which must exist (``missing`` first, before any precondition), checked."""
    if row is None:
        raise missing
    _checked(row, precondition)
    return row


def begin_write(sessions: WriteSession, tenant: str, project: str, *, create: bool = True) -> Write:
    """Lock the project's row (creating the project on its first write) and begin the write.
    Without ``create``, a project that does not exist is a 404 and stays so (a change that
    only takes away: a prune)."""
    connection = sessions.connection
    # The request's key, when still to be confirmed active: in the upsert's own statement.
    key = take_key_confirmation()
    if not create:
        # Confirmed before the project is looked for: a revoked key is a 401, never told
        # whether a project exists.
        if key is not None:
            key.confirm(connection)
            key = None
        if project_id(connection, tenant, project, locked=True) is None:
            raise project_not_found(project)
    touched = touch_project(
        connection, tenant, project, utcnow(), confirming_key=None if key is None else key.key_id
    )
    if touched is None:
        assert key is not None, "only a revoked key leaves the project untouched"
        raise key.refused()
    return Write(sessions, tenant=tenant, project=project, project_id=touched)
