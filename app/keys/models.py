from datetime import datetime

from sqlmodel import Column, Field, SQLModel, String

from app.core.db import UTCDateTime, utcnow


class ApiKey(SQLModel, table=True):
    __tablename__ = "api_keys"

    id: str = Field(primary_key=True, max_length=32)
    tenant: str = Field(max_length=128, index=True)
    # SHA-256 of the key. Keys are 256 random bits, so a fast hash is as safe as a slow one
    # and keeps authentication to one indexed lookup.
    key_hash: str = Field(max_length=64, unique=True)
    # The first characters of the key, for people to tell their keys apart in a listing.
    prefix: str = Field(max_length=16)
    scopes: str = Field(sa_column=Column(String(64), nullable=False))
    name: str | None = Field(default=None, max_length=200)
    created_at: datetime = Field(default_factory=utcnow, sa_type=UTCDateTime)
    revoked_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
