"""The rules for atari run state: strict import, the tool's load, atomic iteration updates."""

import math
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session

from app.core import redaction
from app.core.conditional import Precondition, etag_of
from app.core.db import utcnow
from app.core.errors import Conflict, NotFound
from app.formats import atari_state, jsondoc
from app.projects.service import project_id, touch_project
from app.redaction import redact_pointer, redact_value
from app.runs.models import RunState
from app.runs.repository import RunRepository
from app.runs.schemas import (
    BeadEntry,
    IterationEnd,
    IterationResult,
    IterationStart,
    LoadResult,
    Notice,
    RunSummary,
    StatePatch,
    StateReceipt,
)

"""Receives the current ETag (None when the run has no state yet) and raises to refuse."""


@dataclass(frozen=True)
class RunFile:
    etag: str
    content: bytes


def summary(row: RunState) -> RunSummary:
    return RunSummary(
        run=row.run,
        version=row.version,
        status=row.status,
        iteration=row.iteration,
        current_bead=row.current_bead or None,
        total_cost=row.total_cost,
        total_turns=row.total_turns,
        updated_at=row.updated_at,
        has_backup=row.backup is not None,
        modified_at=row.modified_at,
        etag=row.etag,
    )


def _notices(notes: list[atari_state.Note]) -> list[Notice]:
    # A note may quote a key the client sent: never a secret in it.
    return [
        Notice(path=redact_pointer(note.path), message=redact_value(note.message)) for note in notes
    ]


@dataclass(frozen=True)
class RenderedState:
    """A state redacted and rendered: everything that needs no database."""

    state: dict[str, Any]
    content: bytes


def _rendered(state: dict[str, Any]) -> RenderedState:
    # Redaction changes strings only, so the typed fields Go reads stay valid.
    state = redaction.for_storage(state)
    return RenderedState(state, atari_state.render(state))


def _store(repository: RunRepository, row: RunState, state: dict[str, Any]) -> RunState:
    return _store_rendered(repository, row, _rendered(state))


def _store_rendered(repository: RunRepository, row: RunState, rendered: RenderedState) -> RunState:
    """Set every column derived from the document."""
    state = rendered.state
    row.content = rendered.content
    row.etag = etag_of(rendered.content)
    row.version = state["version"]
    row.status = state["status"]
    row.iteration = state["iteration"]
    row.current_bead = state.get("current_bead", "")
    row.total_cost = state["total_cost"]
    row.total_turns = state["total_turns"]
    row.updated_at = state["updated_at"]
    row.modified_at = utcnow()
    return repository.save(row)


def _document(row: RunState) -> dict[str, Any]:
    return atari_state.parse(row.content)[0]


def _not_found(run: str) -> NotFound:
    return NotFound(f"Run {run!r} has no state in this project.")


def _find(session: Session, tenant: str, project: str, run: str) -> RunState:
    row = RunRepository(session).get(project_id(session, tenant, project), run)
    if row is None:
        raise _not_found(run)
    return row


def _lock(
    session: Session, tenant: str, project: str, run: str, precondition: Precondition
) -> tuple[RunRepository, RunState | None, int]:
    """For a write: the run's row, locked until the transaction ends (None if it is new)."""
    owner = touch_project(session, tenant, project)
    repository = RunRepository(session)
    row = repository.get(owner, run, for_update=True)
    precondition(row.etag if row is not None else None)
    return repository, row, owner


def _lock_existing(
    session: Session, tenant: str, project: str, run: str, precondition: Precondition
) -> tuple[RunRepository, RunState]:
    repository, row, _ = _lock(session, tenant, project, run, precondition)
    if row is None:
        raise _not_found(run)
    return repository, row


def put_state(
    session: Session, tenant: str, project: str, run: str, raw: bytes, precondition: Precondition
) -> tuple[StateReceipt, bool]:
    """Store a document as it is (version 1 or 2); True when the run is new."""
    state, notes = atari_state.parse(raw)
    repository, row, owner = _lock(session, tenant, project, run, precondition)
    created = row is None
    # A new row's document columns: _store.
    row = _store(repository, row or RunState(project_id=owner, run=run), state)  # type: ignore[call-arg]
    return StateReceipt(**summary(row).model_dump(), notices=_notices(notes)), created


def prepare_backup(raw: bytes) -> bytes:
    """A backup as it is stored: its bytes, redacted (see ``bytes_for_storage``)."""
    return redaction.bytes_for_storage(raw)


def _set_backup(row: RunState, backup: bytes) -> None:
    row.backup = backup
    row.backup_etag = etag_of(backup)


@dataclass(frozen=True)
class PreparedLoad:
    """atari's load of a file, done: the state to store and, when the file was set aside,
    the backup it becomes; everything that needs no database."""

    loaded: atari_state.Loaded
    rendered: RenderedState
    backup: bytes | None


def prepare_load(raw: bytes) -> PreparedLoad:
    loaded = atari_state.load(raw, utcnow())
    # As atari renames the file to state.json.backup: the previous backup is replaced.
    backup = prepare_backup(raw) if loaded.outcome == "reset" else None
    return PreparedLoad(loaded, _rendered(loaded.state), backup)


def load_state(session: Session, tenant: str, project: str, run: str, raw: bytes) -> LoadResult:
    """atari's own load of a file from disk (see ``atari_state.load``)."""
    return store_load(session, tenant, project, run, prepare_load(raw))


