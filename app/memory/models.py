from datetime import datetime

from sqlalchemy import BigInteger, Column, Index, LargeBinary, UniqueConstraint, text
from sqlmodel import Field, SQLModel

from app.core.db import BigIntPK, SearchableLongText, UTCDateTime, utcnow
from app.projects.models import project_id_column


class MemorySummary(SQLModel, table=True):
    """A project's ``running-summary.json``: its exact bytes and what the service reads of it."""

    __tablename__ = "memory_summaries"
    __table_args__ = (UniqueConstraint("project_id"),)

    id: int | None = Field(default=None, primary_key=True, sa_type=BigIntPK)
    project_id: int = Field(sa_column=project_id_column())
    # The file as exported in ``style`` (camel or snake), the style it was written in.
    content: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    style: str = Field(max_length=8)
    # The service's own count of ``content`` (the document's tokenCount is the writer's).
    content_tokens: int = Field(sa_type=BigInteger)
    total_features_completed: int | None = Field(default=None, sa_type=BigInteger)
    etag: str = Field(max_length=40)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class MemoryFileStyle(SQLModel, table=True):
    """The key style a list file was last written in, so that it is exported the same way."""

    __tablename__ = "memory_file_styles"
    __table_args__ = (UniqueConstraint("project_id", "kind"),)

    id: int | None = Field(default=None, primary_key=True, sa_type=BigIntPK)
    project_id: int = Field(sa_column=project_id_column())
    kind: str = Field(max_length=16)
    style: str = Field(max_length=8)


class MemoryItem(SQLModel, table=True):
    """One decision, failure or constraint: its JSON object and the columns queries use.

    Full-text search runs on ``search_text``: through the FTS5 table ``memory_items_fts`` on
    SQLite and a GIN expression index on ``memory_search_lexemes(project_id, search_text)``
    (each word under its project) on PostgreSQL, both created by the migrations (they are not
    expressible in the models on both databases), both keyed by project (0018).
    """

    __tablename__ = "memory_items"
    __table_args__ = (
        UniqueConstraint("project_id", "kind", "item_id"),
        Index("ix_memory_items_project_kind_timestamp", "project_id", "kind", "timestamp", "id"),
        # A feature's newest first, read from the index's end (the pack's own failures).
        Index(
            "ix_memory_items_project_kind_feature_timestamp",
            "project_id",
            "kind",
            "feature_id",
            "timestamp",
            "id",
        ),
        Index("ix_memory_items_project_kind_category", "project_id", "kind", "category"),
        Index("ix_memory_items_project_kind_severity", "project_id", "kind", "severity"),
        Index("ix_memory_items_project_kind_position", "project_id", "kind", "position"),
        # Partial: the numbered ids alone, and no choice for any other query's planner.
        Index(
            "ix_memory_items_project_kind_number",
            "project_id",
            "kind",
            "id_number",
            sqlite_where=text("id_number IS NOT NULL"),
            postgresql_where=text("id_number IS NOT NULL"),
        ),
    )

    id: int | None = Field(default=None, primary_key=True, sa_type=BigIntPK)
    project_id: int = Field(sa_column=project_id_column())
    kind: str = Field(max_length=16)
    # The document's own "id" (dec-001); validated to at most 256 characters.
    item_id: str
    # The number in an id of the writer's own form (dec-007: 7), so that the next one is found
    # by the index, not by reading every id; None for any other id. Capped at ID_NUMBER_CAP:
    # a larger number is read from the ids at the cap (``app/memory/service.py`` ``_next_id``).
    id_number: int | None = Field(default=None, sa_type=BigInteger)
    # Where the item stands in its file.
    position: int = Field(sa_type=BigInteger)
    feature_id: str | None = None
    # A decision's category or a constraint's type.
    category: str | None = None
    severity: str | None = None
    # Epoch milliseconds: timestamp (decisions, failures) or addedAt (constraints).
    timestamp: int = Field(sa_type=BigInteger)
    expires_at: int | None = Field(default=None, sa_type=BigInteger)
    resolved: bool = False
    # totalFeaturesCompleted when the item arrived: maintenance archives by features since.
    features_mark: int = Field(sa_type=BigInteger)
    archived_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    search_text: str = Field(sa_column=Column(SearchableLongText, nullable=False))
    # The item's JSON object, compact, keys as written.
    content: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    etag: str = Field(max_length=40)
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
