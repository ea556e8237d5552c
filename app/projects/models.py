from datetime import datetime

from sqlalchemy import BigInteger, Column, ForeignKey, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.core.db import BigIntPK, UTCDateTime, utcnow


class Project(SQLModel, table=True):
    """A tenant's namespace. Every stored resource belongs to one and is deleted with it."""

    __tablename__ = "projects"
    __table_args__ = (UniqueConstraint("tenant", "name"),)

    id: int | None = Field(default=None, primary_key=True, sa_type=BigIntPK)
    tenant: str = Field(max_length=128)
    name: str = Field(max_length=128)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    last_write_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    # The number the project's newest save took: it only grows, so that a deleted save's
    # number is never given to another (a client holding it gets a 404, not another save).
    # Left to the column's default: the upsert that creates a project names only its key.
    last_save_number: int = Field(sa_column=Column(BigInteger, server_default="0", nullable=False))


def project_id_column() -> "Column[int]":
    """The column by which a resource belongs to a project, and is deleted with it."""
    return Column(ForeignKey("projects.id", ondelete="CASCADE"), nullable=False)
