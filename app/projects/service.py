"""Projects spring into being on a first write and go away with everything in them."""

from sqlmodel import Session

from app.core.conditional import Precondition, etag_of
from app.core.errors import NotFound
from app.core.json import dumps
from app.projects.models import Project
from app.projects.repository import ProjectRepository
from app.projects.schemas import ProjectPublic


def project_not_found(name: str) -> NotFound:
    return NotFound(f"No project {name!r}.")


def project_id(session: Session, tenant: str, name: str) -> int:
    """For reads: the project's id, or 404 (also when it belongs to another tenant)."""
    found = ProjectRepository(session).id_of(tenant, name)
    if found is None:
        raise project_not_found(name)
    return found


def _public(project: Project, counts: dict[str, int]) -> ProjectPublic:
    return ProjectPublic(
        name=project.name,
        created_at=project.created_at,
        last_write_at=project.last_write_at,
        counts=counts,
    )


def project_etag(project: ProjectPublic) -> str:
    return etag_of(dumps(project.model_dump(mode="json")))


def _load(
    repository: ProjectRepository, tenant: str, name: str, *, for_update: bool = False
) -> tuple[Project, ProjectPublic]:
    project = repository.get(tenant, name, for_update=for_update)
    if project is None or project.id is None:
        raise project_not_found(name)
    return project, _public(project, repository.counts([project.id])[project.id])


def get_project(session: Session, tenant: str, name: str) -> ProjectPublic:
    return _load(ProjectRepository(session), tenant, name)[1]


def list_projects(
    session: Session, tenant: str, cursor: str | None, limit: int
) -> tuple[list[ProjectPublic], str | None]:
    repository = ProjectRepository(session)
    projects, next_cursor = repository.page(tenant, cursor, limit)
    counts = repository.counts([p.id for p in projects if p.id is not None])
    return [_public(p, counts[p.id]) for p in projects if p.id is not None], next_cursor


def delete_project(session: Session, tenant: str, name: str, precondition: Precondition) -> None:
    """``precondition`` receives the current ETag and raises to stop the delete."""
    repository = ProjectRepository(session)
    project, public = _load(repository, tenant, name, for_update=True)
    precondition(project_etag(public))
    repository.delete(project)
