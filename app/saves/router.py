from typing import Annotated, Any

from fastapi import Query, Request, Response
from sqlmodel import Session

from app.core.body import (
    DecodedRequest,
    raw_body,
)
from app.core.conditional import if_match
from app.core.deps import Reader, ReadSession, get_settings
from app.core.errors import Problem
from app.core.identifiers import ProjectName
from app.core.json import FastJSONResponse, dumps
from app.core.limits import BULK_IMPORTS_ALL_RUNNING, LARGE_FILE_EXPORTS_ALL_RUNNING
from app.core.pagination import Cursor, Limit
from app.core.params import SaveNumber, UTCInstant
from app.core.responses import ResponsesDoc, download, location_under
from app.core.routing import GatedRouter
from app.core.schemas import Page
from app.formats import mdan_save
from app.formats.gzip import is_gzip
from app.idempotency.service import AnswerByReference
from app.saves import service
from app.saves.repository import SaveFilter
from app.saves.schemas import PruneRequest, PruneResult, ResumeResult, SaveReceipt, SaveSummary
from app.storage.route import (
    BulkWriteRoute,
    IdempotentWritesDep,
    ReadFirstWriteRoute,
    WriteRoute,
    Writes,
    WritesDep,
)
from app.storage.writes import Write

router = GatedRouter(prefix="/v1/projects/{project}", tags=["saves"], route_class=WriteRoute)

SAVE_FILE: ResponsesDoc = {
    200: {
        "description": "The save file exactly as MDAN-AUTO writes it.",
        "content": {"application/json": {"schema": {"type": "object"}}},
    },
    304: {"description": "Unchanged (If-None-Match)."},
    429: LARGE_FILE_EXPORTS_ALL_RUNNING,
}


def import_save(
    project: ProjectName,
    request: DecodedRequest,
    writes: IdempotentWritesDep,
    filename: Annotated[
        str | None,
        Query(
            pattern=mdan_save.FILENAME_PATTERN,
            description="The file's own name (`mdan-save-<unix seconds>.json`), kept for its "
            "download and the archive. Without it, the name is taken from `timestamp`.",
        ),
    ] = None,
) -> Response:
    """Import one save file: JSON, gzip-encoded JSON (`Content-Encoding: gzip`) or a
    `.json.gz` file as the body. Missing or invalid fields get their documented default and a
    warning; secrets are redacted before storage and counted by kind. Values are kept as
    written, integers of any size, NaN and Infinity included."""
    raw = request.received
    settings = get_settings(request)
    if is_gzip(raw):
        raw = request.inflate(raw)
    # The slow, pure part first: the database (SQLite's single writer) is not held meanwhile.
    prepared = service.prepare_save(raw, filename)

    def change(write: Write) -> Response:
        stored = service.store_save(write, prepared, auto_prune=settings.saves_auto_prune)
        return FastJSONResponse(
            stored.receipt.model_dump(mode="json"),
            status_code=201,
            headers={
                "Location": location_under(request, str(stored.receipt.id)),
                "ETag": stored.etag,
            },
        )

    return writes.run(project, change)


