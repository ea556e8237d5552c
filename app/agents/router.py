import json
from collections.abc import Callable
from typing import Any

from fastapi import Request, Response
from starlette.concurrency import run_in_threadpool

from app.agents import service
from app.agents.schemas import (
    AppendReceipt,
    MemoryFile,
    RestoreRequest,
    RestoreResult,
    SnapshotReceipt,
)
from app.core.body import DecodedRequest, media_type_of, raw_body
from app.core.conditional import Precondition, if_match, if_match_or_create_only
from app.core.deps import Reader, ReadSession
from app.core.identifiers import AgentName, ProjectName
from app.core.json import FastJSONResponse, spliceable
from app.core.limits import EXPORTS_ALL_RUNNING, LARGE_FILE_EXPORTS_ALL_RUNNING
from app.core.pagination import Cursor, Limit, PageBytes
from app.core.responses import ResponsesDoc, document_response, download, in_export_turn
from app.core.routing import GatedRouter
from app.core.schemas import Page
from app.formats import working_context_snapshot as snapshot_format
from app.formats.agent_memory import NDJSON_MEDIA_TYPE
from app.storage.route import IdempotentWritesDep, ReadFirstWriteRoute, WriteRoute, WritesDep
from app.storage.writes import Write

router = GatedRouter(
    prefix="/v1/projects/{project}/agents/{agent}", tags=["agents"], route_class=WriteRoute
)

SNAPSHOT_FILE: ResponsesDoc = {
    200: {
        "description": "The snapshot exactly as autobyteus writes it (compact, one line).",
        "content": {"application/json": {"schema": {"type": "object"}}},
    },
    304: {"description": "Unchanged (If-None-Match)."},
    429: LARGE_FILE_EXPORTS_ALL_RUNNING,
}
MEMORY_LIST: ResponsesDoc = {
    200: {
        "description": "A page of items, oldest first; with `Accept: application/x-ndjson`, "
        "the whole JSONL file.",
        "content": {NDJSON_MEDIA_TYPE: {"schema": {"type": "string"}}},
    },
    304: {"description": "Unchanged (If-None-Match, for the JSONL file)."},
    429: EXPORTS_ALL_RUNNING,
}
APPEND_BODY = raw_body(
    "application/json",
    NDJSON_MEDIA_TYPE,
    schema={"oneOf": [{"type": "object"}, {"type": "array", "items": {"type": "object"}}]},
)
APPEND_BODY["requestBody"]["content"][NDJSON_MEDIA_TYPE]["schema"] = {
    "type": "string",
    "description": "JSONL: one item a line, as in the memory files.",
}


