import json
from typing import Annotated, Any

from fastapi import Query, Request, Response

from app.core.body import DecodedRequest, raw_body
from app.core.conditional import if_match, if_match_or_create_only
from app.core.deps import Reader, ReadSession
from app.core.documents import Download
from app.core.identifiers import FeatureName, ProjectName
from app.core.limits import LARGE_FILE_EXPORTS_ALL_RUNNING
from app.core.pagination import Cursor, Limit, PageBytes
from app.core.params import UTCInstant
from app.core.responses import ResponsesDoc, download
from app.core.routing import GatedRouter
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
)
from app.formats import feature_context, jsondoc
from app.storage.route import IdempotentWritesDep, WriteRoute, WritesDep
from app.storage.writes import Write

router = GatedRouter(prefix="/v1/projects/{project}", tags=["features"], route_class=WriteRoute)


def _json_file(description: str) -> ResponsesDoc:
    return {
        200: {
            "description": description,
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    }


CONTEXT_FILE = _json_file("`context.json` exactly as sdd-unified writes it.")


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


def _document(context: Download, status_code: int, **headers: str) -> Response:
    return Response(
        content=context.content,
        status_code=status_code,
        media_type="application/json",
        headers={"ETag": context.etag, **headers},
    )


def _url(project: str, feature: str, file: str) -> str:
    return f"/v1/projects/{project}/features/{feature}/{file}"


def _summary(context: FeatureContext) -> FeatureSummary:
    return FeatureSummary.model_validate(context, from_attributes=True)


def _add_file_routes(
    name: str,
    file: service.FeatureFile[Any, Any],
    responses: ResponsesDoc,
    *,
    exported: str,
    stored: str,
) -> None:
    """The GET and the PUT of a feature's file, ``features/{feature}/{name}``."""
    path = f"/features/{{feature}}/{name}"

    @router.get(
        path,
        response_class=Response,
        responses=responses
        | {304: {"description": "Unchanged (If-None-Match)."}, 429: LARGE_FILE_EXPORTS_ALL_RUNNING},
        name=f"export_{name}",
        description=exported,
    )
    async def export(
        project: ProjectName,
        feature: FeatureName,
        request: Request,
        session: ReadSession,
        principal: Reader,
    ) -> Response:
        tenant = principal.tenant
        return await download(
            request,
            session,
            tenant,
            lambda up_to: service.download(session, tenant, project, file, feature, up_to),
        )

    @router.put(
        path,
        response_model=file.summary,
        responses={201: {"description": "Created.", "model": file.summary}},
        openapi_extra=raw_body("application/json", schema={"type": "object"}),
        name=f"import_{name}",
        description=stored,
    )
    def store(
        project: ProjectName,
        feature: FeatureName,
        request: DecodedRequest,
        writes: WritesDep,
    ) -> Response:
        raw = request.received
        precondition = if_match_or_create_only(request)
        prepared = file.prepare(raw)

        def change(write: Write) -> Response:
            row, created = file.store(write, feature, prepared, precondition)
            summary = file.summary.model_validate(row, from_attributes=True)
            headers = {"ETag": row.etag}
            if created:
                headers["Location"] = _url(project, feature, name)
            return _json(summary.model_dump(mode="json"), 201 if created else 200, headers)

        return writes.run(project, change)


@router.post(
    "/features",
    status_code=201,
    response_class=Response,
    responses={201: CONTEXT_FILE[200] | {"description": "The new `context.json`."}},
)
def create_feature(
    project: ProjectName, body: FeatureCreate, writes: IdempotentWritesDep
) -> Response:
    """Create a feature's context from the documented template (max_attempts 3/3/4, circuit
    breaker 3 and 2), `created_at` and `last_updated` now. 409 if the feature exists."""

    def change(write: Write) -> Response:
        context = service.create(write, body.feature_id)
        return _document(context, 201, Location=_url(project, body.feature_id, "context"))

    return writes.run(project, change)


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


_add_file_routes(
    "context",
    service.CONTEXT,
    CONTEXT_FILE,
    exported="`context.json` exactly: `json.dumps(context, indent=2)`.",
    stored="""Store `context.json` as it is (201 created, 200 replaced). It must be a valid context:
a string `feature_id` (kept as written: the feature is `{feature}`, its directory), and
every documented field that is present in its documented shape; anything else is kept.
Its handovers are indexed. Honours `If-Match` and `If-None-Match: *`.""",
)


@router.patch(
    "/features/{feature}/context",
    response_class=Response,
    responses=CONTEXT_FILE
    | {
        204: {
            "description": "Patched; the new `context.json` is over the body limit: its ETag "
            "alone, the file at `Content-Location` (a download in an export turn)."
        }
    },
    openapi_extra=raw_body(
        "application/merge-patch+json", "application/json", schema={"type": "object"}
    ),
)
def patch_context(
    project: ProjectName, feature: FeatureName, request: DecodedRequest, writes: WritesDep
) -> Response:
    """JSON merge patch (RFC 7396), e.g. `{"current_phase": "l1_design"}` or
    `{"context_sources": {"l1_architecture": {"status": "completed"}}}`. The result must still
    be a valid context (422 and nothing changed otherwise). `last_updated` moves to now unless
    the patch sets it. Returns the new `context.json`; one over the body limit (grown by its
    handovers) is not sent back (204 with its ETag: GET it). Honours `If-Match`."""
    raw = request.received
    merge = jsondoc.load(raw, allow_nan=False)
    precondition = if_match(request)
    # A document over the body limit is sent in an export turn, by its GET alone: an answer
    # held by a client that does not read would hold it with none.
    most_bytes: int = request.app.state.settings.max_body_bytes
    location = _url(project, feature, "context")

    def change(write: Write) -> Response:
        patched = service.patch(write, feature, merge, precondition)
        if len(patched.content) > most_bytes:
            return Response(
                status_code=204, headers={"ETag": patched.etag, "Content-Location": location}
            )
        return _document(patched, 200)

    return writes.run(project, change)


@router.delete("/features/{feature}/context", status_code=204, response_class=Response)
def delete_context(
    project: ProjectName, feature: FeatureName, request: Request, writes: WritesDep
) -> Response:
    """Delete the feature: its context, its handovers and its `workflow.json`. Honours
    `If-Match` (the context's ETag). The answer comes once the feature is gone: reads, lists,
    the project's counts and its archive no longer find it or its handovers, a second delete is
    a 404, and a feature of the same name can be made at once. Its handovers are deleted after
    the answer, in batches, other writes running between them."""
    precondition = if_match(request)
    return writes.hide(project, lambda write: service.delete_feature(write, feature, precondition))


_add_file_routes(
    "workflow",
    service.WORKFLOW,
    _json_file("`workflow.json` exactly as it was stored."),
    exported="The feature's `workflow.json` (sdd-unified's task graph), byte for byte as stored.",
    stored="""Store `workflow.json` exactly as sent (201 created, 200 replaced): any JSON object,
never rewritten. It needs no context (the orchestrator writes it first). Honours
`If-Match` and `If-None-Match: *`.""",
)


@router.delete("/features/{feature}/workflow", status_code=204, response_class=Response)
def delete_workflow(
    project: ProjectName, feature: FeatureName, request: Request, writes: WritesDep
) -> Response:
    """Delete the feature's `workflow.json` alone. Honours `If-Match`."""
    precondition = if_match(request)
    return writes.delete(
        project, lambda write: service.delete_workflow(write, feature, precondition)
    )


@router.post("/features/{feature}/handovers", status_code=201, response_model=HandoverAppended)
def append_handover(
    project: ProjectName,
    feature: FeatureName,
    body: HandoverCreate,
    request: Request,
    writes: IdempotentWritesDep,
) -> Response:
    """Append a handover note to `handover_notes.history`. `timestamp` is now (in the tool's
    style) when absent; `last_updated` moves to now. Honours `If-Match`."""
    note = body.model_dump()
    precondition = if_match(request)

    def change(write: Write) -> Response:
        appended = service.append_handover(write, feature, note, precondition)
        # Rendered once, from the values in hand (``HandoverAppended``'s fields, in order).
        result = {
            "feature_id": feature,
            "index": appended.index,
            "note": appended.note,
            "last_updated": appended.last_updated,
        }
        return _json(result, 201, {"ETag": appended.etag})

    return writes.run(project, change)


@router.get("/handovers", response_model=Page[HandoverItem])
def list_handovers(
    project: ProjectName,
    session: ReadSession,
    principal: Reader,
    most_bytes: PageBytes,
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
        most_bytes=most_bytes,
    )
    items = [
        {"feature_id": row.feature_id, "index": row.position, "note": jsondoc.load(row.note)}
        for row in rows
    ]
    return _json({"items": items, "next_cursor": next_cursor})


def _breaker_response(
    feature: str, change: breaker.Change, etag: str, status_code: int
) -> Response:
    result = BreakerChange(
        feature_id=feature,
        iteration_tracking=change.iteration_tracking,
        circuit_breaker=change.circuit_breaker,
        tripped=change.tripped,
        last_updated=change.last_updated,
        added=change.added,
    )
    return _json(result.model_dump(), status_code, {"ETag": etag})


@router.post("/features/{feature}/reviews", status_code=201, response_model=BreakerChange)
def record_review(
    project: ProjectName,
    feature: FeatureName,
    body: ReviewCreate,
    request: Request,
    writes: IdempotentWritesDep,
) -> Response:
    """Record a review of a phase, atomically: `attempts` + 1 and the review appended.
    `APPROVED` sets the phase `approved`; a rejection that reaches `max_attempts` sets it
    `limit_reached` and trips the circuit breaker. A phase that is approved, at its limit or
    blocked by the breaker takes no more reviews (409). Honours `If-Match`."""
    review = breaker.Review(
        phase=body.phase,
        outcome=body.outcome,
        rejecting_agents=body.rejecting_agents,
        issues_count=body.issues_count,
    )
    precondition = if_match(request)
    # A context larger than a client may send holds no more reviews (the service says why).
    most_head_bytes: int = request.app.state.settings.max_body_bytes

    def change(write: Write) -> Response:
        done, etag = service.review(write, feature, review, precondition, most_head_bytes)
        return _breaker_response(feature, done, etag, 201)

    return writes.run(project, change)


@router.post("/features/{feature}/circuit-breaker:reset", response_model=BreakerChange)
def reset_circuit_breaker(
    project: ProjectName, feature: FeatureName, request: Request, writes: IdempotentWritesDep
) -> Response:
    """The human intervention: clear the circuit breaker and re-open every phase at its
    limit with a fresh attempt budget (`attempts` 0, `status` active), keeping its reviews.
    409 when there is nothing to reset. Honours `If-Match`."""
    precondition = if_match(request)

    def change(write: Write) -> Response:
        done, etag = service.reset_breaker(write, feature, precondition)
        return _breaker_response(feature, done, etag, 200)

    return writes.run(project, change)
