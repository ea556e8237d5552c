from fastapi import Request, Response

from app.core.body import ContextStoreRoute
from app.core.conditional import if_match_given, not_modified
from app.core.deps import Reader, ReadSession, Writer, get_database
from app.core.identifiers import ProjectName
from app.core.pagination import Cursor, Limit
from app.core.routing import GatedRouter
from app.core.schemas import Page
from app.projects import service
from app.projects.schemas import ProjectPublic

router = GatedRouter(prefix="/v1/projects", tags=["projects"], route_class=ContextStoreRoute)


@router.get("", response_model=Page[ProjectPublic])
def list_projects(
    session: ReadSession, principal: Reader, cursor: Cursor = None, limit: Limit = 50
) -> Page[ProjectPublic]:
    """The caller's projects, newest first, with how many of each resource they hold."""
    items, next_cursor = service.list_projects(session, principal.tenant, cursor, limit)
    return Page(items=items, next_cursor=next_cursor)


@router.get(
    "/{project}", response_model=ProjectPublic, responses={304: {"description": "Unchanged"}}
)
def get_project(
    project: ProjectName,
    request: Request,
    response: Response,
    session: ReadSession,
    principal: Reader,
) -> ProjectPublic | Response:
    """One project. A project exists from its first write on."""
    found = service.get_project(session, principal.tenant, project)
    etag = service.project_etag(found)
    if (unchanged := not_modified(request, etag)) is not None:
        return unchanged
    response.headers["ETag"] = etag
    return found


@router.delete("/{project}", status_code=204, response_class=Response)
async def delete_project(project: ProjectName, request: Request, principal: Writer) -> Response:
    """Delete the project and everything stored in it. Honours If-Match. The answer comes once
    the project is gone: reads and lists no longer find it, a second delete is a 404, and a
    write to its name makes a new, empty project. Its contents are deleted after the answer,
    in batches, other writes running between them."""
    # Not a write to the project's contents (app/storage): it locks the project as it finds
    # it, never creates it, and runs its write in the write turns itself.
    deleter: service.ProjectDeleter = request.app.state.project_deleter
    await service.delete_project(
        get_database(request), deleter, principal.tenant, project, if_match_given(request)
    )
    return Response(status_code=204)
