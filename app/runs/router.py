from fastapi import Request, Response

from app.core.body import DecodedRequest, media_type_of, raw_body
from app.core.conditional import if_match, if_match_or_create_only
from app.core.deps import Reader, ReadSession
from app.core.errors import FieldError, InvalidContent
from app.core.identifiers import ProjectName, RunName
from app.core.json import FastJSONResponse
from app.core.limits import LARGE_FILE_EXPORTS_ALL_RUNNING
from app.core.pagination import Cursor, Limit
from app.core.responses import ResponsesDoc, download
from app.core.routing import GatedRouter
from app.core.schemas import Page
from app.runs import service
from app.runs.schemas import (
    IterationEnd,
    IterationResult,
    IterationStart,
    LoadResult,
    RunSummary,
    StatePatch,
    StateReceipt,
)
from app.storage.route import IdempotentWritesDep, WriteRoute, WritesDep
from app.storage.writes import Write

router = GatedRouter(prefix="/v1/projects/{project}", tags=["runs"], route_class=WriteRoute)

STATE_FILE: ResponsesDoc = {
    200: {
        "description": "`.atari/state.json` exactly as atari's Go writer writes it.",
        "content": {"application/json": {"schema": {"type": "object"}}},
    },
    304: {"description": "Unchanged (If-None-Match)."},
    429: LARGE_FILE_EXPORTS_ALL_RUNNING,
}
BACKUP_FILE: ResponsesDoc = {
    200: {
        "description": "The bytes `state:load` set aside, exactly as they came.",
        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
    },
    304: {"description": "Unchanged (If-None-Match)."},
    429: LARGE_FILE_EXPORTS_ALL_RUNNING,
}
STATE_SCHEMA = {"type": "object", "description": "An atari state document, version 1 or 2."}


def _json(body: RunSummary | IterationResult | LoadResult, status: int = 200) -> Response:
    """The body, with the ETag of the state document as it now is."""
    state = body if isinstance(body, RunSummary) else body.state
    return FastJSONResponse(
        body.model_dump(mode="json"), status_code=status, headers={"ETag": state.etag}
    )


