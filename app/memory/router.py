from enum import StrEnum
from typing import Annotated, Any

from fastapi import Path, Query, Request, Response

from app.core.body import DecodedRequest, raw_body
from app.core.conditional import if_match, if_match_or_create_only, not_modified
from app.core.constraints import IDENTIFIER_PATTERN, path_segment
from app.core.deps import Reader, ReadSession, get_settings
from app.core.errors import FieldError, InvalidContent
from app.core.identifiers import ProjectName
from app.core.json import FastJSONResponse
from app.core.limits import LARGE_FILE_EXPORTS_ALL_RUNNING
from app.core.pagination import Cursor, Limit, PageBytes
from app.core.responses import (
    ResponsesDoc,
    download,
    location_under,
)
from app.core.routing import GatedRouter
from app.core.schemas import Page
from app.formats import jsondoc
from app.formats.jsondoc import INT64_MAX, INT64_MIN
from app.formats.project_memory import ITEM_REQUIRED, SUMMARY_REQUIRED, ItemKind, Style
from app.memory import service
from app.memory.pack import ConstraintsOverBudget
from app.memory.repository import WORD, ItemFilter
from app.memory.schemas import (
    ContextPack,
    FileReceipt,
    ItemCreated,
    MaintenanceResult,
    MemoryItemPublic,
    SummaryReceipt,
)
from app.storage.route import IdempotentWritesDep, WriteRoute, WritesDep
from app.storage.writes import Write

router = GatedRouter(
    prefix="/v1/projects/{project}/memory", tags=["memory"], route_class=WriteRoute
)


class MemoryFileName(StrEnum):
    running_summary = "running-summary.json"
    key_decisions = "key-decisions.json"
    failure_memory = "failure-memory.json"
    active_constraints = "active-constraints.json"


FILE_KINDS = {
    MemoryFileName.key_decisions: ItemKind.decision,
    MemoryFileName.failure_memory: ItemKind.failure,
    MemoryFileName.active_constraints: ItemKind.constraint,
}

# Any text, "/" too (the tools' files name items as they like): the path convertor takes the
# rest of the path, so that an id with a "/" (sent as %2F) is reachable; before, its item
# could be listed and never read, changed or deleted.
ItemId = Annotated[str, Path(min_length=1, max_length=256, description="The item's `id`.")]
StyleQuery = Annotated[
    Style | None,
    Query(description="Key style of the export; default: the style the file was written in."),
]
EpochMs = Annotated[int | None, Query(ge=INT64_MIN, le=INT64_MAX)]
Text = Annotated[str | None, Query(min_length=1, max_length=1000)]
Search = Annotated[
    str | None, Query(min_length=1, max_length=1000, description="Full-text search (all words).")
]
IncludeArchived = Annotated[bool, Query(description="Also list archived items.")]

JSON_FILE: ResponsesDoc = {
    200: {
        "description": "The file exactly as the Context Agent writes it.",
        "content": {"application/json": {"schema": {}}},
    },
    304: {"description": "Unchanged (If-None-Match)."},
    429: LARGE_FILE_EXPORTS_ALL_RUNNING,
}


def _object_body(required: tuple[str, ...]) -> dict[str, Any]:
    """A JSON object with the fields the format requires. Those named alike in both key styles
    only: the others (``featureId``/``feature_id``) are one of two spellings, checked by the
    route."""
    # Each of them is text (``project_memory``'s "text" rule).
    schema = {
        "type": "object",
        "required": list(required),
        "properties": {name: {"type": "string"} for name in required},
    }
    return raw_body("application/json", schema=schema)


def _summary_response(receipt: SummaryReceipt) -> Response:
    return FastJSONResponse(
        receipt.model_dump(mode="json"),
        status_code=201 if receipt.created else 200,
        headers={"ETag": receipt.etag},
    )


# The running summary, and the four files.


