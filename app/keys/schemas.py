from datetime import datetime

from pydantic import BaseModel, Field

from app.core.constraints import MAX_LIST_ITEMS, StorableStr
from app.core.schemas import ClosedBody
from app.core.security import Scope


class ApiKeyCreate(ClosedBody):
    # A key is for the caller's own tenant: a `tenant` (or any other field) is refused rather
    # than silently ignored.
    scopes: list[Scope] = Field(
        min_length=1, max_length=MAX_LIST_ITEMS, examples=[["read", "write"]]
    )
    name: StorableStr | None = Field(
        default=None, max_length=200, description="A label for people."
    )


class ApiKeyPublic(BaseModel):
    id: str
    tenant: str
    scopes: list[Scope]
    name: str | None
    prefix: str = Field(description="The key's first characters, to tell keys apart.")
    created_at: datetime
    revoked_at: datetime | None


class ApiKeyCreated(ApiKeyPublic):
    key: str = Field(description="The key itself. Shown this once; only its hash is stored.")
