"""The rules for atari run state: strict import, the tool's load, atomic iteration updates.

A state is kept as its parts (``app/core/documents.py`` ``PartedDocument``): its head, and its
history's entries in rows of their own (``RunBead``). Storing a whole state writes them all;
an iteration's start or end reads and writes the head and its bead's entry alone, a patch the
head alone, so that their cost does not grow with the run. Only what they change is redacted
(the head, small, and the entry where it stands): redaction works value by value, so the
whole document's redaction is its parts'. A bead id that redaction would change (a secret as
an id: it must then be numbered against the other keys) is stored whole.
"""

import math
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session

from app.core import redaction
from app.core.conditional import Precondition, etag_of
from app.core.db import utcnow
from app.core.documents import (
    ANY_SIZE,
    Download,
    changed_parts_columns,
    check_size,
    parted_columns,
    whole_content,
)
from app.core.errors import Conflict, NotFound
from app.formats import atari_state, jsondoc, parts
from app.formats.errors import Notes
from app.projects.service import project_id
from app.redaction import redact_pointer, redact_value
from app.runs.models import RunState, bead_key
from app.runs.repository import BeadRepository, RunRepository
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
from app.storage.writes import Write


def summary(row: RunState) -> RunSummary:
    return RunSummary(
        run=row.run,
        version=row.version,
        status=row.status,
        iteration=row.iteration,
        current_bead=row.current_bead or None,
        total_cost=row.total_cost,
        total_turns=row.total_turns,
        updated_at=row.state_updated_at,
        # Its tag, not its bytes: a list of summaries reads no backup (set together).
        has_backup=row.backup_etag is not None,
        modified_at=row.updated_at,
        etag=row.etag,
    )


def _notices(notes: Notes[atari_state.Note]) -> list[Notice]:
    # A note may quote a key the client sent: never a secret in it.
    return [
        Notice(path=redact_pointer(note.path), message=redact_value(note.message)) for note in notes
    ]


@dataclass(frozen=True)
class RenderedState:
    """A state redacted and split into its parts: everything that needs no database."""

    state: dict[str, Any]
    head: parts.Head
    entries: list[tuple[str, bytes]]


def _rendered(state: dict[str, Any]) -> RenderedState:
    # Redaction changes strings only, so the typed fields Go reads stay valid.
    state = redaction.for_storage(state)
    head, entries = atari_state.split(state)
    return RenderedState(state, head, entries)


def _state_columns(state: dict[str, Any]) -> dict[str, Any]:
    """The columns read from the state (its head holds them all)."""
    return {
        "version": state["version"],
        "status": state["status"],
        "iteration": state["iteration"],
        "current_bead": state.get("current_bead", ""),
        "total_cost": state["total_cost"],
        "total_turns": state["total_turns"],
        "state_updated_at": state["updated_at"],
    }


def _store(write: Write, row: RunState, rendered: RenderedState) -> RunState:
    """Store a whole state in the run's row, its head and its entries' rows, and every column
    read from it."""
    replacing = row.id is not None
    columns = parted_columns(rendered.head, [part for _bead, part in rendered.entries])
    for name, value in (columns | _state_columns(rendered.state)).items():
        setattr(row, name, value)
    row = RunRepository(write.sessions).add(row)
    assert row.id is not None
    beads = BeadRepository(write.sessions, row.id)
    if replacing:
        beads.delete_all()
    beads.insert([(bead_key(bead), bead.encode("utf-8"), part) for bead, part in rendered.entries])
    return row


def _store_change(
    write: Write, row: RunState, state: dict[str, Any], bead: str | None, old: bytes | None
) -> RunState:
    """Store a change to a state kept as its parts: ``state`` is its head with, in its
    history, ``bead``'s entry alone (None: no entry changed), whose stored part was ``old``
    (None: a new entry). The head and the entry are redacted here."""
    assert row.id is not None and row.parts_at is not None
    head_state = redaction.for_storage({**state, "history": {}})
    head, _entries = atari_state.split(head_state)
    if bead is None:
        columns = changed_parts_columns(row, head)
    else:
        entry = state["history"][bead]
        redaction.for_storage({"history": {bead: entry}})
        part = atari_state.entry_part(bead, entry)
        columns = changed_parts_columns(row, head, part, replaced=old)
        beads = BeadRepository(write.sessions, row.id)
        if old is None:
            beads.insert([(bead_key(bead), bead.encode("utf-8"), part)])
        else:
            beads.replace(bead_key(bead), part)
    RunRepository(write.sessions).store(row, columns | _state_columns(head_state))
    return row


