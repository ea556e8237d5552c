import functools

from fastapi import Request, Response
from sqlmodel import Session

from app.archive import service
from app.archive.schemas import ArchiveMember, ArchiveReport
from app.core.body import BulkBodyRoute, DecodedRequest, raw_body
from app.core.deps import Reader, ReadSession, Writer, get_database, get_settings
from app.core.identifiers import ProjectName
from app.core.json import FastJSONResponse
from app.core.limits import BULK_IMPORTS_ALL_RUNNING, EXPORTS_ALL_RUNNING
from app.core.pagination import Cursor, Limit
from app.core.redaction import answer_without_secrets
from app.core.responses import ResponsesDoc, SpooledResponse, in_export_turn, open_spool
from app.core.routing import GatedRouter
from app.core.schemas import Page
from app.core.security import Principal
from app.formats.archive import MEDIA_TYPE
from app.formats.gzip import is_gzip
from app.idempotency.service import Idempotency, IdempotencyDep
from app.storage.route import in_bulk_import_turn

# Archives carry whole projects: their import takes the bulk body limit.
router = GatedRouter(prefix="/v1/projects/{project}", tags=["archive"], route_class=BulkBodyRoute)


ARCHIVE_FILE: ResponsesDoc = {
    200: {
        "description": "The project's files as a .tar.gz, laid out as the tools lay them out.",
        "content": {MEDIA_TYPE: {"schema": {"type": "string", "format": "binary"}}},
    },
    429: EXPORTS_ALL_RUNNING,
}


@router.get("/archive", response_class=SpooledResponse, status_code=200, responses=ARCHIVE_FILE)
async def export_archive(
    project: ProjectName, request: Request, principal: Reader, session: ReadSession
) -> Response:
    """Every file of the project as a `.tar.gz` in the tools' on-disk layout; each member is
    byte for byte what its own export route answers, all read from one snapshot. A tenant,
    and the server, run a bounded number of exports at once: beyond them a request waits for
    a turn, then gets a 429 with `Retry-After`."""
    settings = get_settings(request)

    def build() -> Response:
        spool = open_spool(settings.archive_spool_memory_bytes)
        try:
            # With the session's connection, given back when this route returns (the session
            # ends before the response starts), before the client reads.
            service.write_archive(session, principal.tenant, project, settings.gzip_level, spool)
        except BaseException:
            spool.close()
            raise
        return SpooledResponse(
            spool,
            media_type=MEDIA_TYPE,
            headers={"Content-Disposition": f'attachment; filename="{project}.tar.gz"'},
        )

    return await in_export_turn(request, principal.tenant, build)


@router.get("/archive/members", response_model=Page[ArchiveMember])
def list_archive_members(
    project: ProjectName,
    session: ReadSession,
    principal: Reader,
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Page[ArchiveMember]:
    """The paths of the files the archive export would hold, in path order, without building
    it: no contents are read, and no export turn is taken."""
    members, next_cursor = service.list_members(session, principal.tenant, project, cursor, limit)
    return Page(items=members, next_cursor=next_cursor)


@router.post(
    "/archive",
    response_model=ArchiveReport,
    responses={429: BULK_IMPORTS_ALL_RUNNING},
    openapi_extra=raw_body(MEDIA_TYPE, "application/x-tar+gzip"),
)
async def import_archive(
    project: ProjectName,
    request: DecodedRequest,
    principal: Writer,
    idempotency: IdempotencyDep,
) -> Response:
    """Import a `.tar.gz` in the layout the export writes. Each file goes through its own
    import route's rules, in a savepoint of its own: the report lists what was `imported`
    (with that route's answer), `warnings`, `refused` members (with the problem their route
    would have answered) and `skipped` ones (not part of the layout). A bad member never
    stops the others. An archive whose files inflate past the bulk limit in total is a 413
    and imports nothing. Honours `Idempotency-Key`. A tenant, and the server, run a bounded
    number of imports under the bulk limit at once (saves' too): beyond them a request waits
    for a turn, then gets a 429 with `Retry-After`."""
    work = functools.partial(_import, project, request, principal, idempotency)
    return await in_bulk_import_turn(request, principal.tenant, idempotency, work)


def _import(
    project: str, request: DecodedRequest, principal: Principal, idempotency: Idempotency | None
) -> Response:
    raw = request.received
    database = get_database(request)
    settings = get_settings(request)
    limits = service.Limits(
        member_bytes=settings.max_body_bytes,
        save_bytes=settings.max_bulk_body_bytes,
        summary_tokens=settings.memory_summary_max_tokens,
    )
    tar = request.inflate(raw) if is_gzip(raw) else raw
    # Parsing, redaction and compression of every member first, without the database; then
    # the writes alone, in batches that other writers interleave with.
    steps = service.prepare_import(tar, limits, request.held)
    return service.write_import(
        database,
        principal.tenant,
        project,
        steps,
        lambda session, report: _answer(session, report, idempotency),
    )


def _answer(session: Session, report: ArchiveReport, idempotency: Idempotency | None) -> Response:
    """The import's report, remembered under its Idempotency-Key with the last writes. It
    names members by their paths, which the client chose: redacted either way."""
    response = FastJSONResponse(report.model_dump(mode="json"))
    if idempotency is None:
        return answer_without_secrets(response)
    return idempotency.record_in(session, response)
