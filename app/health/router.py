from fastapi import APIRouter, Request, Response
from pydantic import BaseModel
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from app.core.deps import get_database
from app.core.errors import ServiceUnavailable

router = APIRouter(tags=["operations"])


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    status: str
    database: str
    migration: str


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
        with database.reader.connect() as connection:
            current = connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except SQLAlchemyError as exc:
        raise ServiceUnavailable("The database is unreachable or not migrated.", 5) from exc
    if current != head:
        raise ServiceUnavailable(
            f"The database is at migration {current!r}; this release needs {head!r}.", 5
        )
    return Readiness(status="ok", database=database.reader.dialect.name, migration=head)


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
def metrics(request: Request) -> Response:
    """Prometheus metrics in the text exposition format."""
    content, media_type = request.app.state.metrics.exposition()
    return Response(content=content, media_type=media_type)
