from datetime import datetime

from sqlalchemy import Column, Index, LargeBinary, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.core.db import BigIntPK, UTCDateTime, utcnow
from app.projects.models import project_id_column


class AgentSnapshot(SQLModel, table=True):
    """An agent's working context snapshot cache: the file's exact bytes."""

    __tablename__ = "agent_snapshots"
    __table_args__ = (UniqueConstraint("project_id", "agent"),)

    id: int | None = Field(default=None, primary_key=True, sa_type=BigIntPK)
    project_id: int = Field(sa_column=project_id_column())
    agent: str = Field(max_length=128)
    content: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    etag: str = Field(max_length=40)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class AgentMemoryItem(SQLModel, table=True):
    """One line of an agent's raw_traces, episodic or semantic JSONL file, in append order."""

    __tablename__ = "agent_memory_items"
    __table_args__ = (
        Index("ix_agent_memory_items_agent_kind", "project_id", "agent", "kind", "id"),
    )

    id: int | None = Field(default=None, primary_key=True, sa_type=BigIntPK)
    project_id: int = Field(sa_column=project_id_column())
    agent: str = Field(max_length=128)
    kind: str = Field(max_length=16)
    # Raw traces only: the tail is chosen by turn. Unbounded and unindexed, since it comes
    # from the document (an index would cap its length).
    turn_id: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # The line exactly as exported, without its newline.
    line: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
