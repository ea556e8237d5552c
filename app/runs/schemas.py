from datetime import datetime
from typing import Annotated, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    StrictFloat,
    StrictInt,
    field_validator,
    model_validator,
)

from app.core.constraints import IDENTIFIER_PATTERN, MAX_LIST_ITEMS, StorableStr
from app.core.schemas import ClosedBody
from app.formats.atari_state import LoadOutcome, is_rfc3339, is_text
from app.formats.errors import MAX_LISTED
from app.formats.jsondoc import INT64_MAX


def _text(value: str) -> str:
    # The JSON of a request may hold a lone surrogate escape, which no UTF-8 file can.
    if not is_text(value):
        raise ValueError("contains a lone surrogate, which is not text")
    return value


Text = Annotated[str, AfterValidator(_text)]


def _rfc3339(value: str | None) -> str | None:
    if value is not None and not is_rfc3339(value):
        raise ValueError("must be an RFC 3339 timestamp, e.g. 2024-01-15T10:30:00Z")
    return value


class Notice(BaseModel):
    path: str = Field(description="JSON Pointer into the document.")
    message: str


class RunSummary(BaseModel):
    run: str
    version: int
    status: str
    iteration: int
    current_bead: str | None = Field(description="null when idle.")
    total_cost: float
    total_turns: int
    updated_at: str = Field(description="The document's `updated_at`, as written.")
    has_backup: bool = Field(description="Whether `state:load` set a file aside.")
    modified_at: datetime = Field(description="When the service last stored this run.")
    etag: str = Field(description="The state document's ETag.")


class StateReceipt(RunSummary):
    notices: list[Notice] = Field(
        description="Null or empty `omitempty` fields dropped, as atari's writer drops them; "
        f"a missing or null `stalled_at` in version 2, written as Go's zero time: the first "
        f"{MAX_LISTED}."
    )
    notices_truncated: bool = Field(
        default=False, description=f"There were more notices than the {MAX_LISTED} listed."
    )


class LoadResult(BaseModel):
    outcome: LoadOutcome
    reason: str
    file_version: int | None = Field(description="The file's version; null if unreadable.")
    backup_size: int | None = Field(description="Bytes set aside as the backup on a reset.")
    notices: list[Notice] = Field(
        description="Zero values filled in and empty fields dropped (stored, migrated), or "
        f"why the file could not be read (reset): the first {MAX_LISTED}."
    )
    notices_truncated: bool = Field(
        default=False, description=f"There were more notices than the {MAX_LISTED} listed."
    )
    state: RunSummary


class BeadEntry(BaseModel):
    id: str
    status: str
    attempts: int
    last_attempt: str
    last_error: str | None
    last_session_id: str | None


class IterationStart(ClosedBody):
    bead_id: str = Field(pattern=IDENTIFIER_PATTERN)
    attempt: StrictInt | None = Field(
        default=None, ge=0, le=INT64_MAX, description="Attempt number; default the entry's + 1."
    )
    at: str | None = Field(default=None, description="RFC 3339, kept as given; default now.")

    _at = field_validator("at")(_rfc3339)


class IterationEnd(ClosedBody):
    bead_id: str = Field(pattern=IDENTIFIER_PATTERN)
    outcome: Literal["completed", "failed"]
    error: Text | None = Field(default=None, description="For `failed`: the entry's `last_error`.")
    # A key column (the sessions already counted): text both databases can hold, so that
    # neither stores what the other refuses.
    session_id: StorableStr | None = Field(default=None, min_length=1, max_length=256)
    cost: StrictFloat = Field(
        default=0.0, ge=0, allow_inf_nan=False, description="USD, added once."
    )
    turns: StrictInt = Field(default=0, ge=0, le=INT64_MAX, description="Added once per session.")

    @model_validator(mode="after")
    def _error_only_on_failure(self) -> Self:
        if self.error is not None and self.outcome != "failed":
            raise ValueError("error is only for outcome 'failed'")
        return self


class IterationResult(BaseModel):
    state: RunSummary
    entry: BeadEntry
    counted: bool | None = Field(
        default=None, description="End only: whether cost and turns were added this time."
    )


class StatePatch(ClosedBody):
    """Each field given is set; null or empty clears an optional one (atari omits it)."""

    status: Text | None = None
    active_top_level: Text | None = None
    active_top_level_title: Text | None = None
    stalled_bead_id: Text | None = None
    stalled_bead_title: Text | None = None
    stall_reason: Text | None = None
    stalled_at: str | None = None
    stall_type: Text | None = None
    created_beads: Annotated[list[Text], Field(max_length=MAX_LIST_ITEMS)] | None = None

    _stalled_at = field_validator("stalled_at")(_rfc3339)

    @field_validator("status")
    @classmethod
    def _status_is_not_null(cls, value: str | None) -> str:
        if value is None:
            raise ValueError("status cannot be cleared; atari always writes it")
        return value