@router.get("/running-summary", response_class=Response, responses=JSON_FILE)
async def get_running_summary(
    project: ProjectName,
    request: Request,
    session: ReadSession,
    principal: Reader,
    style: StyleQuery = None,
) -> Response:
    """`running-summary.json`, exactly (the same as `files/running-summary.json`)."""
    tenant = principal.tenant
    return await download(
        request,
        session,
        tenant,
        lambda up_to: service.summary_file(session, tenant, project, style, up_to),
    )


@router.put(
    "/running-summary",
    response_model=SummaryReceipt,
    responses={201: {"model": SummaryReceipt}},
    openapi_extra=_object_body(SUMMARY_REQUIRED),
)
def put_running_summary(
    project: ProjectName, request: DecodedRequest, writes: WritesDep
) -> Response:
    """Store the summary (camelCase or snake_case keys). Its content must be within the limit
    (2000 tokens by default) by the service's own count; a missing `tokenCount` is filled in
    with that count and reported in `filled`."""
    raw = request.received
    return _put_summary(project, request, raw, writes, service.OverLimit.refuse)


def _put_summary(
    project: str, request: Request, raw: bytes, writes: WritesDep, over_limit: service.OverLimit
) -> Response:
    limit = get_settings(request).memory_summary_max_tokens
    prepared = service.prepare_summary(raw, limit, over_limit)
    precondition = if_match_or_create_only(request)
    return writes.run(
        project,
        lambda write: _summary_response(service.store_summary(write, prepared, precondition)),
    )


@router.get("/files/{name}", response_class=Response, responses=JSON_FILE)
async def export_file(
    project: ProjectName,
    name: MemoryFileName,
    request: Request,
    session: ReadSession,
    principal: Reader,
    style: StyleQuery = None,
) -> Response:
    """A file exactly as the tools write it (`json.dumps(doc, indent=2)`), in the key style
    it was imported in unless `style` says otherwise. List files hold the items not archived.
    A file over the body limit is sent in an export turn (a 429 when none comes)."""
    tenant = principal.tenant
    if name is MemoryFileName.running_summary:
        return await download(
            request,
            session,
            tenant,
            lambda up_to: service.summary_file(session, tenant, project, style, up_to),
        )
    kind = FILE_KINDS[name]
    return await download(
        request,
        session,
        tenant,
        lambda up_to: service.items_file(session, tenant, project, kind, style, up_to),
    )


@router.put(
    "/files/{name}",
    response_model=SummaryReceipt | FileReceipt,
    openapi_extra=raw_body("application/json", schema={}),
)
def import_file(
    project: ProjectName,
    name: MemoryFileName,
    request: DecodedRequest,
    writes: WritesDep,
) -> Response:
    """Import a file. A list file replaces the set of items not archived: items are matched
    by `id`, items missing from the file are deleted. The running summary is kept as its
    writer wrote it: a content over the token limit is reported in `warnings`, not refused.
    Honours If-Match and If-None-Match."""
    raw = request.received
    if name is MemoryFileName.running_summary:
        return _put_summary(project, request, raw, writes, service.OverLimit.warn)
    kind = FILE_KINDS[name]
    prepared = service.prepare_items_file(raw, kind)
    precondition = if_match_or_create_only(request)

    def change(write: Write) -> Response:
        etag, style, count = service.store_items_file(write, kind, prepared, precondition)
        receipt = FileReceipt(etag=etag, style=style, items=count)
        return FastJSONResponse(receipt.model_dump(mode="json"), headers={"ETag": etag})

    return writes.run(project, change)


# Decisions, failures and constraints.


def _check_query_text(parameter: str, value: str | None) -> None:
    if value is not None and not jsondoc.is_storable(value):
        raise InvalidContent(
            "A query parameter holds a character the store cannot compare.",
            errors=[FieldError(f"query.{parameter}", "NUL and lone surrogates are not allowed")],
        )


def _list(
    session: ReadSession,
    principal: Reader,
    project: str,
    kind: ItemKind,
    where: ItemFilter,
    cursor: str | None,
    limit: int,
    most_bytes: int,
) -> Page[MemoryItemPublic]:
    for name in ("feature_id", "category", "severity", "q"):
        _check_query_text(name, getattr(where, name))
    if where.q is not None and not WORD.search(where.q):
        raise InvalidContent(
            "The search has no words to look for.",
            errors=[FieldError("query.q", "needs at least one letter or digit")],
        )
    items, next_cursor = service.list_items(
        session, principal.tenant, project, kind, where, cursor, limit, most_bytes
    )
    return Page(items=items, next_cursor=next_cursor)