def store_load(
    session: Session, tenant: str, project: str, run: str, prepared: PreparedLoad
) -> LoadResult:
    loaded = prepared.loaded
    repository, row, owner = _lock(session, tenant, project, run, lambda _etag: None)
    # A new row's document columns: _store_rendered.
    row = row or RunState(project_id=owner, run=run)  # type: ignore[call-arg]
    if prepared.backup is not None:
        _set_backup(row, prepared.backup)
    row = _store_rendered(repository, row, prepared.rendered)
    return LoadResult(
        outcome=loaded.outcome,
        reason=loaded.reason,
        file_version=loaded.file_version,
        backup_size=len(row.backup or b"") if prepared.backup is not None else None,
        notices=_notices(loaded.notes),
        state=summary(row),
    )


def store_backup(
    session: Session, tenant: str, project: str, run: str, backup: bytes
) -> RunSummary:
    """Set a run's backup to the bytes ``prepare_backup`` gave, as a ``state.json.backup``
    beside its ``state.json`` on disk (the project archive's import). The run must have a
    state."""
    repository, row = _lock_existing(session, tenant, project, run, lambda _etag: None)
    _set_backup(row, backup)
    row.modified_at = utcnow()
    return summary(repository.save(row))


def get_file(session: Session, tenant: str, project: str, run: str) -> RunFile:
    row = _find(session, tenant, project, run)
    return RunFile(etag=row.etag, content=row.content)


def get_backup(session: Session, tenant: str, project: str, run: str) -> RunFile:
    row = _find(session, tenant, project, run)
    if row.backup is None or row.backup_etag is None:
        raise NotFound(f"Run {run!r} has no backup: state:load never set a file aside.")
    return RunFile(etag=row.backup_etag, content=row.backup)


def list_runs(
    session: Session, tenant: str, project: str, cursor: str | None, limit: int
) -> tuple[list[RunSummary], str | None]:
    rows, next_cursor = RunRepository(session).page(
        project_id(session, tenant, project), cursor, limit
    )
    return [summary(row) for row in rows], next_cursor


def _entry(state: dict[str, Any], bead_id: str) -> BeadEntry:
    entry = state["history"][bead_id]
    return BeadEntry(
        id=entry["id"],
        status=entry["status"],
        attempts=entry["attempts"],
        last_attempt=entry["last_attempt"],
        last_error=entry.get("last_error"),
        last_session_id=entry.get("last_session_id"),
    )


def _incremented(value: int, by: int, name: str) -> int:
    if value + by not in jsondoc.INT64:
        raise Conflict(f"{name} would no longer fit in a 64-bit integer.")
    return value + by


def _added_cost(total: float, cost: float) -> float:
    if not math.isfinite(total + cost):
        raise Conflict("total_cost would no longer be a finite number.")
    return total + cost


def start_iteration(
    session: Session,
    tenant: str,
    project: str,
    run: str,
    start: IterationStart,
    precondition: Precondition,
) -> IterationResult:
    """atari's IterationStartEvent. A run without state starts from a fresh one, as atari does."""
    repository, row, owner = _lock(session, tenant, project, run, precondition)
    now = utcnow()
    state = _document(row) if row is not None else atari_state.fresh(now)
    history = state["history"]
    entry = history.setdefault(start.bead_id, {"id": start.bead_id, "attempts": 0})
    state["iteration"] = _incremented(state["iteration"], 1, "iteration")
    state["current_bead"] = start.bead_id
    entry["status"] = "working"
    entry["attempts"] = (
        start.attempt
        if start.attempt is not None
        else _incremented(entry["attempts"], 1, "attempts")
    )
    entry["last_attempt"] = start.at or atari_state.go_time(now)
    state["updated_at"] = atari_state.go_time(now)
    # A new row's document columns: _store.
    row = _store(repository, row or RunState(project_id=owner, run=run), state)  # type: ignore[call-arg]
    return IterationResult(state=summary(row), entry=_entry(state, start.bead_id))


def end_iteration(
    session: Session,
    tenant: str,
    project: str,
    run: str,
    end: IterationEnd,
    precondition: Precondition,
) -> IterationResult:
    """atari's IterationEndEvent; cost and turns are added once per session id."""
    repository, row = _lock_existing(session, tenant, project, run, precondition)
    state = _document(row)
    entry = state["history"].get(end.bead_id)
    if entry is None:
        raise Conflict(f"Bead {end.bead_id!r} has no history entry: start an iteration first.")
    state.pop("current_bead", None)
    entry["status"] = end.outcome
    if end.outcome == "failed":
        # atari replaces the last error, also with none (and then omits the field).
        entry["last_error"] = end.error or ""
        if not entry["last_error"]:
            del entry["last_error"]
    if end.session_id is not None:
        entry["last_session_id"] = end.session_id
    assert row.id is not None
    counted = end.session_id is None or repository.count_session(row.id, end.session_id)
    if counted:
        state["total_cost"] = _added_cost(state["total_cost"], end.cost)
        state["total_turns"] = _incremented(state["total_turns"], end.turns, "total_turns")
    state["updated_at"] = atari_state.go_time(utcnow())
    row = _store(repository, row, state)
    return IterationResult(state=summary(row), entry=_entry(state, end.bead_id), counted=counted)


def patch_state(
    session: Session,
    tenant: str,
    project: str,
    run: str,
    patch: StatePatch,
    precondition: Precondition,
) -> RunSummary:
    repository, row = _lock_existing(session, tenant, project, run, precondition)
    state = _document(row)
    for name in sorted(patch.model_fields_set):
        value = getattr(patch, name)
        if name != "status" and value in (None, "", []):
            state.pop(name, None)
        else:
            state[name] = value
    state["updated_at"] = atari_state.go_time(utcnow())
    return summary(_store(repository, row, state))


def delete_run(
    session: Session, tenant: str, project: str, run: str, precondition: Precondition
) -> None:
    repository, row = _lock_existing(session, tenant, project, run, precondition)
    repository.delete(row)
