"""The rules for feature contexts: import and export, merge patch, handovers, reviews; and the
feature's task graph, ``workflow.json``.

Every change to a context is a read-modify-write of its document under the row's lock
(``Write.existing``), and the handover rows change in the same transaction as the document,
so that the list of handovers always says what the contexts say.

A context is kept as its parts (``app/core/documents.py`` ``PartedDocument``): its head, and
its handover notes, whose rows are the members of ``handover_notes.history``. Storing a whole
document writes them all; a handover appends one row and rewrites the head, a review or a
reset rewrites the head alone, and neither reads the other notes: their cost does not grow
with the feature. Only the new note (and not the head, stored redacted) is redacted: redaction
works value by value, so the whole document's redaction is its parts'.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel
from sqlmodel import Session

from app.core import redaction
from app.core.conditional import Precondition
from app.core.db import utcnow
from app.core.documents import (
    ANY_SIZE,
    Download,
    changed_parts_columns,
    check_size,
    parted_columns,
    set_content,
    whole_content,
)
from app.core.errors import Conflict, NotFound
from app.features import breaker
from app.features.models import FeatureContext, FeatureWorkflow, Handover
from app.features.repository import FeatureRepository, HandoverRepository, WorkflowRepository
from app.features.schemas import FeatureSummary, WorkflowSummary
from app.formats import feature_context, feature_workflow, jsondoc, parts
from app.projects.service import project_id
from app.redaction import Redactions
from app.storage.repository import ProjectScopedRepository
from app.storage.writes import Write

FileRow = TypeVar("FileRow", FeatureContext, FeatureWorkflow)
Prepared = TypeVar("Prepared")


@dataclass(frozen=True)
class FeatureFile(Generic[FileRow, Prepared]):
    """A document a feature keeps whole, one row a feature: its ``context.json`` (the feature
    itself) or its ``workflow.json``. Both are downloaded and stored alike; ``prepare`` is what
    storing one does without the database, ``store`` the write (True: created)."""

    filename: str
    model: type[FileRow]
    repository: type[ProjectScopedRepository[FileRow]]
    summary: type[BaseModel]
    missing: str
    prepare: Callable[[bytes], Prepared]
    store: Callable[[Write, str, Prepared, Precondition], tuple[FileRow, bool]]

    def not_found(self, feature_id: str) -> NotFound:
        return NotFound(self.missing.format(feature_id))


def download(
    session: Session,
    tenant: str,
    project: str,
    file: FeatureFile[Any, Any],
    feature_id: str,
    up_to: int = ANY_SIZE,
) -> Download:
    """The feature's file, byte for byte as stored; ``Oversized``, and none of it read, when
    over ``up_to`` bytes."""
    pid = project_id(session, tenant, project)
    found = file.repository(session).get_within(pid, feature_id, document="content", up_to=up_to)
    if found is None:
        raise file.not_found(feature_id)
    row, size = found
    check_size(row.etag, size, up_to)
    return Download(filename=file.filename, etag=row.etag, content=_whole(session, row))


def _whole(session: Session, row: "FeatureContext | FeatureWorkflow") -> bytes:
    """The file's bytes: a context's head joined with its notes; a workflow as stored."""
    if not isinstance(row, FeatureContext):
        return row.content
    context_id = row.id
    assert context_id is not None
    return whole_content(row, lambda: HandoverRepository(session).notes(context_id))


def _locked_or_new(
    write: Write,
    file: FeatureFile[FileRow, Any],
    feature_id: str,
    precondition: Precondition | None,
) -> tuple[FileRow, bool]:
    """The feature's row of ``file``, locked, the precondition checked against it; a new row
    (and True) when the feature has none."""
    row = write.locked(file.repository(write.sessions), feature_id, precondition=precondition)
    if row is None:
        # The file's columns: _set_file, once the caller has the content.
        new = file.model(project_id=write.project_id, feature_id=feature_id)  # type: ignore[call-arg]
        return new, True
    return row, False


def _set_file(row: FeatureWorkflow, content: bytes) -> None:
    set_content(row, content)
    row.size_bytes = len(content)


def delete_workflow(write: Write, feature_id: str, precondition: Precondition) -> None:
    """Delete the feature's ``workflow.json`` alone."""
    repository = WorkflowRepository(write.sessions)
    missing = WORKFLOW.not_found(feature_id)
    repository.delete(
        write.existing(repository, feature_id, missing=missing, precondition=precondition)
    )