@router.get("/saves", response_model=Page[SaveSummary])
def list_saves(
    project: ProjectName,
    session: ReadSession,
    principal: Reader,
    phase: Annotated[
        str | None, Query(description="Only saves whose `phases.current` is this.")
    ] = None,
    filename: Annotated[
        str | None,
        Query(
            pattern=mdan_save.FILENAME_PATTERN,
            description="Only saves of this file name (`mdan-save-<unix seconds>.json`): how "
            "the archive and the MCP resources name a save.",
        ),
    ] = None,
    since: Annotated[
        UTCInstant | None, Query(description="Saves with `timestamp` at or after.")
    ] = None,
    until: Annotated[
        UTCInstant | None, Query(description="Saves with `timestamp` at or before.")
    ] = None,
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[SaveSummary]:
    """Summaries of the project's saves, newest `timestamp` first."""
    where = SaveFilter(phase=phase, filename=filename, since=since, until=until)
    saves, next_cursor = service.list_saves(
        session, principal.tenant, project, where, cursor, limit
    )
    return Page(items=saves, next_cursor=next_cursor)


@router.get("/saves/latest", response_class=Response, responses=SAVE_FILE)
async def latest_save(
    project: ProjectName, request: Request, session: ReadSession, principal: Reader
) -> Response:
    """The newest save (by its `timestamp`), exactly as it was stored."""
    tenant = principal.tenant
    return await download(
        request,
        session,
        tenant,
        lambda up_to: service.latest_file(session, tenant, project, up_to),
    )


@router.get("/saves/{save_id}", response_class=Response, responses=SAVE_FILE)
async def export_save(
    project: ProjectName,
    save_id: SaveNumber,
    request: Request,
    session: ReadSession,
    principal: Reader,
) -> Response:
    """The save file exactly: `json.dumps(save, indent=2)`; with `Accept-Encoding: gzip`
    it is sent compressed. A save over the body limit is sent in an export turn (a 429 when
    none comes)."""
    tenant = principal.tenant
    return await download(
        request,
        session,
        tenant,
        lambda up_to: service.get_file(session, tenant, project, save_id, up_to),
    )


def _answered_by_its_key(writes: Writes, session: Session) -> bool:
    if writes.idempotency is None:
        return False
    try:
        return writes.idempotency.recorded(session) is not None
    except Problem:  # the key's own answer (in use, or another request's): the write gives it
        return True


def resume_save(
    project: ProjectName, save_id: SaveNumber, request: Request, writes: IdempotentWritesDep
) -> Response:
    """Seed 000's resume: checks the version (409 if it cannot be resumed), increments
    `metadata.resume_count` (stored), and returns the save with the phase to resume."""
    precondition = if_match(request)
    with writes.database.read_session() as session:
        # A retry under a key already answered (or refused) is answered from the key in the
        # write: working the save out first would cost seconds of CPU a replay of a large one.
        prepared = (
            None
            if _answered_by_its_key(writes, session)
            else service.prepare_resume(
                session, writes.tenant, project, save_id, writes.answer_up_to
            )
        )

    def change(write: Write) -> Response:
        resumed = service.resume(write, save_id, precondition, prepared)
        # Under an Idempotency-Key, an answer over the body limit is remembered by this, not
        # stored whole: the save it carries is stored already, in the version its ETag names.
        reference = {
            "id": resumed.save_id,
            "resume_phase": resumed.resume_phase,
            "resume_count": resumed.resume_count,
            "etag": resumed.etag,
        }
        return AnswerByReference(
            service.resume_answer(reference, resumed.document),
            reference=reference,
            headers={"ETag": resumed.etag},
        )

    def rebuild(session: Session, reference: dict[str, Any]) -> bytes | None:
        document = service.save_as_resumed(
            session, writes.tenant, project, reference["id"], reference["etag"]
        )
        return None if document is None else dumps(service.resume_answer(reference, document))

    return writes.run(project, change, rebuild=rebuild)


# In a worker thread, never the write turn (SQLite's one writer): the resume is worked out from
# the save before its write, which then only stores it.
router.add_api_route(
    "/saves/{save_id}/resume",
    resume_save,
    methods=["POST"],
    response_model=ResumeResult,
    # It answers the whole save: one over the body limit is resumed in an export turn.
    responses={429: LARGE_FILE_EXPORTS_ALL_RUNNING},
    route_class_override=ReadFirstWriteRoute,
)


@router.delete("/saves/{save_id}", status_code=204, response_class=Response)
def delete_save(
    project: ProjectName, save_id: SaveNumber, request: Request, writes: WritesDep
) -> Response:
    """Delete one save. Honours If-Match."""
    precondition = if_match(request)
    return writes.delete(project, lambda write: service.delete_save(write, save_id, precondition))


@router.post("/saves:prune", response_model=PruneResult)
def prune_saves(project: ProjectName, body: PruneRequest, writes: WritesDep) -> Response:
    """Retention: keep the `keep_latest` newest saves, delete the rest."""

    def change(write: Write) -> Response:
        deleted = service.prune(write, body.keep_latest)
        return FastJSONResponse(PruneResult(deleted=deleted).model_dump(mode="json"))

    # Pruning a project that does not exist is a 404: it would only take away.
    return writes.run(project, change, create=False)


# Save files carry whole agent histories: their import takes the bulk body limit. Added last, as
# its own router was included before, so that the routes keep their order.
router.add_api_route(
    "/saves",
    import_save,
    methods=["POST"],
    status_code=201,
    response_model=SaveReceipt,
    responses={429: BULK_IMPORTS_ALL_RUNNING},
    openapi_extra=raw_body("application/json", "application/gzip", schema={"type": "object"}),
    route_class_override=BulkWriteRoute,
)
