from datetime import datetime

from sqlalchemy import BigInteger, Column, ForeignKey, Index, LargeBinary, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.core.db import BigIntPK, SearchableText, UTCDateTime, utcnow
from app.projects.models import project_id_column


class FeatureContext(SQLModel, table=True):
    """One feature's ``context.json``, kept as its parts (``app/core/documents.py``
    ``PartedDocument``): its head, and its handover notes in their rows (``Handover.note``),
    so that an append writes one note; and the fields lists query."""

    __tablename__ = "feature_contexts"
    __table_args__ = (
        UniqueConstraint("project_id", "feature_id"),
        Index("ix_feature_contexts_project_created", "project_id", "created_at", "id"),
        Index("ix_feature_contexts_project_phase", "project_id", "current_phase"),
        Index("ix_feature_contexts_project_intervention", "project_id", "intervention_required"),
    )

    id: int | None = Field(default=None, primary_key=True, sa_type=BigIntPK)
    project_id: int = Field(sa_column=project_id_column())
    feature_id: str = Field(max_length=128)
    # From the document, as lists find them: any length of text, kept to what an index holds.
    current_phase: str | None = Field(default=None, sa_column=Column(SearchableText, nullable=True))
    intervention_required: bool = False
    blocked_task: str | None = Field(default=None, sa_column=Column(SearchableText, nullable=True))
    # The head: the file with handover_notes.history empty, its "[" at parts_at. None: the
    # whole file (one without that array, or stored before migration 0013 and not changed
    # since).
    content: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    parts_at: int | None = Field(default=None, sa_type=BigInteger)
    # The whole file's.
    size_bytes: int = Field(sa_type=BigInteger)
    etag: str = Field(max_length=40)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class Handover(SQLModel, table=True):
    """``handover_notes.history`` as rows, so handovers are found without reading contexts."""

    __tablename__ = "feature_handovers"
    __table_args__ = (
        Index("ix_feature_handovers_project_timestamp", "project_id", "timestamp", "id"),
        Index("ix_feature_handovers_project_to", "project_id", "to_agent", "timestamp", "id"),
        Index("ix_feature_handovers_project_from", "project_id", "from_agent", "timestamp", "id"),
        Index(
            "ix_feature_handovers_project_feature", "project_id", "feature_id", "timestamp", "id"
        ),
        # One note a place (migration 0015).
        Index("ix_feature_handovers_context", "context_id", "position", unique=True),
    )

    id: int | None = Field(default=None, primary_key=True, sa_type=BigIntPK)
    project_id: int = Field(sa_column=project_id_column())
    context_id: int = Field(
        sa_column=Column(ForeignKey("feature_contexts.id", ondelete="CASCADE"), nullable=False)
    )
    feature_id: str = Field(max_length=128)
    # Its index in ``handover_notes.history``.
    position: int = Field(sa_type=BigInteger)
    timestamp: datetime = Field(sa_type=UTCDateTime)
    from_agent: str = Field(max_length=256)
    to_agent: str = Field(max_length=256)
    # The note itself, so that a listing never parses a context: as it stands in the file
    # (``feature_context.note_part``), the member ``parts.join`` puts back; compact JSON in the
    # rows of a context stored before migration 0013 and not changed since.
    note: bytes = Field(sa_column=Column(LargeBinary, nullable=False))


class FeatureWorkflow(SQLModel, table=True):
    """One feature's ``workflow.json`` (the orchestrator's task graph), its exact bytes.

    Keyed by the feature's name like its context, but not tied to a context row: the
    orchestrator reads ``workflow.json`` first and creates ``context.json`` itself."""

    __tablename__ = "feature_workflows"
    __table_args__ = (UniqueConstraint("project_id", "feature_id"),)

    id: int | None = Field(default=None, primary_key=True, sa_type=BigIntPK)
    project_id: int = Field(sa_column=project_id_column())
    feature_id: str = Field(max_length=128)
    content: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    size_bytes: int = Field(sa_type=BigInteger)
    etag: str = Field(max_length=40)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