def delete_feature(write: Write, feature_id: str, precondition: Precondition) -> None:
    """Delete the feature: its context is hidden with its handovers, which the deleter deletes
    after the answer, as many as they are (``Write.hide``), and its ``workflow.json``, one row
    of at most a body's size, is deleted here."""
    repository = FeatureRepository(write.sessions)
    missing = CONTEXT.not_found(feature_id)
    write.hide(
        repository,
        write.existing(repository, feature_id, missing=missing, precondition=precondition),
    )
    WorkflowRepository(write.sessions).delete_for(write.project_id, feature_id)


# context.json.


def _now_text() -> str:
    return feature_context.tool_timestamp(utcnow())


@dataclass(frozen=True)
class PreparedContext:
    """A context redacted and split into its parts: everything that needs no database."""

    document: dict[str, Any]
    head: parts.Head
    notes: list[bytes]


def _prepared(document: dict[str, Any]) -> PreparedContext:
    # In place: the handover rows are read from the redacted document.
    redaction.for_storage(document)
    return _split(document)


def _content(prepared: PreparedContext) -> bytes:
    return parts.join(prepared.head.content, prepared.head.at, prepared.notes)


def _split(document: dict[str, Any]) -> PreparedContext:
    head, notes = feature_context.split(document)
    return PreparedContext(document, head, notes)


def prepare_context(raw: bytes) -> PreparedContext:
    return _prepared(feature_context.parse(raw))


def _read_columns(document: dict[str, Any]) -> dict[str, Any]:
    """The columns read from a context's document (its head holds them all)."""
    breaker_state = document.get("circuit_breaker", {})
    return {
        "current_phase": document.get("current_phase"),
        "intervention_required": breaker_state.get("intervention_required", False),
        "blocked_task": breaker_state.get("blocked_task"),
    }


def _set_context(context: FeatureContext, prepared: PreparedContext) -> None:
    """Store the whole document in the row, and every column read from it."""
    columns = parted_columns(prepared.head, prepared.notes) | _read_columns(prepared.document)
    for name, value in columns.items():
        setattr(context, name, value)


def _handover_values(
    context: FeatureContext, handover: feature_context.Handover, note: bytes
) -> dict[str, Any]:
    """A handover's row, by its columns' values; ``note`` is its ``note_part``."""
    return {
        "project_id": context.project_id,
        "context_id": context.id,
        "feature_id": context.feature_id,
        "position": handover.position,
        "timestamp": handover.timestamp,
        "from_agent": handover.from_agent,
        "to_agent": handover.to_agent,
        "note": note,
    }


def _rewrite_head(
    write: Write, context: FeatureContext, head: dict[str, Any], appended: bytes | None = None
) -> str:
    """Store a change to a context kept as its parts that leaves its notes as they are, but
    for the note ``appended`` (whose row the caller inserts): the new head, by value, in one
    prebuilt UPDATE, no unit of work (``context`` then holds the new columns as stored).
    ``head`` is redacted already. Returns the new ETag."""
    assert context.id is not None
    columns = changed_parts_columns(context, _split(head).head, appended)
    FeatureRepository(write.sessions).store(context, columns | _read_columns(head))
    etag: str = columns["etag"]
    return etag


def _store(write: Write, context: FeatureContext, prepared: PreparedContext) -> None:
    """Store a whole document in the context (new or not), its handover rows with it."""
    replacing = context.id is not None
    _set_context(context, prepared)
    FeatureRepository(write.sessions).add(context)
    assert context.id is not None
    repository = HandoverRepository(write.sessions)
    if replacing:
        repository.delete_for(context.id)
    handovers = feature_context.handovers(prepared.document)
    repository.insert(
        [_handover_values(context, h, n) for h, n in zip(handovers, prepared.notes, strict=True)]
    )


