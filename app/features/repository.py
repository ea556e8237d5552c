from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import delete
from sqlmodel import Session, col, select

from app.core.pagination import SortKey, paginate
from app.features.models import FeatureContext, FeatureWorkflow, Handover

CONTEXTS_NEWEST_FIRST = [SortKey(FeatureContext.created_at), SortKey(FeatureContext.id)]
HANDOVERS_NEWEST_FIRST = [SortKey(Handover.timestamp), SortKey(Handover.id)]


class FeatureRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(
        self, project_id: int, feature_id: str, *, for_update: bool = False
    ) -> FeatureContext | None:
        statement = select(FeatureContext).where(
            FeatureContext.project_id == project_id, FeatureContext.feature_id == feature_id
        )
        if for_update:
            statement = statement.with_for_update()
        return self.session.exec(statement).first()

    def save(self, context: FeatureContext) -> FeatureContext:
        self.session.add(context)
        self.session.flush()
        return context

    def delete(self, context: FeatureContext) -> None:
        # Its handover rows go with it (ON DELETE CASCADE).
        self.session.delete(context)
        self.session.flush()

    def page(
        self,
        project_id: int,
        *,
        phase: str | None,
        intervention_required: bool | None,
        cursor: str | None,
        limit: int,
    ) -> tuple[list[FeatureContext], str | None]:
        statement = select(FeatureContext).where(FeatureContext.project_id == project_id)
        if phase is not None:
            statement = statement.where(FeatureContext.current_phase == phase)
        if intervention_required is not None:
            statement = statement.where(
                FeatureContext.intervention_required == intervention_required
            )
        return paginate(self.session, statement, CONTEXTS_NEWEST_FIRST, cursor, limit)


class HandoverRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def add(self, handovers: Iterable[Handover]) -> None:
        self.session.add_all(handovers)
        self.session.flush()

    def delete_for(self, context_id: int) -> None:
        self.session.execute(delete(Handover).where(col(Handover.context_id) == context_id))

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
    ) -> tuple[list[Handover], str | None]:
        statement = select(Handover).where(Handover.project_id == project_id)
        if to_agent is not None:
            statement = statement.where(Handover.to_agent == to_agent)
        if from_agent is not None:
            statement = statement.where(Handover.from_agent == from_agent)
        if feature_id is not None:
            statement = statement.where(Handover.feature_id == feature_id)
        if since is not None:
            statement = statement.where(col(Handover.timestamp) >= since)
        return paginate(self.session, statement, HANDOVERS_NEWEST_FIRST, cursor, limit)


class WorkflowRepository:
    def __init__(self, session: Session) -> None:
        self.session = session

    def get(
        self, project_id: int, feature_id: str, *, for_update: bool = False
    ) -> FeatureWorkflow | None:
        statement = select(FeatureWorkflow).where(
            FeatureWorkflow.project_id == project_id, FeatureWorkflow.feature_id == feature_id
        )
        if for_update:
            statement = statement.with_for_update()
        return self.session.exec(statement).first()

    def save(self, workflow: FeatureWorkflow) -> FeatureWorkflow:
        self.session.add(workflow)
        self.session.flush()
        return workflow

    def delete(self, workflow: FeatureWorkflow) -> None:
        self.session.delete(workflow)
        self.session.flush()

    def delete_for(self, project_id: int, feature_id: str) -> None:
        self.session.execute(
            delete(FeatureWorkflow).where(
                col(FeatureWorkflow.project_id) == project_id,
                col(FeatureWorkflow.feature_id) == feature_id,
            )
        )
