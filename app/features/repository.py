from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, func
from sqlmodel import col, select

from app.core.db import DriverStatement, insert_bound, table_of
from app.core.pagination import ByteBound, SortKey, paginate
from app.features.models import FeatureContext, FeatureWorkflow, Handover
from app.projects.repository import in_their_project
from app.storage.repository import ProjectScopedRepository, unread_columns

# A list of features answers their summaries: it reads no context.
SUMMARY_ONLY = unread_columns(col(FeatureContext.content))

CONTEXTS_NEWEST_FIRST = [SortKey(FeatureContext.created_at), SortKey(FeatureContext.id)]
HANDOVERS_NEWEST_FIRST = [SortKey(Handover.timestamp), SortKey(Handover.id)]
# What a listed handover costs: its note, which the answer holds.
NOTE_BYTES = func.length(col(Handover.note))

# A handover's append is a hot path: its statements are built once, their values bound per
# call, on the table (no ORM unit of work, nor ORM bulk insert).
HANDOVERS = table_of(Handover)
# Every column but the row's id.
INSERT_HANDOVERS = DriverStatement(
    insert_bound(HANDOVERS, (column.name for column in HANDOVERS.columns if column.name != "id"))
)
OF_CONTEXT = HANDOVERS.c.context_id == bindparam("context_id")
NOTES = select(HANDOVERS.c.note).where(OF_CONTEXT).order_by(HANDOVERS.c.position)


class FeatureRepository(ProjectScopedRepository[FeatureContext]):
    """Features, by their contexts: one row a feature, by its name. Its handover rows hang
    from it (ON DELETE CASCADE); a feature's delete hides it (``Write.hide``), and the deleter
    deletes them a batch at a time before it."""

    model = FeatureContext
    key = ("feature_id",)
    # The context's head; ``size_bytes`` the whole file's, its notes included.
    documents = {"content": col(FeatureContext.size_bytes)}
    # Where a note appended to the context goes: one past its last (a read of the index).
    read_along = (
        select(func.coalesce(func.max(HANDOVERS.c.position) + 1, 0))
        .where(HANDOVERS.c.context_id == table_of(FeatureContext).c.id)
        .scalar_subquery()
    )

    def page(
        self,
        project_id: int,
        *,
        phase: str | None,
        intervention_required: bool | None,
        cursor: str | None,
        limit: int,
    ) -> tuple[list[FeatureContext], str | None]:
        statement = (
            select(FeatureContext)
            .where(FeatureContext.project_id == project_id)
            .options(*SUMMARY_ONLY)
        )
        if phase is not None:
            statement = statement.where(FeatureContext.current_phase == phase)
        if intervention_required is not None:
            statement = statement.where(
                FeatureContext.intervention_required == intervention_required
            )
        return paginate(
            self.session, statement, CONTEXTS_NEWEST_FIRST, cursor, limit, scope=(project_id,)
        )


class HandoverRepository(ProjectScopedRepository[Handover]):
    """``handover_notes.history`` of every context, a row a note, by its context and place."""

    model = Handover
    key = ("context_id", "position")

    def insert(self, handovers: list[dict[str, Any]]) -> None:
        """New notes, by their columns' values: a Core INSERT, no unit of work."""
        INSERT_HANDOVERS.run_many(self.connection(), handovers)

    def delete_for(self, context_id: int) -> None:
        self.session.execute(delete(Handover).where(col(Handover.context_id) == context_id))

    def notes(self, context_id: int) -> list[bytes]:
        """The context's notes, in order: the members of its ``handover_notes.history``."""
        return list(self.session.execute(NOTES, {"context_id": context_id}).scalars())

    def page(
        self,
        project_id: int,
        *,
        to_agent: str | None,
        from_agent: str | None,
        feature_id: str | None,
        since: datetime | None,
        cursor: str | None,
        limit: int,
        most_bytes: int,
    ) -> tuple[list[Handover], str | None]:
        """A page of notes that hold at most ``most_bytes`` together (``ByteBound``)."""
        # Not a hidden feature's (its delete's write moved its context out of the project).
        statement = select(Handover).where(
            Handover.project_id == project_id, *in_their_project(HANDOVERS)
        )
        if to_agent is not None:
            statement = statement.where(Handover.to_agent == to_agent)
        if from_agent is not None:
            statement = statement.where(Handover.from_agent == from_agent)
        if feature_id is not None:
            statement = statement.where(Handover.feature_id == feature_id)
        if since is not None:
            statement = statement.where(col(Handover.timestamp) >= since)
        return paginate(
            self.session,
            statement,
            HANDOVERS_NEWEST_FIRST,
            cursor,
            limit,
            scope=(project_id,),
            bound=ByteBound(NOTE_BYTES, most_bytes),
        )


class WorkflowRepository(ProjectScopedRepository[FeatureWorkflow]):
    """Features' ``workflow.json``, by the feature's name."""

    model = FeatureWorkflow
    key = ("feature_id",)
    documents = {"content": col(FeatureWorkflow.size_bytes)}

    def delete_for(self, project_id: int, feature_id: str) -> None:
        self.session.execute(
            delete(FeatureWorkflow).where(
                col(FeatureWorkflow.project_id) == project_id,
                col(FeatureWorkflow.feature_id) == feature_id,
            )
        )