def _existing(write: Write, feature_id: str, precondition: Precondition) -> FeatureContext:
    repository = FeatureRepository(write.sessions)
    return write.existing(
        repository, feature_id, missing=CONTEXT.not_found(feature_id), precondition=precondition
    )


def _head(context: FeatureContext) -> dict[str, Any]:
    """The document in a context's row: its head (``handover_notes.history`` empty), or the
    whole document when it is not kept as its parts (``parts_at`` None)."""
    document: dict[str, Any] = jsondoc.load(context.content)
    return document


def create(write: Write, feature_id: str) -> Download:
    """A new context from the documented template, both timestamps now."""
    context, created = _locked_or_new(write, CONTEXT, feature_id, None)
    if not created:
        raise Conflict(f"Feature {feature_id!r} already exists; PUT its context to replace it.")
    prepared = _prepared(feature_context.template(feature_id, _now_text()))
    _store(write, context, prepared)
    return Download(CONTEXT.filename, context.etag, _content(prepared))


def store_context(
    write: Write, feature_id: str, prepared: PreparedContext, precondition: Precondition
) -> tuple[FeatureContext, bool]:
    """Store the file as it is (create or replace); True when it was created."""
    context, created = _locked_or_new(write, CONTEXT, feature_id, precondition)
    _store(write, context, prepared)
    return context, created


def patch(write: Write, feature_id: str, merge: Any, precondition: Precondition) -> Download:
    """RFC 7396 merge patch. The result must be a valid context (422 and nothing changed
    otherwise); ``last_updated`` moves unless the patch sets it or changes nothing."""
    context = _existing(write, feature_id, precondition)
    whole = _whole(write.session, context)
    patched = jsondoc.merge_patch(jsondoc.load(whole), merge)
    feature_context.check(patched)
    if feature_context.render(patched) == whole:
        return Download(CONTEXT.filename, context.etag, whole)
    if "last_updated" not in merge:
        patched["last_updated"] = _now_text()
    prepared = _prepared(patched)
    _store(write, context, prepared)
    return Download(CONTEXT.filename, context.etag, _content(prepared))


def list_features(
    session: Session,
    tenant: str,
    project: str,
    *,
    phase: str | None,
    intervention_required: bool | None,
    cursor: str | None,
    limit: int,
) -> tuple[list[FeatureContext], str | None]:
    return FeatureRepository(session).page(
        project_id(session, tenant, project),
        phase=phase,
        intervention_required=intervention_required,
        cursor=cursor,
        limit=limit,
    )


# Handovers.


@dataclass(frozen=True)
class Appended:
    index: int
    note: dict[str, Any]
    last_updated: str
    etag: str


def append_handover(
    write: Write, feature_id: str, note: dict[str, Any], precondition: Precondition
) -> Appended:
    """Append to ``handover_notes.history``; the note's timestamp is now when it has none,
    and ``last_updated`` moves to now. A context kept as its parts gets one row more and a new
    head; one that is whole (without the array, or not changed since migration 0013) is
    stored whole once, and as its parts from then on."""
    context, next_position = write.existing_with(
        FeatureRepository(write.sessions),
        feature_id,
        bound={},
        missing=CONTEXT.not_found(feature_id),
        precondition=precondition,
    )
    now = _now_text()
    if note.get("timestamp") is None:
        note = {"timestamp": now, **{k: v for k, v in note.items() if k != "timestamp"}}
    if context.parts_at is None:
        document = _head(context)
        history = document.setdefault("handover_notes", {}).setdefault("history", [])
        history.append(note)
        document["last_updated"] = now
        _store(write, context, _prepared(document))
        return Appended(len(history) - 1, note, now, context.etag)
    index = int(next_position)
    # Redacted where it stands in the document, so that each site's pointer is the same.
    redaction.for_storage({"handover_notes": {"history": {str(index): note}}})
    head = _head(context)
    head["last_updated"] = now
    part = feature_context.note_part(note)
    etag = _rewrite_head(write, context, head, part)
    HandoverRepository(write.sessions).insert(
        [_handover_values(context, feature_context.handover(index, note), part)]
    )
    return Appended(index, note, now, etag)


