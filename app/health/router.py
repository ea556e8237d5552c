from fastapi import Request, Response
from sqlalchemy.exc import SQLAlchemyError

from app.core.deps import get_database
from app.core.errors import DatabaseNotMigrated, ServiceUnavailable
from app.core.migrations import current_revision, not_migrated_reason
from app.core.routing import GatedRouter
from app.health.schemas import Health, Readiness

router = GatedRouter(tags=["operations"])


@router.get("/healthz", response_model=Health)
def healthz() -> Health:
    """The process is up. Touches nothing else."""
    return Health(status="ok")


@router.get("/readyz", response_model=Readiness, responses={503: {"description": "Not ready"}})
def readyz(request: Request) -> Readiness:
    """The database is reachable and migrated to this release's head; 503 otherwise."""
    head: str = request.app.state.migration_head
    database = get_database(request)
    try:
        current = current_revision(database.reader)
    except SQLAlchemyError as exc:
        raise ServiceUnavailable("The database is unreachable.", 5) from exc
    reason = not_migrated_reason(current, head)
    if reason is not None:
        raise DatabaseNotMigrated(reason)
    return Readiness(status="ok", database=database.reader.dialect.name, migration=head)


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
def metrics(request: Request) -> Response:
    """Prometheus metrics in the text exposition format."""
    content, media_type = request.app.state.metrics.exposition()
    return Response(content=content, media_type=media_type)