@router.get("/decisions", response_model=Page[MemoryItemPublic])
def list_decisions(
    project: ProjectName,
    session: ReadSession,
    principal: Reader,
    most_bytes: PageBytes,
    feature_id: Text = None,
    category: Text = None,
    since: EpochMs = None,
    until: EpochMs = None,
    q: Search = None,
    include_archived: IncludeArchived = False,
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[MemoryItemPublic]:
    """Key decisions, newest `timestamp` first. `since`/`until` are epoch milliseconds."""
    where = ItemFilter(
        feature_id=feature_id,
        category=category,
        since=since,
        until=until,
        q=q,
        include_archived=include_archived,
    )
    return _list(session, principal, project, ItemKind.decision, where, cursor, limit, most_bytes)


@router.get("/failures", response_model=Page[MemoryItemPublic])
def list_failures(
    project: ProjectName,
    session: ReadSession,
    principal: Reader,
    most_bytes: PageBytes,
    feature_id: Text = None,
    severity: Text = None,
    since: EpochMs = None,
    until: EpochMs = None,
    q: Search = None,
    include_archived: IncludeArchived = False,
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[MemoryItemPublic]:
    """Failure memory, newest `timestamp` first. `since`/`until` are epoch milliseconds."""
    where = ItemFilter(
        feature_id=feature_id,
        severity=severity,
        since=since,
        until=until,
        q=q,
        include_archived=include_archived,
    )
    return _list(session, principal, project, ItemKind.failure, where, cursor, limit, most_bytes)


@router.get("/constraints", response_model=Page[MemoryItemPublic])
def list_constraints(
    project: ProjectName,
    session: ReadSession,
    principal: Reader,
    most_bytes: PageBytes,
    type: Text = None,
    since: EpochMs = None,
    until: EpochMs = None,
    q: Search = None,
    include_expired: Annotated[
        bool, Query(description="Also list constraints whose `expiresAt` has passed.")
    ] = False,
    include_archived: IncludeArchived = False,
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[MemoryItemPublic]:
    """Active constraints, newest `addedAt` first. An expired one is not active and is left
    out unless `include_expired`."""
    where = ItemFilter(
        category=type,
        since=since,
        until=until,
        q=q,
        include_archived=include_archived,
        active_at=None if include_expired else service.now_ms(),
    )
    return _list(session, principal, project, ItemKind.constraint, where, cursor, limit, most_bytes)


def _add_item_routes(plural: str, kind: ItemKind) -> None:
    """Create, read, patch and delete for one kind of item: the same rules for all three."""

    @router.post(
        f"/{plural}",
        status_code=201,
        response_model=ItemCreated,
        # A missing id is filled in (and reported); the sentence is the item.
        openapi_extra=_object_body(tuple(f for f in ITEM_REQUIRED[kind] if f != "id")),
        name=f"create_{kind.value}",
        summary=f"Create a {kind.value}",
    )
    def create(
        project: ProjectName,
        request: DecodedRequest,
        writes: IdempotentWritesDep,
    ) -> Response:
        """Add an item (camelCase or snake_case keys) at the end of its file. A missing `id`
        (next in the writer's numbering) and time (now, epoch ms) are filled in and listed in
        `filled`. 409 if the id exists."""
        raw = request.received

        def change(write: Write) -> Response:
            created = service.create_item(write, kind, raw)
            location = location_under(request, path_segment(created.fields["id"]))
            return FastJSONResponse(
                created.fields,
                status_code=201,
                headers={"Location": location, "ETag": created.etag},
            )

        return writes.run(project, change)

    @router.get(
        f"/{plural}/{{item_id:path}}",
        response_model=MemoryItemPublic,
        responses={304: {"description": "Unchanged (If-None-Match)."}},
        name=f"get_{kind.value}",
        summary=f"Get a {kind.value}",
    )
    def get(
        project: ProjectName,
        item_id: ItemId,
        request: Request,
        session: ReadSession,
        principal: Reader,
    ) -> Response:
        """One item, archived or not."""
        item, etag = service.get_item(session, principal.tenant, project, kind, item_id)
        if (unchanged := not_modified(request, etag)) is not None:
            return unchanged
        return FastJSONResponse(item.model_dump(mode="json"), headers={"ETag": etag})

    @router.patch(
        f"/{plural}/{{item_id:path}}",
        response_model=MemoryItemPublic,
        openapi_extra=raw_body(
            "application/merge-patch+json", "application/json", schema={"type": "object"}
        ),
        name=f"patch_{kind.value}",
        summary=f"Patch a {kind.value}",
    )
    def patch(
        project: ProjectName,
        item_id: ItemId,
        request: DecodedRequest,
        writes: WritesDep,
    ) -> Response:
        """JSON merge patch (RFC 7396) of the item; keys in either style. The `id` cannot
        change. Honours If-Match."""
        raw = request.received
        precondition = if_match(request)

        def change(write: Write) -> Response:
            item, etag = service.patch_item(write, kind, item_id, raw, precondition)
            return FastJSONResponse(item.model_dump(mode="json"), headers={"ETag": etag})

        return writes.run(project, change)

    @router.delete(
        f"/{plural}/{{item_id:path}}",
        status_code=204,
        response_class=Response,
        name=f"delete_{kind.value}",
        summary=f"Delete a {kind.value}",
    )
    def delete(
        project: ProjectName,
        item_id: ItemId,
        request: Request,
        writes: WritesDep,
    ) -> Response:
        """Delete one item (maintenance never deletes; this does). Honours If-Match."""
        precondition = if_match(request)
        return writes.delete(
            project, lambda write: service.delete_item(write, kind, item_id, precondition)
        )


for _plural, _kind in (
    ("decisions", ItemKind.decision),
    ("failures", ItemKind.failure),
    ("constraints", ItemKind.constraint),
):
    _add_item_routes(_plural, _kind)


@router.post("/maintenance", response_model=MaintenanceResult)
def maintenance(project: ProjectName, writes: WritesDep) -> Response:
    """Seed 004's maintenance, by the running summary's `totalFeaturesCompleted`: decisions
    that arrived 50 or more completed features ago and resolved failures 100 or more ago are
    archived, and expired constraints leave the active set (archived). Nothing is deleted:
    `?include_archived=true` lists archived items."""
    return writes.run(
        project,
        lambda write: FastJSONResponse(service.maintain(write).model_dump(mode="json")),
    )


@router.get("/context", response_model=ContextPack)
def context_pack(
    project: ProjectName,
    session: ReadSession,
    principal: Reader,
    feature_id: Annotated[
        str | None, Query(pattern=IDENTIFIER_PATTERN, description="The feature to prepare for.")
    ] = None,
    about: Annotated[
        str | None,
        Query(max_length=4000, description="What the feature is about: ranks failures."),
    ] = None,
    max_tokens: Annotated[int, Query(ge=1, le=1_000_000, description="Token budget.")] = 2000,
) -> ContextPack:
    """The context pack to inject before a feature: the summary, the 10 newest decisions, the
    5 failures most relevant to the feature (its own first, then by word overlap with its
    decisions and `about`, then the newest) and every active constraint, within `max_tokens`
    (cl100k_base) as sections and as markdown. 422 when the active constraints alone exceed
    the budget."""
    try:
        return service.context_pack(
            session, principal.tenant, project, feature_id, about, max_tokens
        )
    except ConstraintsOverBudget as exc:
        raise InvalidContent(
            f"The {exc.constraints} active constraints alone take {exc.needed} tokens, "
            f"over max_tokens={exc.max_tokens}; every active constraint must be in the pack.",
            errors=[FieldError("query.max_tokens", f"at least {exc.needed} needed")],
        ) from exc
