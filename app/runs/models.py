import hashlib
from datetime import datetime

from sqlalchemy import BigInteger, Column, ForeignKey, Index, LargeBinary, UniqueConstraint
from sqlmodel import Field, SQLModel

from app.core.db import BigIntPK, SearchableText, UTCDateTime, utcnow
from app.projects.models import project_id_column


class RunState(SQLModel, table=True):
    """One atari run's ``.atari/state.json``: its exact bytes, its backup, the listed fields."""

    __tablename__ = "run_states"
    __table_args__ = (
        UniqueConstraint("project_id", "run"),
        Index("ix_run_states_project_updated", "project_id", "updated_at", "id"),
    )

    id: int | None = Field(default=None, primary_key=True, sa_type=BigIntPK)
    project_id: int = Field(sa_column=project_id_column())
    run: str = Field(max_length=128)
    version: int = Field(sa_type=BigInteger)
    # Copied from the document, whose strings have no length limit and may hold NUL (Go writes
    # it as \u0000; atari's format refuses only lone surrogates). The document keeps it; these
    # copies, which only the listing shows, hold U+FFFD instead: PostgreSQL text cannot hold NUL,
    # and both databases should list the same.
    status: str = Field(sa_type=SearchableText)
    iteration: int = Field(sa_type=BigInteger)
    current_bead: str = Field(sa_type=SearchableText)
    total_cost: float
    total_turns: int = Field(sa_type=BigInteger)
    # The document's own ``updated_at`` (the API's ``updated_at``).
    state_updated_at: str = Field(sa_type=SearchableText)
    # The file kept as its parts (``app/core/documents.py`` ``PartedDocument``): its head,
    # whose empty ``history`` is at parts_at, and its entries in ``RunBead`` rows; None: the
    # whole file, as stored before migration 0013 and not changed since.
    content: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    parts_at: int | None = Field(default=None, sa_type=BigInteger)
    # The whole file's.
    size_bytes: int = Field(sa_type=BigInteger)
    etag: str = Field(max_length=40)
    # What state:load set aside: any bytes at all, kept verbatim.
    backup: bytes | None = Field(default=None, sa_column=Column(LargeBinary, nullable=True))
    backup_etag: str | None = Field(default=None, max_length=40)
    # When the service last stored the state or its backup (the API's ``modified_at``).
    updated_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)


class RunCountedSession(SQLModel, table=True):
    """A session whose cost and turns were already added to its run's totals."""

    __tablename__ = "run_counted_sessions"

    run_state_id: int = Field(
        sa_column=Column(
            ForeignKey("run_states.id", ondelete="CASCADE"), primary_key=True, nullable=False
        )
    )
    session_id: str = Field(primary_key=True, max_length=256)


class RunBead(SQLModel, table=True):
    """One entry of a run's ``history``, as it stands in the file (``atari_state.entry_part``),
    so that an iteration reads and writes its bead alone."""

    __tablename__ = "run_beads"

    run_state_id: int = Field(
        sa_column=Column(
            ForeignKey("run_states.id", ondelete="CASCADE"), primary_key=True, nullable=False
        )
    )
    # The bead id's hash (``bead_key``): an id has no length limit in a stored file, an index
    # entry has one.
    bead_key: str = Field(primary_key=True, max_length=32)
    # The bead id in UTF-8: Go writes the map in the byte order of its keys.
    bead: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    part: bytes = Field(sa_column=Column(LargeBinary, nullable=False))


def bead_key(bead: str) -> str:
    return hashlib.blake2b(bead.encode("utf-8"), digest_size=16).hexdigest()