@dataclass
class Loaded:
    """A run's state as a change needs it: whole, or (``parted``) its head with, in its
    history, the one bead's entry (if it has one), whose stored part is ``old``."""

    state: dict[str, Any]
    parted: bool
    old: bytes | None = None


def _load(write: Write, row: RunState, bead: str | None, part: bytes | None) -> Loaded:
    """What a change to ``bead``'s entry (None: to the head alone) reads of the run; ``part``
    is the bead's stored part as read with the run's row (``_bead_of``), None when it has
    none."""
    if row.parts_at is None or (bead is not None and redact_value(bead) != bead):
        return Loaded(_document(write.session, row), parted=False)
    state = atari_state.parse(row.content)[0]
    if bead is None:
        return Loaded(state, parted=True)
    if part is not None:
        state["history"][bead] = atari_state.entry_of_part(part)[1]
    return Loaded(state, parted=True, old=part)


def _bead_of(bead: str) -> dict[str, str]:
    """What a run's look-up binds to read ``bead``'s stored part with the row."""
    return {"bead_key": bead_key(bead)}


def _save(write: Write, row: RunState, loaded: Loaded, bead: str | None) -> RunState:
    if loaded.parted:
        return _store_change(write, row, loaded.state, bead, loaded.old)
    return _store(write, row, _rendered(loaded.state))


def _new_run(write: Write, run: str) -> RunState:
    """A run's row before its first state is stored in it."""
    return RunState(project_id=write.project_id, run=run)  # type: ignore[call-arg]  # _store sets the rest


def _whole(session: Session, row: RunState) -> bytes:
    """The file's bytes: the head joined with the entries."""
    run_id = row.id
    assert run_id is not None
    return whole_content(row, lambda: BeadRepository(session, run_id).parts())


def _document(session: Session, row: RunState) -> dict[str, Any]:
    return atari_state.parse(_whole(session, row))[0]


def _not_found(run: str) -> NotFound:
    return NotFound(f"Run {run!r} has no state in this project.")


def _existing(write: Write, run: str, precondition: Precondition | None = None) -> RunState:
    return write.existing(
        RunRepository(write.sessions), run, missing=_not_found(run), precondition=precondition
    )


@dataclass(frozen=True)
class PreparedState:
    """A state document parsed, redacted and rendered, and what its parse noted."""

    rendered: RenderedState
    notes: Notes[atari_state.Note]


def prepare_state(raw: bytes) -> PreparedState:
    state, notes = atari_state.parse(raw)
    return PreparedState(_rendered(state), notes)


def put_state(
    write: Write, run: str, prepared: PreparedState, precondition: Precondition
) -> tuple[StateReceipt, bool]:
    """Store a document as it is (version 1 or 2); True when the run is new."""
    row = write.locked(RunRepository(write.sessions), run, precondition=precondition)
    created = row is None
    row = _store(write, row or _new_run(write, run), prepared.rendered)
    notices = _notices(prepared.notes)
    receipt = StateReceipt(
        **summary(row).model_dump(), notices=notices, notices_truncated=prepared.notes.more
    )
    return receipt, created


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


def store_load(write: Write, run: str, prepared: PreparedLoad) -> LoadResult:
    """atari's own load of a file from disk (see ``atari_state.load``)."""
    loaded = prepared.loaded
    row = write.locked(RunRepository(write.sessions), run) or _new_run(write, run)
    if prepared.backup is not None:
        _set_backup(row, prepared.backup)
    row = _store(write, row, prepared.rendered)
    return LoadResult(
        outcome=loaded.outcome,
        reason=loaded.reason,
        file_version=loaded.file_version,
        backup_size=len(prepared.backup) if prepared.backup is not None else None,
        notices=_notices(loaded.notes),
        notices_truncated=loaded.notes.more,
        state=summary(row),
    )


def store_backup(write: Write, run: str, backup: bytes) -> RunSummary:
    """Set a run's backup to the bytes ``prepare_backup`` gave, as a ``state.json.backup``
    beside its ``state.json`` on disk (the project archive's import). The run must have a
    state."""
    row = _existing(write, run)
    _set_backup(row, backup)
    row.updated_at = utcnow()
    return summary(RunRepository(write.sessions).add(row))


