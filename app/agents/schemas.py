from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field, StrictInt

from app.formats.agent_memory import MemoryKind

# Enough for any real agent; keeps a restore's queries bounded.
MAX_RESTORE_ITEMS = 10_000


class MemoryFile(StrEnum):
    """The memory files, by the name their route uses."""

    raw_traces = "raw-traces"
    episodic = "episodic"
    semantic = "semantic"
    raw_traces_archive = "raw-traces-archive"

    @property
    def kind(self) -> MemoryKind:
        return {
            MemoryFile.raw_traces: MemoryKind.raw_trace,
            MemoryFile.episodic: MemoryKind.episodic,
            MemoryFile.semantic: MemoryKind.semantic,
            MemoryFile.raw_traces_archive: MemoryKind.archived_trace,
        }[self]


class SnapshotReceipt(BaseModel):
    agent_id: str
    schema_version: int
    epoch_id: int
    message_count: int
    size_bytes: int


class AppendReceipt(BaseModel):
    appended: int = Field(description="How many items were appended, in the order given.")


class RestoreRequest(BaseModel):
    system_prompt: str = Field(description="The agent's processed system prompt.")
    max_episodic: StrictInt = Field(
        default=3, ge=0, le=MAX_RESTORE_ITEMS, description="Most recent episodic items."
    )
    max_semantic: StrictInt = Field(
        default=20, ge=0, le=MAX_RESTORE_ITEMS, description="Most recent semantic items."
    )
    raw_tail_turns: StrictInt = Field(
        default=4, ge=0, le=MAX_RESTORE_ITEMS, description="Most recent turns of raw traces."
    )


class RestoreResult(BaseModel):
    source: Literal["cache", "rebuild"]
    reason: str = Field(description="Why the cache was used, or why it could not be.")
    snapshot: dict[str, Any] = Field(description="The restored snapshot, now the cache.")