@router.get("/runs", response_model=Page[RunSummary])
def list_runs(
    project: ProjectName,
    session: ReadSession,
    principal: Reader,
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[RunSummary]:
    """The project's runs with status, iteration, current bead and totals, most recently
    written first."""
    items, next_cursor = service.list_runs(session, principal.tenant, project, cursor, limit)
    return Page(items=items, next_cursor=next_cursor)


@router.put(
    "/runs/{run}/state",
    response_model=StateReceipt,
    responses={201: {"model": StateReceipt, "description": "Created."}},
    openapi_extra=raw_body("application/json", schema=STATE_SCHEMA),
)
def put_state(
    project: ProjectName,
    run: RunName,
    request: DecodedRequest,
    writes: WritesDep,
) -> Response:
    """Store a state document as it is. Strict: anything atari could not read into its state
    (or a version other than 1 and 2) is a 400 or 422 and changes nothing. Null or empty
    `omitempty` fields are dropped, as atari's writer drops them, and listed in `notices`; in
    version 2 a missing or null `stalled_at` is written as Go's zero time,
    `0001-01-01T00:00:00Z`, as atari writes it. Honours If-Match and `If-None-Match: *`."""
    raw = request.received
    prepared = service.prepare_state(raw)
    precondition = if_match_or_create_only(request)

    def change(write: Write) -> Response:
        receipt, created = service.put_state(write, run, prepared, precondition)
        return _json(receipt, 201 if created else 200)

    return writes.run(project, change)


@router.get("/runs/{run}/state", response_class=Response, responses=STATE_FILE)
async def export_state(
    project: ProjectName, run: RunName, request: Request, session: ReadSession, principal: Reader
) -> Response:
    """`.atari/state.json` byte for byte as atari writes it (`json.MarshalIndent`, two
    spaces): struct field order, raw UTF-8, `<`, `>`, `&` escaped, no trailing newline. A
    state over the body limit is sent in an export turn (a 429 when none comes)."""
    tenant = principal.tenant
    return await download(
        request,
        session,
        tenant,
        lambda up_to: service.get_file(session, tenant, project, run, up_to),
    )


@router.get("/runs/{run}/state/backup", response_class=Response, responses=BACKUP_FILE)
async def export_backup(
    project: ProjectName, run: RunName, request: Request, session: ReadSession, principal: Reader
) -> Response:
    """`.atari/state.json.backup`: the bytes the last resetting `state:load` set aside,
    byte for byte. 404 when there is none."""
    tenant = principal.tenant
    return await download(
        request,
        session,
        tenant,
        lambda up_to: service.get_backup(session, tenant, project, run, up_to),
        media_type="application/octet-stream",
    )


@router.post(
    "/runs/{run}/state:load",
    response_model=LoadResult,
    openapi_extra=raw_body("application/json", "application/octet-stream"),
)
def load_state(
    project: ProjectName,
    run: RunName,
    request: DecodedRequest,
    writes: IdempotentWritesDep,
) -> Response:
    """atari's own load, for a file from disk (any bytes): version 2 is stored, version 1
    migrated to 2; a missing or zero version, a future version or bytes atari cannot read are
    kept verbatim as the backup and the state starts fresh. `outcome` says which."""
    raw = request.received
    if media_type_of(request) is None:
        # No body at all (one without a type is a 415 already): not an empty file, which
        # would reset the state, but no file. An empty file is an empty body with a type.
        raise InvalidContent(
            "state:load takes the file's bytes as the body.",
            errors=[FieldError("", "a body with a Content-Type is required")],
        )
    prepared = service.prepare_load(raw)
    return writes.run(project, lambda write: _json(service.store_load(write, run, prepared)))


@router.post("/runs/{run}/iterations", response_model=IterationResult)
def start_iteration(
    project: ProjectName,
    run: RunName,
    body: IterationStart,
    request: Request,
    writes: IdempotentWritesDep,
) -> Response:
    """Start an attempt, atomically: `iteration` + 1, `current_bead` set, the bead's history
    entry created if new, its `status` `working`, `attempts` set (or + 1), `last_attempt`
    set (`at`, or now). A run without state starts from a fresh one."""
    precondition = if_match(request)
    return writes.run(
        project, lambda write: _json(service.start_iteration(write, run, body, precondition))
    )


@router.post("/runs/{run}/iterations/end", response_model=IterationResult)
def end_iteration(
    project: ProjectName,
    run: RunName,
    body: IterationEnd,
    request: Request,
    writes: IdempotentWritesDep,
) -> Response:
    """End an attempt, atomically: `current_bead` cleared, the entry's `status` set
    (`completed` or `failed`), `last_error` (failed) and `last_session_id` set; `cost` and
    `turns` added to the totals once per `session_id` (`counted` says whether this time).
    409 if the bead has no history entry."""
    precondition = if_match(request)
    return writes.run(
        project, lambda write: _json(service.end_iteration(write, run, body, precondition))
    )


@router.patch("/runs/{run}/state", response_model=RunSummary)
def patch_state(
    project: ProjectName,
    run: RunName,
    body: StatePatch,
    request: Request,
    writes: WritesDep,
) -> Response:
    """Set `status`, `active_top_level` and its title, and the stall fields
    (`stalled_bead_id`, `stalled_bead_title`, `stall_reason`, `stalled_at`, `stall_type`,
    `created_beads`); null or empty clears an optional field (a cleared `stalled_at` is
    written as Go's zero time in version 2, as atari writes it). Honours If-Match."""
    precondition = if_match(request)
    return writes.run(
        project, lambda write: _json(service.patch_state(write, run, body, precondition))
    )


@router.delete("/runs/{run}", status_code=204, response_class=Response)
def delete_run(project: ProjectName, run: RunName, request: Request, writes: WritesDep) -> Response:
    """Delete the run: its state, its backup and its counted sessions. Honours If-Match. The
    answer comes once the run is gone: reads, lists, the project's counts and its archive no
    longer find it, a second delete is a 404, and a run of the same name can be made at once.
    Its history's entries and counted sessions are deleted after the answer, in batches, other
    writes running between them."""
    precondition = if_match(request)
    return writes.hide(project, lambda write: service.delete_run(write, run, precondition))
