import hashlib
from datetime import datetime

from sqlalchemy import BigInteger, Column, Index, LargeBinary, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.core.db import BigIntPK, SearchableLongText, UTCDateTime, utcnow
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
    """One line of an agent's raw_traces, episodic, semantic or raw_traces_archive JSONL file,
    in append order."""

    __tablename__ = "agent_memory_items"
    __table_args__ = (
        Index("ix_agent_memory_items_agent_kind", "project_id", "agent", "kind", "id"),
        Index("ix_agent_memory_items_turn", "project_id", "agent", "kind", "turn_key", "id"),
    )

    id: int | None = Field(default=None, primary_key=True, sa_type=BigIntPK)
    project_id: int = Field(sa_column=project_id_column())
    agent: str = Field(max_length=128)
    kind: str = Field(max_length=16)
    # Raw traces only: the tail is chosen by turn. Unbounded and unindexed, since it comes
    # from the document (an index would cap its length). Searchable text (NUL and lone
    # surrogates, which neither database stores, as U+FFFD); turn_key, computed from the
    # exact id, is what tells turns apart.
    turn_id: str | None = Field(default=None, sa_column=Column(SearchableLongText, nullable=True))
    # Raw traces only: turn_id's fixed-width stand-in, which can be indexed (see turn_key()).
    turn_key: str | None = Field(default=None, max_length=64)
    # The line exactly as exported, without its newline.
    line: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


def turn_key(turn_id: str) -> str:
    """A turn's key: the SHA-256 of its id's UTF-8, in hex. Lone surrogates (valid in JSON)
    are encoded as they stand ("surrogatepass"); migration 0008 computes the same for the ids
    stored before it, which could hold none."""
    return hashlib.sha256(turn_id.encode("utf-8", "surrogatepass")).hexdigest()


class AgentMemoryTurn(SQLModel, table=True):
    """A turn of an agent's raw traces, registered by its first trace when that is appended,
    so that restore finds the last turns by first appearance without reading every trace."""

    __tablename__ = "agent_memory_turns"
    __table_args__ = (
        UniqueConstraint("project_id", "agent", "turn_key"),
        Index("ix_agent_memory_turns_first_item", "project_id", "agent", "first_item_id"),
    )

    id: int | None = Field(default=None, primary_key=True, sa_type=BigIntPK)
    project_id: int = Field(sa_column=project_id_column())
    agent: str = Field(max_length=128)
    turn_key: str = Field(max_length=64)
    # Not a foreign key: traces go only with their project, which takes this row too, and a
    # key PostgreSQL checks on delete would need an index of its own.
    first_item_id: int = Field(sa_type=BigInteger)