def list_handovers(
    session: Session,
    tenant: str,
    project: str,
    *,
    to_agent: str | None,
    from_agent: str | None,
    feature_id: str | None,
    since: datetime | None,
    cursor: str | None,
    limit: int,
    most_bytes: int,
) -> tuple[list[Handover], str | None]:
    return HandoverRepository(session).page(
        project_id(session, tenant, project),
        to_agent=to_agent,
        from_agent=from_agent,
        feature_id=feature_id,
        since=since,
        cursor=cursor,
        limit=limit,
        most_bytes=most_bytes,
    )


# Reviews and the circuit breaker.


def _operate(
    write: Write,
    feature_id: str,
    precondition: Precondition,
    operation: Callable[[dict[str, Any], str], breaker.Change],
    *,
    most_head_bytes: int | None = None,
) -> tuple[breaker.Change, str]:
    """The operation on the context's document, stored; what it did, and the new ETag. The
    operations change the head alone: of a context kept as its parts, only the head is read
    and written. An operation that grows the head is refused (409) once the head holds
    ``most_head_bytes``."""
    context = _existing(write, feature_id, precondition)
    if most_head_bytes is not None and len(context.content) >= most_head_bytes:
        raise Conflict(
            f"Feature {feature_id!r}'s context, as each review reads and writes it (its "
            f"handover notes aside), holds {len(context.content)} bytes, at least the body "
            f"limit ({most_head_bytes}): no review is recorded in it. PUT or PATCH the context "
            "smaller (fewer reviews kept, or less of anything else) to record more."
        )
    document = _head(context)
    change = operation(document, _now_text())
    if context.parts_at is None:
        _store(write, context, _prepared(document))
        return change, context.etag
    redaction.for_storage(document)
    return change, _rewrite_head(write, context, document)


def review(
    write: Write,
    feature_id: str,
    outcome: breaker.Review,
    precondition: Precondition,
    most_head_bytes: int,
) -> tuple[breaker.Change, str]:
    """A review recorded; refused (409) once the context's head, which each review reads and
    writes whole, holds ``most_head_bytes``: reviews kept in it once made it 42-50 MB and a
    review 1.2 s of CPU."""

    def record(document: dict[str, Any], now: str) -> breaker.Change:
        return breaker.record_review(document, outcome, now)

    return _operate(write, feature_id, precondition, record, most_head_bytes=most_head_bytes)


def reset_breaker(
    write: Write, feature_id: str, precondition: Precondition
) -> tuple[breaker.Change, str]:
    return _operate(write, feature_id, precondition, breaker.reset)


# workflow.json: the feature's task graph, kept byte for byte. It needs no context: the
# orchestrator reads workflow.json before it creates context.json.


def prepare_workflow(raw: bytes) -> bytes:
    """The bytes to store: the file as it came, or, when it held a secret, the redacted
    document rendered as the orchestrator writes it. Needs no database."""
    document = feature_workflow.parse(raw)
    found = Redactions()
    redaction.for_storage(document, found)
    return feature_workflow.render(document) if found.sites else raw


def store_workflow(
    write: Write, feature_id: str, content: bytes, precondition: Precondition
) -> tuple[FeatureWorkflow, bool]:
    """Store the file exactly (True when it was created). The same bytes again (a second
    push) change nothing, not even its time."""
    workflow, created = _locked_or_new(write, WORKFLOW, feature_id, precondition)
    if not created and workflow.content == content:
        return workflow, False
    _set_file(workflow, content)
    WorkflowRepository(write.sessions).add(workflow)
    return workflow, created


# The two files.

CONTEXT = FeatureFile(
    filename=feature_context.FILENAME,
    model=FeatureContext,
    repository=FeatureRepository,
    summary=FeatureSummary,
    missing="No feature {!r} in this project.",
    prepare=prepare_context,
    store=store_context,
)
WORKFLOW = FeatureFile(
    filename=feature_workflow.FILENAME,
    model=FeatureWorkflow,
    repository=WorkflowRepository,
    summary=WorkflowSummary,
    missing="Feature {!r} has no workflow.json in this project.",
    prepare=prepare_workflow,
    store=store_workflow,
)
