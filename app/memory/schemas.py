from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from app.formats.project_memory import Style


class SummaryWarning(BaseModel):
    pointer: str = Field(description="JSON Pointer to the field the warning is about.")
    message: str


class SummaryReceipt(BaseModel):
    created: bool
    etag: str
    style: Style = Field(description="The key style the file is stored and exported in.")
    token_count: int = Field(description="The service's own count of `content` (cl100k_base).")
    filled: list[str] = Field(description="JSON Pointers of fields the service added.")
    warnings: list[SummaryWarning] = Field(
        description="What the file holds that the service would not write itself but kept: a "
        "content over the token limit, on a file import."
    )


class FileReceipt(BaseModel):
    etag: str
    style: Style
    items: int = Field(description="How many items the file now holds.")


class MemoryItemPublic(BaseModel):
    id: str
    feature_id: str | None
    category: str | None = Field(description="A decision's category or a constraint's type.")
    severity: str | None
    timestamp: int = Field(description="Epoch ms: `timestamp`, or a constraint's `addedAt`.")
    expires_at: int | None
    expired: bool
    resolved: bool = Field(description="A failure with a non-empty `resolution`.")
    archived_at: datetime | None
    item: dict[str, Any] = Field(description="The item as it stands in its file.")


class ItemCreated(MemoryItemPublic):
    filled: list[str] = Field(description="JSON Pointers of fields the service added.")


class MaintenanceResult(BaseModel):
    total_features_completed: int = Field(
        description="From the running summary's `totalFeaturesCompleted` (0 without one)."
    )
    archived: dict[str, int] = Field(description="Items archived now, by kind.")


class ContextPack(BaseModel):
    feature_id: str | None
    max_tokens: int
    token_count: int = Field(description="Tokens of `markdown` (cl100k_base).")
    summary: str | None
    summary_truncated: bool
    decisions: list[dict[str, Any]]
    failures: list[dict[str, Any]]
    constraints: list[dict[str, Any]]
    dropped: dict[str, int] = Field(description="Items left out to fit the budget, by kind.")
    markdown: str
