from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse
from starlette.background import BackgroundTask

from app.archive import service
from app.archive.schemas import ArchiveReport
from app.core.body import BulkBodyRoute, RawBody, raw_body
from app.core.deps import Reader, Writer, get_database, get_settings
from app.core.idempotency import BatchedIdempotencyDep
from app.core.identifiers import ProjectName
from app.core.json import FastJSONResponse
from app.formats.archive import MEDIA_TYPE

# Archives carry whole projects: their import takes the bulk body limit.
router = APIRouter(prefix="/v1/projects/{project}", tags=["archive"], route_class=BulkBodyRoute)

ARCHIVE_FILE = {
    200: {
        "description": "The project's files as a .tar.gz, laid out as the tools lay them out.",
        "content": {MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
    }
}


@router.get("/archive", response_class=StreamingResponse, responses=ARCHIVE_FILE)
def export_archive(project: ProjectName, request: Request, principal: Reader) -> Response:
    """Every file of the project as a `.tar.gz` in the tools' on-disk layout, streamed one
    member at a time; each member is byte for byte what its own export route answers."""
    # The session outlives this function: it reads each member while the body streams, all
    # in one transaction, so the archive is one consistent picture of the project.
    session = get_database(request).read_session()
    try:
        service.consistent_reads(session)
        members = service.plan_export(session, principal.tenant, project)
    except BaseException:
        session.close()
        raise
    return StreamingResponse(
        service.stream(session, members, get_settings(request).gzip_level),
        media_type=MEDIA_TYPE,
        headers={"Content-Disposition": f'attachment; filename="{project}.tar.gz"'},
        # Also when the client leaves before the body was read.
        background=BackgroundTask(session.close),
    )


@router.post(
    "/archive",
    response_model=ArchiveReport,
    openapi_extra=raw_body(MEDIA_TYPE, "application/x-tar+gzip"),
)
def import_archive(
    project: ProjectName,
    request: Request,
    raw: RawBody,
    principal: Writer,
    idempotency: BatchedIdempotencyDep,
) -> Response:
    """Import a `.tar.gz` in the layout the export writes. Each file goes through its own
    import route's rules, in a savepoint of its own: the report lists what was `imported`
    (with that route's answer), `warnings`, `refused` members (with the problem their route
    would have answered) and `skipped` ones (not part of the layout). A bad member never
    stops the others. An archive whose files inflate past the bulk limit in total is a 413
    and imports nothing. Honours `Idempotency-Key`."""
    database = get_database(request)
    with database.read_session() as session:
        replayed = idempotency.recorded(session)
    if replayed is not None:
        return replayed
    settings = get_settings(request)
    limits = service.Limits(
        member_bytes=settings.max_body_bytes,
        save_bytes=settings.max_bulk_body_bytes,
        summary_tokens=settings.memory_summary_max_tokens,
    )
    # Parsing, redaction and compression of every member first, without the database; then
    # the writes alone, in batches that other writers interleave with.
    steps = service.prepare_import(raw, limits)
    return service.write_import(
        database,
        principal.tenant,
        project,
        steps,
        lambda session, report: idempotency.record_in(
            session, FastJSONResponse(report.model_dump(mode="json"))
        ),
    )
