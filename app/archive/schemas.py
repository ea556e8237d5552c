from typing import Any

from pydantic import BaseModel, Field

from app.archive.layout import Kind


class ArchiveMember(BaseModel):
    """A file of the project, by its path in the archive, without its contents."""

    path: str = Field(
        description="The member's path in the archive: the tools' on-disk layout "
        "(`mdan/mdan-save-1705314225.json`, `features/{feature}/context.json`, ...)."
    )


class ImportedMember(BaseModel):
    path: str = Field(description="The member's path in the archive.")
    kind: Kind
    status: int = Field(description="The status the member's own import route answers.")
    action: str = Field(
        description="`created`, `replaced`, `appended` or `unchanged`; `pruned` for a "
        "raw_traces.jsonl that autobyteus pruned since the last import; for run state, what "
        "atari's load did: `stored`, `migrated` or `reset`."
    )
    result: dict[str, Any] = Field(description="The body the member's own import route answers.")


class MemberWarning(BaseModel):
    path: str = Field(description="The member's path in the archive.")
    pointer: str = Field(description="JSON Pointer into the member's document.")
    message: str


class RefusedMember(BaseModel):
    """The problem the member's own import route would have answered."""

    path: str = Field(description="The member's path in the archive.")
    type: str
    title: str
    status: int
    detail: str
    errors: list[dict[str, str]] = Field(default_factory=list)


class SkippedMember(BaseModel):
    path: str = Field(description="The member's path in the archive.")
    reason: str


class ArchiveReport(BaseModel):
    """Every member imported (each is a write), and the first 100 warnings, members refused
    and members skipped: past them, the list's ``*_truncated`` is true."""

    imported: list[ImportedMember] = Field(default_factory=list)
    warnings: list[MemberWarning] = Field(default_factory=list)
    warnings_truncated: bool = Field(
        default=False, description="More warnings than listed: the first 100 are."
    )
    refused: list[RefusedMember] = Field(default_factory=list)
    refused_truncated: bool = Field(
        default=False, description="More members refused than listed: the first 100 are."
    )
    skipped: list[SkippedMember] = Field(default_factory=list)
    skipped_truncated: bool = Field(
        default=False, description="More members skipped than listed: the first 100 are."
    )