def _read(
    session: Session, tenant: str, project: str, run: str, document: str, up_to: int
) -> tuple[RunState, int]:
    """The run's row and the size of its ``document``, read only if at most ``up_to``."""
    pid = project_id(session, tenant, project)
    found = RunRepository(session).get_within(pid, run, document=document, up_to=up_to)
    if found is None:
        raise _not_found(run)
    return found


def get_file(
    session: Session, tenant: str, project: str, run: str, up_to: int = ANY_SIZE
) -> Download:
    """The state file; ``Oversized``, and none of it read, when over ``up_to`` bytes."""
    row, size = _read(session, tenant, project, run, "content", up_to)
    check_size(row.etag, size, up_to)
    return Download(filename=atari_state.FILENAME, etag=row.etag, content=_whole(session, row))


def get_backup(
    session: Session, tenant: str, project: str, run: str, up_to: int = ANY_SIZE
) -> Download:
    """The backup; ``Oversized``, and none of it read, when over ``up_to`` bytes."""
    row, size = _read(session, tenant, project, run, "backup", up_to)
    if row.backup_etag is None:
        raise NotFound(f"Run {run!r} has no backup: state:load never set a file aside.")
    check_size(row.backup_etag, size, up_to)
    assert row.backup is not None  # set with its ETag
    return Download(filename=atari_state.BACKUP_FILENAME, etag=row.backup_etag, content=row.backup)


def list_runs(
    session: Session, tenant: str, project: str, cursor: str | None, limit: int
) -> tuple[list[RunSummary], str | None]:
    rows, next_cursor = RunRepository(session).page(
        project_id(session, tenant, project), cursor, limit
    )
    return [summary(row) for row in rows], next_cursor


def _entry(entry: dict[str, Any]) -> BeadEntry:
    """The entry as stored: redacted in place (not looked up by its id, which redaction
    changes when it holds a secret)."""
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
    write: Write, run: str, start: IterationStart, precondition: Precondition
) -> IterationResult:
    """atari's IterationStartEvent. A run without state starts from a fresh one, as atari does."""
    row, part = write.locked_with(
        RunRepository(write.sessions),
        run,
        bound=_bead_of(start.bead_id),
        precondition=precondition,
    )
    now = utcnow()
    if row is None:
        row, loaded = _new_run(write, run), Loaded(atari_state.fresh(now), parted=False)
    else:
        loaded = _load(write, row, start.bead_id, part)
    state = loaded.state
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
    row = _save(write, row, loaded, start.bead_id)
    return IterationResult(state=summary(row), entry=_entry(entry))


def end_iteration(
    write: Write, run: str, end: IterationEnd, precondition: Precondition
) -> IterationResult:
    """atari's IterationEndEvent; cost and turns are added once per session id."""
    row, part = write.existing_with(
        RunRepository(write.sessions),
        run,
        bound=_bead_of(end.bead_id),
        missing=_not_found(run),
        precondition=precondition,
    )
    loaded = _load(write, row, end.bead_id, part)
    state = loaded.state
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
    counted = end.session_id is None or RunRepository(write.sessions).count_session(
        row.id, end.session_id
    )
    if counted:
        state["total_cost"] = _added_cost(state["total_cost"], end.cost)
        state["total_turns"] = _incremented(state["total_turns"], end.turns, "total_turns")
    state["updated_at"] = atari_state.go_time(utcnow())
    row = _save(write, row, loaded, end.bead_id)
    return IterationResult(state=summary(row), entry=_entry(entry), counted=counted)


def patch_state(
    write: Write, run: str, patch: StatePatch, precondition: Precondition
) -> RunSummary:
    row = _existing(write, run, precondition)
    loaded = _load(write, row, None, None)
    state = loaded.state
    for name in sorted(patch.model_fields_set):
        value = getattr(patch, name)
        if name != "status" and value in (None, "", []):
            state.pop(name, None)
        else:
            state[name] = value
    state["updated_at"] = atari_state.go_time(utcnow())
    return summary(_save(write, row, loaded, None))


def delete_run(write: Write, run: str, precondition: Precondition) -> None:
    """The run's state hidden with its beads and counted sessions, which the deleter deletes
    after the answer, as many as they are (``Write.hide``)."""
    write.hide(RunRepository(write.sessions), _existing(write, run, precondition))
