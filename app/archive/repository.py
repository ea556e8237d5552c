"""What a project holds, as keys and times only: the archive's table of contents.

The documents themselves are read one at a time through each domain's own service, so
this never loads a document's bytes.
"""

from datetime import datetime

from sqlalchemy import func
from sqlmodel import Session, col, select

from app.agents.models import AgentMemoryItem, AgentSnapshot
from app.features.models import FeatureContext, FeatureWorkflow
from app.memory.models import MemoryFileStyle, MemoryItem, MemorySummary
from app.runs.models import RunState
from app.saves.models import Save


class ArchiveRepository:
    def __init__(self, session: Session, project_id: int) -> None:
        self.session = session
        self.project_id = project_id

    def saves(self) -> list[tuple[int, str, bool, datetime]]:
        """(number, filename, gzipped, stored_at), oldest ``timestamp`` first."""
        statement = (
            select(Save.number, Save.filename, Save.content_gzipped, Save.stored_at)
            .where(Save.project_id == self.project_id)
            .order_by(col(Save.timestamp), col(Save.number))
        )
        return list(self.session.exec(statement))

    def snapshots(self) -> list[tuple[str, datetime]]:
        statement = (
            select(AgentSnapshot.agent, AgentSnapshot.updated_at)
            .where(AgentSnapshot.project_id == self.project_id)
            .order_by(col(AgentSnapshot.agent))
        )
        return list(self.session.exec(statement))

    def agent_memory_files(self) -> list[tuple[str, str, datetime]]:
        """(agent, kind, time of the last append) of every memory file that has items."""
        statement = (
            select(
                AgentMemoryItem.agent, AgentMemoryItem.kind, func.max(AgentMemoryItem.created_at)
            )
            .where(AgentMemoryItem.project_id == self.project_id)
            .group_by(col(AgentMemoryItem.agent), col(AgentMemoryItem.kind))
            .order_by(col(AgentMemoryItem.agent), col(AgentMemoryItem.kind))
        )
        return list(self.session.exec(statement))

    def runs(self) -> list[tuple[str, bool, datetime]]:
        """(run, has a backup, updated_at)."""
        statement = (
            select(RunState.run, col(RunState.backup).is_not(None), RunState.updated_at)
            .where(RunState.project_id == self.project_id)
            .order_by(col(RunState.run))
        )
        return list(self.session.exec(statement))

    def features(self) -> list[tuple[str, datetime]]:
        statement = (
            select(FeatureContext.feature_id, FeatureContext.updated_at)
            .where(FeatureContext.project_id == self.project_id)
            .order_by(col(FeatureContext.feature_id))
        )
        return list(self.session.exec(statement))

    def workflows(self) -> list[tuple[str, datetime]]:
        statement = (
            select(FeatureWorkflow.feature_id, FeatureWorkflow.updated_at)
            .where(FeatureWorkflow.project_id == self.project_id)
            .order_by(col(FeatureWorkflow.feature_id))
        )
        return list(self.session.exec(statement))

    def summary_time(self) -> datetime | None:
        statement = select(MemorySummary.updated_at).where(
            MemorySummary.project_id == self.project_id
        )
        return self.session.exec(statement).first()

    def memory_file_kinds(self) -> dict[str, datetime | None]:
        """The list files that exist (written once, so a style is recorded, or holding items),
        with the time of their newest item not archived."""
        styled = select(MemoryFileStyle.kind).where(MemoryFileStyle.project_id == self.project_id)
        newest = (
            select(MemoryItem.kind, func.max(MemoryItem.updated_at))
            .where(MemoryItem.project_id == self.project_id, col(MemoryItem.archived_at).is_(None))
            .group_by(col(MemoryItem.kind))
        )
        kinds: dict[str, datetime | None] = dict.fromkeys(self.session.exec(styled))
        kinds.update({kind: at for kind, at in self.session.exec(newest)})
        return kinds
