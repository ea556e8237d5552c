import json
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from app.core.body import ContextStoreRoute, RawBody, raw_body
from app.core.conditional import if_match, if_match_or_create_only
from app.core.deps import Reader, ReadSession, Writer, WriteSession
from app.core.documents import Download
from app.core.identifiers import FeatureName, ProjectName
from app.core.pagination import Cursor, Limit
from app.core.params import UTCInstant
from app.core.responses import ResponsesDoc, document_response
from app.core.schemas import Page
from app.features import breaker, service
from app.features.models import FeatureContext
from app.features.schemas import (
    BreakerChange,
    FeatureCreate,
    FeatureSummary,
    HandoverAppended,
    HandoverCreate,
    HandoverItem,
    ReviewCreate,
    WorkflowSummary,
)
from app.formats import feature_context, feature_workflow, jsondoc
from app.idempotency.legacy import LegacyIdempotencyDep as IdempotencyDep

router = APIRouter(
    prefix="/v1/projects/{project}", tags=["features"], route_class=ContextStoreRoute
)

CONTEXT_FILE: ResponsesDoc = {
    200: {
        "description": "`context.json` exactly as sdd-unified writes it.",
        "content": {"application/json": {"schema": {"type": "object"}}},
    },
}


def _column_text(description: str) -> Any:
    # Query values are compared with indexed columns: bounded, and without NUL.
    return Query(
        max_length=feature_context.MAX_AGENT_NAME, pattern=r"^[^\x00]*$", description=description
    )


