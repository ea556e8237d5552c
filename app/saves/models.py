from datetime import datetime

from sqlalchemy import BigInteger, Column, ForeignKey, Index, LargeBinary
from sqlmodel import Field, SQLModel

from app.core.db import BigIntPK, SearchableText, UTCDateTime, utcnow
from app.projects.models import project_id_column


class Save(SQLModel, table=True):
    """One MDAN-AUTO context save: its exact file bytes and the fields lists query."""

    __tablename__ = "saves"
    __table_args__ = (
        # A save's id in the API is its number within its project: the primary key is one
        # sequence across tenants, and would tell a tenant how much everyone else stores.
        Index("ix_saves_project_number", "project_id", "number", unique=True),
        Index("ix_saves_project_timestamp", "project_id", "timestamp", "number"),
        Index("ix_saves_project_current_phase", "project_id", "current_phase"),
        Index("ix_saves_project_token_percentage", "project_id", "token_percentage"),
        Index("ix_saves_project_name", "project_id", "project_name"),
        # An archive import looks a file up by its name (push twice adds nothing).
        Index("ix_saves_project_filename", "project_id", "filename"),
    )

    id: int | None = Field(default=None, primary_key=True, sa_type=BigIntPK)
    project_id: int = Field(sa_column=project_id_column())
    # 1, 2, 3... within the project, never reused (the project counts them: last_save_number).
    number: int = Field(sa_type=BigInteger)
    timestamp: datetime = Field(sa_type=UTCDateTime)
    filename: str = Field(max_length=64)
    project_name: str = Field(sa_type=SearchableText)
    current_phase: str = Field(sa_type=SearchableText)
    all_phases_complete: bool
    # The file's numbers, or NULL where the column cannot hold the file's value exactly
    # (NaN, an infinity, an integer past 64 bits or past a double's precision).
    token_total: float | None = None
    token_limit: float | None = None
    token_percentage: float | None = None
    save_count: int | None = Field(default=None, sa_type=BigInteger)
    resume_count: int | None = Field(default=None, sa_type=BigInteger)
    # The file exactly as exported; gzip-compressed when the file is over 1 MB.
    content: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    content_gzipped: bool
    size_bytes: int = Field(sa_type=BigInteger)
    etag: str = Field(max_length=40)
    stored_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class SavePhaseStatus(SQLModel, table=True):
    """``phases.status`` as rows, so that saves can be found by a phase's status."""

    __tablename__ = "save_phase_statuses"
    __table_args__ = (Index("ix_save_phase_statuses_phase_status", "phase", "status"),)

    save_id: int = Field(
        sa_column=Column(
            ForeignKey("saves.id", ondelete="CASCADE"), primary_key=True, nullable=False
        )
    )
    phase: str = Field(primary_key=True, sa_type=SearchableText)
    status: str
