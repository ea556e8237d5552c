from datetime import datetime

from sqlalchemy import LargeBinary
from sqlmodel import JSON, Column, Field, SQLModel

from app.core.db import UTCDateTime, utcnow


class IdempotencyRecord(SQLModel, table=True):
    """A tenant's Idempotency-Key, the fingerprint of the request that claimed it, and the
    response it got (none while that request is still running): its body as it was sent, or,
    over the body limit, what stands for it (``body_form``, ``app/idempotency/service.py``)."""

    __tablename__ = "idempotency_keys"

    tenant: str = Field(primary_key=True, max_length=128)
    key: str = Field(primary_key=True, max_length=255)
    request_hash: str = Field(max_length=64)
    status_code: int | None = None
    headers: dict[str, str] | None = Field(default=None, sa_column=Column(JSON))
    body: bytes | None = Field(default=None, sa_column=Column(LargeBinary))
    body_form: str | None = Field(default=None, max_length=16)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    expires_at: datetime = Field(sa_type=UTCDateTime, index=True)