def _json(content: Any, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    # The standard library's encoder: document fragments may hold integers beyond 64 bits.
    return Response(
        content=json.dumps(content).encode(),
        status_code=status_code,
        media_type="application/json",
        headers=headers,
    )


def _document(context: FeatureContext, status_code: int, **headers: str) -> Response:
    return Response(
        content=context.content,
        status_code=status_code,
        media_type="application/json",
        headers={"ETag": context.etag, **headers},
    )


def _context_url(project: str, feature: str) -> str:
    return f"/v1/projects/{project}/features/{feature}/context"


def _summary(context: FeatureContext) -> FeatureSummary:
    return FeatureSummary.model_validate(context, from_attributes=True)


@router.post(
    "/features",
    status_code=201,
    response_class=Response,
    responses={201: CONTEXT_FILE[200] | {"description": "The new `context.json`."}},
)
def create_feature(
    project: ProjectName,
    body: FeatureCreate,
    session: WriteSession,
    principal: Writer,
    idempotency: IdempotencyDep,
) -> Response:
    """Create a feature's context from the documented template (max_attempts 3/3/4, circuit
    breaker 3 and 2), `created_at` and `last_updated` now. 409 if the feature exists."""
    if (replayed := idempotency.replay()) is not None:
        return replayed
    context = service.create(session, principal.tenant, project, body.feature_id)
    response = _document(context, 201, Location=_context_url(project, body.feature_id))
    return idempotency.record(response)


@router.get("/features", response_model=Page[FeatureSummary])
def list_features(
    project: ProjectName,
    session: ReadSession,
    principal: Reader,
    phase: Annotated[str | None, _column_text("Only features in this `current_phase`.")] = None,
    intervention_required: Annotated[
        bool | None, Query(description="Only features whose circuit breaker is (not) tripped.")
    ] = None,
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[FeatureSummary]:
    """The project's features, newest first; filters `phase` (`current_phase`) and
    `intervention_required`."""
    contexts, next_cursor = service.list_features(
        session,
        principal.tenant,
        project,
        phase=phase,
        intervention_required=intervention_required,
        cursor=cursor,
        limit=limit,
    )
    return Page(items=[_summary(c) for c in contexts], next_cursor=next_cursor)


@router.get(
    "/features/{feature}/context",
    response_class=Response,
    responses=CONTEXT_FILE | {304: {"description": "Unchanged (If-None-Match)."}},
)
def export_context(
    project: ProjectName,
    feature: FeatureName,
    request: Request,
    session: ReadSession,
    principal: Reader,
) -> Response:
    """`context.json` exactly: `json.dumps(context, indent=2)`."""
    context = service.get(session, principal.tenant, project, feature)
    return document_response(
        request,
        Download(filename=feature_context.FILENAME, etag=context.etag, content=context.content),
    )


@router.put(
    "/features/{feature}/context",
    response_model=FeatureSummary,
    responses={201: {"description": "Created.", "model": FeatureSummary}},
    openapi_extra=raw_body("application/json", schema={"type": "object"}),
)
def import_context(
    project: ProjectName,
    feature: FeatureName,
    request: Request,
    raw: RawBody,
    session: WriteSession,
    principal: Writer,
) -> Response:
    """Store `context.json` as it is (201 created, 200 replaced). It must be a valid context:
    a string `feature_id` (kept as written: the feature is `{feature}`, its directory), and
    every documented field that is present in its documented shape; anything else is kept.
    Its handovers are indexed. Honours `If-Match` and `If-None-Match: *`."""
    precondition = if_match_or_create_only(request)
    context, created = service.put(session, principal.tenant, project, feature, raw, precondition)
    headers = {"ETag": context.etag}
    if created:
        headers["Location"] = _context_url(project, feature)
    return _json(_summary(context).model_dump(mode="json"), 201 if created else 200, headers)


@router.patch(
    "/features/{feature}/context",
    response_class=Response,
    responses=CONTEXT_FILE,
    openapi_extra=raw_body(
        "application/merge-patch+json", "application/json", schema={"type": "object"}
    ),
)
def patch_context(
    project: ProjectName,
    feature: FeatureName,
    request: Request,
    raw: RawBody,
    session: WriteSession,
    principal: Writer,
) -> Response:
    """JSON merge patch (RFC 7396), e.g. `{"current_phase": "l1_design"}` or
    `{"context_sources": {"l1_architecture": {"status": "completed"}}}`. The result must still
    be a valid context (422 and nothing changed otherwise). `last_updated` moves to now unless
    the patch sets it. Returns the new `context.json`. Honours `If-Match`."""
    context = service.patch(session, principal.tenant, project, feature, raw, if_match(request))
    return _document(context, 200)


@router.delete("/features/{feature}/context", status_code=204, response_class=Response)
def delete_context(
    project: ProjectName,
    feature: FeatureName,
    request: Request,
    session: WriteSession,
    principal: Writer,
) -> Response:
    """Delete the feature: its context, its handovers and its `workflow.json`. Honours
    `If-Match` (the context's ETag)."""
    service.delete(session, principal.tenant, project, feature, if_match(request))
    return Response(status_code=204)


WORKFLOW_FILE: ResponsesDoc = {
    200: {
        "description": "`workflow.json` exactly as it was stored.",
        "content": {"application/json": {"schema": {"type": "object"}}},
    },
}


def _workflow_url(project: str, feature: str) -> str:
    return f"/v1/projects/{project}/features/{feature}/workflow"


@router.get(
    "/features/{feature}/workflow",
    response_class=Response,
    responses=WORKFLOW_FILE | {304: {"description": "Unchanged (If-None-Match)."}},
)
def export_workflow(
    project: ProjectName,
    feature: FeatureName,
    request: Request,
    session: ReadSession,
    principal: Reader,
) -> Response:
    """The feature's `workflow.json` (sdd-unified's task graph), byte for byte as stored."""
    workflow = service.get_workflow(session, principal.tenant, project, feature)
    return document_response(
        request,
        Download(filename=feature_workflow.FILENAME, etag=workflow.etag, content=workflow.content),
    )


@router.put(
    "/features/{feature}/workflow",
    response_model=WorkflowSummary,
    responses={201: {"description": "Created.", "model": WorkflowSummary}},
    openapi_extra=raw_body("application/json", schema={"type": "object"}),
)
def import_workflow(
    project: ProjectName,
    feature: FeatureName,
    request: Request,
    raw: RawBody,
    session: WriteSession,
    principal: Writer,
) -> Response:
    """Store `workflow.json` exactly as sent (201 created, 200 replaced): any JSON object,
    never rewritten. It needs no context (the orchestrator writes it first). Honours
    `If-Match` and `If-None-Match: *`."""
    precondition = if_match_or_create_only(request)
    workflow, action = service.put_workflow(
        session, principal.tenant, project, feature, raw, precondition
    )
    headers = {"ETag": workflow.etag}
    if action == "created":
        headers["Location"] = _workflow_url(project, feature)
    summary = WorkflowSummary.model_validate(workflow, from_attributes=True)
    return _json(summary.model_dump(mode="json"), 201 if action == "created" else 200, headers)


@router.delete("/features/{feature}/workflow", status_code=204, response_class=Response)
def delete_workflow(
    project: ProjectName,
    feature: FeatureName,
    request: Request,
    session: WriteSession,
    principal: Writer,
) -> Response:
    """Delete the feature's `workflow.json` alone. Honours `If-Match`."""
    service.delete_workflow(session, principal.tenant, project, feature, if_match(request))
    return Response(status_code=204)


@router.post("/features/{feature}/handovers", status_code=201, response_model=HandoverAppended)
def append_handover(
    project: ProjectName,
    feature: FeatureName,
    body: HandoverCreate,
    request: Request,
    session: WriteSession,
    principal: Writer,
    idempotency: IdempotencyDep,
) -> Response:
    """Append a handover note to `handover_notes.history`. `timestamp` is now (in the tool's
    style) when absent; `last_updated` moves to now. Honours `If-Match`."""
    if (replayed := idempotency.replay()) is not None:
        return replayed
    appended = service.append_handover(
        session, principal.tenant, project, feature, body.model_dump(), if_match(request)
    )
    result = HandoverAppended(
        feature_id=feature,
        index=appended.index,
        note=appended.note,
        last_updated=appended.last_updated,
    )
    response = _json(result.model_dump(), 201, {"ETag": appended.context.etag})
    return idempotency.record(response)


@router.get("/handovers", response_model=Page[HandoverItem])
def list_handovers(
    project: ProjectName,
    session: ReadSession,
    principal: Reader,
    to_agent: Annotated[str | None, _column_text("Notes to this agent.")] = None,
    from_agent: Annotated[str | None, _column_text("Notes from this agent.")] = None,
    feature_id: Annotated[str | None, _column_text("Notes of this feature.")] = None,
    since: Annotated[
        UTCInstant | None, Query(description="Notes with `timestamp` at or after this.")
    ] = None,
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Response:
    """Handover notes across the project's features, newest `timestamp` first; filters
    `to_agent`, `from_agent`, `feature_id`, `since`."""
    rows, next_cursor = service.list_handovers(
        session,
        principal.tenant,
        project,
        to_agent=to_agent,
        from_agent=from_agent,
        feature_id=feature_id,
        since=since,
        cursor=cursor,
        limit=limit,
    )
    items = [
        {"feature_id": row.feature_id, "index": row.position, "note": jsondoc.load(row.note)}
        for row in rows
    ]
    return _json({"items": items, "next_cursor": next_cursor})


def _breaker_response(
    feature: str, change: breaker.Change, context: FeatureContext, status_code: int
) -> Response:
    result = BreakerChange(
        feature_id=feature,
        iteration_tracking=change.iteration_tracking,
        circuit_breaker=change.circuit_breaker,
        tripped=change.tripped,
        last_updated=change.last_updated,
        added=change.added,
    )
    return _json(result.model_dump(), status_code, {"ETag": context.etag})


@router.post("/features/{feature}/reviews", status_code=201, response_model=BreakerChange)
def record_review(
    project: ProjectName,
    feature: FeatureName,
    body: ReviewCreate,
    request: Request,
    session: WriteSession,
    principal: Writer,
    idempotency: IdempotencyDep,
) -> Response:
    """Record a review of a phase, atomically: `attempts` + 1 and the review appended.
    `APPROVED` sets the phase `approved`; a rejection that reaches `max_attempts` sets it
    `limit_reached` and trips the circuit breaker. A phase that is approved, at its limit or
    blocked by the breaker takes no more reviews (409). Honours `If-Match`."""
    if (replayed := idempotency.replay()) is not None:
        return replayed
    review = breaker.Review(
        phase=body.phase,
        outcome=body.outcome,
        rejecting_agents=body.rejecting_agents,
        issues_count=body.issues_count,
    )
    change, context = service.review(
        session, principal.tenant, project, feature, review, if_match(request)
    )
    return idempotency.record(_breaker_response(feature, change, context, 201))


@router.post("/features/{feature}/circuit-breaker:reset", response_model=BreakerChange)
def reset_circuit_breaker(
    project: ProjectName,
    feature: FeatureName,
    request: Request,
    session: WriteSession,
    principal: Writer,
    idempotency: IdempotencyDep,
) -> Response:
    """The human intervention: clear the circuit breaker and re-open every phase at its
    limit with a fresh attempt budget (`attempts` 0, `status` active), keeping its reviews.
    409 when there is nothing to reset. Honours `If-Match`."""
    if (replayed := idempotency.replay()) is not None:
        return replayed
    change, context = service.reset_breaker(
        session, principal.tenant, project, feature, if_match(request)
    )
    return idempotency.record(_breaker_response(feature, change, context, 200))
