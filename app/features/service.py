"""The rules for feature contexts: import and export, merge patch, handovers, reviews.

Every change to a context is a read-modify-write of its document under the row's lock
(``for_update``), and the handover rows change in the same transaction as the document, so
that the list of handovers always says what the contexts say.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlmodel import Session

from app.core import redaction
from app.core.conditional import Precondition, etag_of
from app.core.db import utcnow
from app.core.errors import Conflict, NotFound
from app.features import breaker
from app.features.models import FeatureContext, FeatureWorkflow, Handover
from app.features.repository import FeatureRepository, HandoverRepository, WorkflowRepository
from app.formats import feature_context, feature_workflow, jsondoc
from app.projects.service import project_id, touch_project
from app.redaction import Redactions


def _now_text() -> str:
    return feature_context.tool_timestamp(utcnow())


@dataclass(frozen=True)
class PreparedContext:
    """A context redacted and rendered: everything that needs no database."""

    document: dict[str, Any]
    content: bytes


def _prepared(document: dict[str, Any]) -> PreparedContext:
    # In place: the handover rows are read from the redacted document.
    redaction.for_storage(document)
    return PreparedContext(document, feature_context.render(document))


def prepare_context(raw: bytes) -> PreparedContext:
    return _prepared(feature_context.parse(raw))


def _write(context: FeatureContext, document: dict[str, Any]) -> None:
    _write_prepared(context, _prepared(document))


def _write_prepared(context: FeatureContext, prepared: PreparedContext) -> None:
    """Set every column derived from the document."""
    breaker_state = prepared.document.get("circuit_breaker", {})
    context.content = prepared.content
    context.size_bytes = len(prepared.content)
    context.etag = etag_of(prepared.content)
    context.current_phase = prepared.document.get("current_phase")
    context.intervention_required = breaker_state.get("intervention_required", False)
    context.blocked_task = breaker_state.get("blocked_task")
    context.updated_at = utcnow()


def _handover_row(context: FeatureContext, handover: feature_context.Handover) -> Handover:
    assert context.id is not None
    return Handover(
        project_id=context.project_id,
        context_id=context.id,
        feature_id=context.feature_id,
        position=handover.position,
        timestamp=handover.timestamp,
        from_agent=handover.from_agent,
        to_agent=handover.to_agent,
        note=feature_context.note_bytes(handover.note),
    )


def _replace_handover_rows(
    session: Session, context: FeatureContext, document: dict[str, Any]
) -> None:
    assert context.id is not None
    repository = HandoverRepository(session)
    repository.delete_for(context.id)
    repository.add(_handover_row(context, h) for h in feature_context.handovers(document))


def _not_found(feature_id: str) -> NotFound:
    return NotFound(f"No feature {feature_id!r} in this project.")


def _document(context: FeatureContext) -> dict[str, Any]:
    document: dict[str, Any] = jsondoc.load(context.content)
    return document


def create(session: Session, tenant: str, project: str, feature_id: str) -> FeatureContext:
    """A new context from the documented template, both timestamps now."""
    project_key = touch_project(session, tenant, project)
    repository = FeatureRepository(session)
    if repository.get(project_key, feature_id) is not None:
        raise Conflict(f"Feature {feature_id!r} already exists; PUT its context to replace it.")
    # Its document columns: _write, below.
    context = FeatureContext(project_id=project_key, feature_id=feature_id)  # type: ignore[call-arg]
    _write(context, feature_context.template(feature_id, _now_text()))
    return repository.save(context)


def get(session: Session, tenant: str, project: str, feature_id: str) -> FeatureContext:
    context = FeatureRepository(session).get(project_id(session, tenant, project), feature_id)
    if context is None:
        raise _not_found(feature_id)
    return context


def put(
    session: Session,
    tenant: str,
    project: str,
    feature_id: str,
    raw: bytes,
    precondition: Precondition,
) -> tuple[FeatureContext, bool]:
    """Store the file as it is (create or replace); True when it was created."""
    return store(session, tenant, project, feature_id, prepare_context(raw), precondition)


def store(
    session: Session,
    tenant: str,
    project: str,
    feature_id: str,
    prepared: PreparedContext,
    precondition: Precondition,
) -> tuple[FeatureContext, bool]:
    project_key = touch_project(session, tenant, project)
    repository = FeatureRepository(session)
    context = repository.get(project_key, feature_id, for_update=True)
    precondition(context.etag if context is not None else None)
    created = context is None
    if context is None:
        # Its document columns: _write_prepared, below.
        context = FeatureContext(project_id=project_key, feature_id=feature_id)  # type: ignore[call-arg]
    _write_prepared(context, prepared)
    repository.save(context)
    _replace_handover_rows(session, context, prepared.document)
    return context, created


def _locked(
    session: Session, tenant: str, project: str, feature_id: str, precondition: Precondition
) -> tuple[FeatureContext, dict[str, Any]]:
    """The context, locked for this transaction, after its If-Match check, and its document.
    The project's row is locked first, as on every write (see ``touch_project``)."""
    context = FeatureRepository(session).get(
        touch_project(session, tenant, project), feature_id, for_update=True
    )
    if context is None:
        raise _not_found(feature_id)
    precondition(context.etag)
    return context, _document(context)


def patch(
    session: Session,
    tenant: str,
    project: str,
    feature_id: str,
    raw: bytes,
    precondition: Precondition,
) -> FeatureContext:
    """RFC 7396 merge patch. The result must be a valid context (422 and nothing changed
    otherwise); ``last_updated`` moves unless the patch sets it or changes nothing."""
    merge = jsondoc.load(raw, allow_nan=False)
    context, document = _locked(session, tenant, project, feature_id, precondition)
    patched = jsondoc.merge_patch(document, merge)
    feature_context.check(patched)
    if feature_context.render(patched) == context.content:
        return context
    if "last_updated" not in merge:
        patched["last_updated"] = _now_text()
    _write(context, patched)
    FeatureRepository(session).save(context)
    _replace_handover_rows(session, context, patched)
    return context


