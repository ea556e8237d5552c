from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import BindParameter, Insert, bindparam, func, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, col, select

from app.core.db import DriverStatement, table_of
from app.core.pagination import SortKey, paginate
from app.projects.models import Project
from app.projects.resources import PROJECT_RESOURCES

PROJECT_ORDER = [SortKey(Project.created_at), SortKey(Project.id)]


def _touch_statement(dialect: type[sqlite.Insert] | type[postgresql.Insert]) -> Insert:
    now: BindParameter[datetime] = bindparam("now")
    table = table_of(Project)
    return (
        dialect(table)
        .values(
            tenant=bindparam("tenant"), name=bindparam("name"), created_at=now, last_write_at=now
        )
        .on_conflict_do_update(index_elements=["tenant", "name"], set_={"last_write_at": now})
        .returning(table.c.id)
    )


# Every write runs this upsert first. Built once, with its values as parameters (building it
# per request, with the values inline, cost more than running it), on the table rather than
# the ORM class and run on the session's connection: the ORM's bulk-insert path around a
# single row cost as much again.
TOUCH = {
    "sqlite": DriverStatement(_touch_statement(sqlite.Insert)),
    "postgresql": DriverStatement(_touch_statement(postgresql.Insert)),
}


class ProjectRepository:
    """Every query is scoped by tenant here, so no caller can forget to."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def get(self, tenant: str, name: str, *, for_update: bool = False) -> Project | None:
        statement = select(Project).where(Project.tenant == tenant, Project.name == name)
        if for_update:
            statement = statement.with_for_update()
        return self.session.exec(statement).first()

    def touch(self, tenant: str, name: str, now: datetime) -> int:
        """Create the project if it is new and record a write; returns its id. One statement,
        so that two first writes racing each other both succeed."""
        connection = self.session.connection()
        statement = TOUCH[connection.dialect.name]
        parameters = {"tenant": tenant, "name": name, "now": now}
        (project_id,) = statement.rows(connection, parameters)[0]
        return int(project_id)

    def next_save_number(self, project_id: int) -> int:
        """Counts a new save in the project and returns its number. One statement that reads
        and writes the counter under the row's lock: two imports never take the same number."""
        statement = (
            update(Project)
            .where(col(Project.id) == project_id)
            .values(last_save_number=col(Project.last_save_number) + 1)
            .returning(col(Project.last_save_number))
        )
        number: int = self.session.execute(statement).scalar_one()
        return number

    def page(self, tenant: str, cursor: str | None, limit: int) -> tuple[list[Project], str | None]:
        statement = select(Project).where(Project.tenant == tenant)
        return paginate(self.session, statement, PROJECT_ORDER, cursor, limit)

    def counts(self, project_ids: Sequence[int]) -> dict[int, dict[str, int]]:
        """Per project, how many of each resource it holds."""
        counts: dict[int, dict[str, int]] = {
            project_id: dict.fromkeys(PROJECT_RESOURCES, 0) for project_id in project_ids
        }
        if not project_ids:
            return counts
        for resource, model in PROJECT_RESOURCES.items():
            # Every model in PROJECT_RESOURCES has project_id; the mapping is typed as SQLModel's.
            project_column = col(model.project_id)  # type: ignore[attr-defined]
            statement = (
                select(project_column, func.count())
                .where(project_column.in_(project_ids))
                .group_by(project_column)
            )
            for project_id, count in self.session.exec(statement):
                counts[project_id][resource] = count
        return counts

    def delete(self, project: Project) -> None:
        # The resources go with it: every foreign key to projects is ON DELETE CASCADE.
        self.session.delete(project)
        self.session.flush()
