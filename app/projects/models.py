from datetime import datetime

from sqlalchemy import Column, ForeignKey, UniqueConstraint
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


def project_id_column() -> Column:  # type: ignore[type-arg]
    """The column by which a resource belongs to a project, and is deleted with it."""
    return Column(ForeignKey("projects.id", ondelete="CASCADE"), nullable=False)