def delete(
    session: Session, tenant: str, project: str, feature_id: str, precondition: Precondition
) -> None:
    """Delete the feature: its context, its handovers and its workflow."""
    context, _ = _locked(session, tenant, project, feature_id, precondition)
    FeatureRepository(session).delete(context)
    WorkflowRepository(session).delete_for(context.project_id, feature_id)


# workflow.json: the feature's task graph, kept byte for byte.

WorkflowAction = Literal["created", "replaced", "unchanged"]


def _workflow_not_found(feature_id: str) -> NotFound:
    return NotFound(f"Feature {feature_id!r} has no workflow.json in this project.")


def get_workflow(session: Session, tenant: str, project: str, feature_id: str) -> FeatureWorkflow:
    workflow = WorkflowRepository(session).get(project_id(session, tenant, project), feature_id)
    if workflow is None:
        raise _workflow_not_found(feature_id)
    return workflow


def put_workflow(
    session: Session,
    tenant: str,
    project: str,
    feature_id: str,
    raw: bytes,
    precondition: Precondition,
) -> tuple[FeatureWorkflow, WorkflowAction]:
    """Store the file exactly: created, replaced, or unchanged when the stored bytes are the
    same. It needs no context: the orchestrator reads workflow.json before it creates
    context.json."""
    return store_workflow(session, tenant, project, feature_id, prepare_workflow(raw), precondition)


def prepare_workflow(raw: bytes) -> bytes:
    """The bytes to store: the file as it came, or, when it held a secret, the redacted
    document rendered as the orchestrator writes it. Needs no database."""
    document = feature_workflow.parse(raw)
    found = Redactions()
    redaction.for_storage(document, found)
    return feature_workflow.render(document) if found.sites else raw


def store_workflow(
    session: Session,
    tenant: str,
    project: str,
    feature_id: str,
    raw: bytes,
    precondition: Precondition,
) -> tuple[FeatureWorkflow, WorkflowAction]:
    """``put_workflow`` of the bytes ``prepare_workflow`` gave."""
    project_key = touch_project(session, tenant, project)
    repository = WorkflowRepository(session)
    workflow = repository.get(project_key, feature_id, for_update=True)
    precondition(workflow.etag if workflow is not None else None)
    if workflow is not None and workflow.content == raw:
        # The same file again (a second push): nothing changes, not even its time.
        return workflow, "unchanged"
    action: WorkflowAction = "created" if workflow is None else "replaced"
    if workflow is None:
        # Its document columns are set below.
        workflow = FeatureWorkflow(project_id=project_key, feature_id=feature_id)  # type: ignore[call-arg]
    workflow.content = raw
    workflow.size_bytes = len(raw)
    workflow.etag = etag_of(raw)
    workflow.updated_at = utcnow()
    return repository.save(workflow), action


def delete_workflow(
    session: Session, tenant: str, project: str, feature_id: str, precondition: Precondition
) -> None:
    repository = WorkflowRepository(session)
    workflow = repository.get(touch_project(session, tenant, project), feature_id, for_update=True)
    if workflow is None:
        raise _workflow_not_found(feature_id)
    precondition(workflow.etag)
    repository.delete(workflow)


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


@dataclass(frozen=True)
class Appended:
    context: FeatureContext
    index: int
    note: dict[str, Any]
    last_updated: str


def append_handover(
    session: Session,
    tenant: str,
    project: str,
    feature_id: str,
    note: dict[str, Any],
    precondition: Precondition,
) -> Appended:
    """Append to ``handover_notes.history``; the note's timestamp is now when it has none,
    and ``last_updated`` moves to now."""
    context, document = _locked(session, tenant, project, feature_id, precondition)
    now = _now_text()
    if note.get("timestamp") is None:
        note = {"timestamp": now, **{k: v for k, v in note.items() if k != "timestamp"}}
    history = document.setdefault("handover_notes", {}).setdefault("history", [])
    history.append(note)
    document["last_updated"] = now
    _write(context, document)
    FeatureRepository(session).save(context)
    index = len(history) - 1
    HandoverRepository(session).add([_handover_row(context, feature_context.handover(index, note))])
    return Appended(context, index, note, now)


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
) -> tuple[list[Handover], str | None]:
    return HandoverRepository(session).page(
        project_id(session, tenant, project),
        to_agent=to_agent,
        from_agent=from_agent,
        feature_id=feature_id,
        since=since,
        cursor=cursor,
        limit=limit,
    )


def _operate(
    session: Session,
    tenant: str,
    project: str,
    feature_id: str,
    precondition: Precondition,
    operation: Callable[[dict[str, Any], str], breaker.Change],
) -> tuple[breaker.Change, FeatureContext]:
    context, document = _locked(session, tenant, project, feature_id, precondition)
    change = operation(document, _now_text())
    _write(context, document)
    return change, FeatureRepository(session).save(context)


def review(
    session: Session,
    tenant: str,
    project: str,
    feature_id: str,
    outcome: breaker.Review,
    precondition: Precondition,
) -> tuple[breaker.Change, FeatureContext]:
    return _operate(
        session,
        tenant,
        project,
        feature_id,
        precondition,
        lambda document, now: breaker.record_review(document, outcome, now),
    )


def reset_breaker(
    session: Session, tenant: str, project: str, feature_id: str, precondition: Precondition
) -> tuple[breaker.Change, FeatureContext]:
    return _operate(session, tenant, project, feature_id, precondition, breaker.reset)