def _json(body: Any, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    # Python's json, not orjson: documents may hold integers beyond 64 bits.
    return Response(json.dumps(body), status_code, headers, media_type="application/json")


@router.put(
    "/working-context-snapshot",
    response_model=SnapshotReceipt,
    responses={201: {"description": "Created.", "model": SnapshotReceipt}},
    openapi_extra=raw_body("application/json", schema=snapshot_format.HEADER_SCHEMA),
)
def put_snapshot(
    project: ProjectName,
    agent: AgentName,
    request: DecodedRequest,
    writes: WritesDep,
) -> Response:
    """Write the cache. Valid means `schema_version` 1, `agent_id` equal to the path's agent,
    and well-formed messages; otherwise a 422 names each fault. Honours If-Match and
    `If-None-Match: *`."""
    raw = request.received
    precondition = if_match_or_create_only(request)
    prepared = service.prepare_snapshot(raw, agent)

    def change(write: Write) -> Response:
        stored = service.store_snapshot(write, agent, prepared, precondition)
        return FastJSONResponse(
            stored.receipt.model_dump(),
            status_code=201 if stored.created else 200,
            headers={"ETag": stored.etag},
        )

    return writes.run(project, change)


@router.get("/working-context-snapshot", response_class=Response, responses=SNAPSHOT_FILE)
async def get_snapshot(
    project: ProjectName,
    agent: AgentName,
    request: Request,
    session: ReadSession,
    principal: Reader,
) -> Response:
    """The cache exactly: `json.dumps(payload)`, one line."""
    tenant = principal.tenant
    return await download(
        request,
        session,
        tenant,
        lambda up_to: service.get_snapshot(session, tenant, project, agent, up_to),
    )


@router.delete("/working-context-snapshot", status_code=204, response_class=Response)
def delete_snapshot(
    project: ProjectName, agent: AgentName, request: Request, writes: WritesDep
) -> Response:
    """Drop the cache. Honours If-Match."""
    precondition = if_match(request)
    return writes.delete(project, lambda write: service.delete_snapshot(write, agent, precondition))


@router.post(
    "/memory/{memory}", status_code=201, response_model=AppendReceipt, openapi_extra=APPEND_BODY
)
def append_memory(
    project: ProjectName,
    agent: AgentName,
    memory: MemoryFile,
    request: DecodedRequest,
    writes: IdempotentWritesDep,
) -> Response:
    """Append items: one JSON object, a JSON array of them, or JSONL lines
    (`application/x-ndjson`). All are checked before any is stored."""
    raw = request.received
    items = service.prepare_memory(raw, media_type_of(request), memory.kind)
    return writes.run(
        project,
        lambda write: FastJSONResponse(
            {"appended": service.store_memory(write, agent, memory.kind, items)}, status_code=201
        ),
    )


def _wants_ndjson(request: Request) -> bool:
    accepted = request.headers.get("accept", "").split(",")
    return any(part.split(";")[0].strip().lower() == NDJSON_MEDIA_TYPE for part in accepted)


@router.get("/memory/{memory}", response_model=Page[dict[str, Any]], responses=MEMORY_LIST)
async def list_memory(
    project: ProjectName,
    agent: AgentName,
    memory: MemoryFile,
    request: Request,
    session: ReadSession,
    principal: Reader,
    most_bytes: PageBytes,
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Response:
    """Items oldest first. With `Accept: application/x-ndjson`, the whole file as autobyteus
    writes it (`json.dumps(item)` and a newline per item), as a download; a tenant, and the
    server, send a bounded number of whole files (and archives) at once: beyond them a request
    waits for a turn, then gets a 429 with `Retry-After`."""
    tenant = principal.tenant
    if _wants_ndjson(request):
        # In a turn whatever its size, 304 included: the file's size and ETag are known only
        # once its lines are read.
        def exported() -> Response:
            file = service.memory_file(session, tenant, project, agent, memory.kind)
            response = document_response(request, file, media_type=NDJSON_MEDIA_TYPE)
            response.headers["Vary"] = "Accept, Accept-Encoding"
            return response

        return await in_export_turn(request, tenant, exported)

    def page() -> bytes:
        # In the worker thread: a line holding NaN or Infinity is parsed and written again
        # (``spliceable``), 85 ms of CPU for a page of 500 such lines of 100 KB.
        lines, next_cursor = service.memory_page(
            session, tenant, project, agent, memory.kind, cursor, limit, most_bytes
        )
        # The stored lines are already JSON: spliced in, not parsed and rendered again.
        items = b",".join(spliceable(line) for line in lines)
        return b'{"items":[' + items + b'],"next_cursor":' + json.dumps(next_cursor).encode() + b"}"

    content = await run_in_threadpool(page)
    return Response(content, media_type="application/json", headers={"Vary": "Accept"})


class _CacheChanged(Exception):
    """The cache was written between a restore's plan and its write: nothing was stored."""


# Plans made before the write, again when the cache changes under one; then one in the write.
RESTORE_ATTEMPTS = 3


def restore(
    project: ProjectName,
    agent: AgentName,
    body: RestoreRequest,
    request: Request,
    writes: IdempotentWritesDep,
) -> Response:
    """Restore the working context as autobyteus 1.4.4's `restore_agent` does: from a valid
    cache (`source: cache`, its messages written again through autobyteus's `Message`),
    otherwise a rebuild from the system prompt and memory (`source: rebuild`, with the
    `reason`). The result is stored as the new cache at `epoch_id` 2, `last_compaction_ts`
    now. Honours If-Match (against the current cache)."""
    precondition = if_match(request)
    for _attempt in range(RESTORE_ATTEMPTS):
        # Read and built first, with no lock held; stored only if the cache is still the one
        # read (memory appended meanwhile is the next restore's).
        with writes.database.read_session() as session:
            planned = service.plan_restore(session, writes.tenant, project, agent, body)

        try:
            return writes.run(project, _storing(agent, planned, precondition))
        except _CacheChanged:
            continue

    # The cache changed under each plan (restores of one agent at once): planned in the write
    # this time, under the project's lock, which every write of the cache takes first.
    def planned_in_the_write(write: Write) -> Response:
        planned = service.plan_restore(write.session, write.tenant, project, agent, body)
        return _storing(agent, planned, precondition)(write)

    return writes.run(project, planned_in_the_write)


def _storing(
    agent: str, planned: service.PlannedRestore, precondition: Precondition
) -> Callable[[Write], Response]:
    def change(write: Write) -> Response:
        restored = service.restore(write, agent, planned, precondition)
        if restored is None:
            raise _CacheChanged  # rolls the write back, the Idempotency-Key's claim too
        answer = {"source": restored.source, "reason": restored.reason}
        return _json(answer | {"snapshot": restored.document}, headers={"ETag": restored.etag})

    return change


# In a worker thread, never the write turn (SQLite's one writer): a rebuild reads and builds
# for seconds before it writes.
router.add_api_route(
    "/restore",
    restore,
    methods=["POST"],
    response_model=RestoreResult,
    route_class_override=ReadFirstWriteRoute,
)
