from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, StrictInt

from app.formats import jsondoc
from app.formats.errors import MAX_LISTED


class SaveWarning(BaseModel):
    path: str = Field(description="JSON Pointer to the field that was missing or invalid.")
    message: str


class RedactedSite(BaseModel):
    path: str = Field(description="JSON Pointer to the string or key a secret was found in.")
    kind: str
    count: int


class SaveReceipt(BaseModel):
    id: int
    filename: str
    timestamp: str = Field(description="The save's own `timestamp`, as written.")
    size_bytes: int
    warnings: list[SaveWarning] = Field(
        description=f"Each field missing or invalid, and the default used: the first {MAX_LISTED}."
    )
    warnings_truncated: bool = Field(
        default=False, description=f"There were more warnings than the {MAX_LISTED} listed."
    )
    redactions: dict[str, int] = Field(description="Secrets replaced before storage, by kind.")
    redacted: list[RedactedSite] = Field(
        description="Where the secrets were: each string or key, by kind (`[REDACTED:<kind>]`); "
        f"the first {MAX_LISTED}."
    )
    redacted_truncated: bool = Field(
        default=False,
        description=f"Secrets were found in more places than the {MAX_LISTED} listed.",
    )
    pruned: int = Field(description="Older saves deleted because this one completed every phase.")


class SaveSummary(BaseModel):
    id: int
    filename: str
    timestamp: datetime
    project_name: str
    current_phase: str
    all_phases_complete: bool
    token_percentage: float | None = Field(
        description="null when the file's value is NaN or an infinity (kept in the file)."
    )
    save_count: int | None = Field(
        description="null when the file's value exceeds 64 bits (kept in the file)."
    )
    resume_count: int | None = Field(
        description="null when the file's value exceeds 64 bits (kept in the file)."
    )
    size_bytes: int
    stored_at: datetime


class PruneRequest(BaseModel):
    keep_latest: StrictInt = Field(
        ge=0, le=jsondoc.INT64_MAX, description="How many of the newest saves to keep."
    )


class PruneResult(BaseModel):
    deleted: int


class ResumeResult(BaseModel):
    id: int
    resume_phase: str
    resume_count: int
    save: dict[str, Any]
