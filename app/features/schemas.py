from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, Field, StrictInt

from app.core.constraints import IDENTIFIER_PATTERN, MAX_LIST_ITEMS
from app.core.schemas import ClosedBody
from app.formats import feature_context, jsondoc, timestamps

# What the tool itself writes for a review outcome (orchestrator/main.py reads the same).
# Agent names become indexed columns: bounded, and without NUL (PostgreSQL text cannot hold it).
AgentName = Annotated[str, Field(max_length=feature_context.MAX_AGENT_NAME, pattern=r"^[^\x00]*$")]


def _iso_timestamp(value: str | None) -> str | None:
    if value is not None and timestamps.parse_iso8601(value) is None:
        raise ValueError("must be an ISO 8601 timestamp")
    return value


class FeatureCreate(BaseModel):
    feature_id: str = Field(pattern=IDENTIFIER_PATTERN, description="The feature's id.")


class FeatureSummary(BaseModel):
    feature_id: str
    current_phase: str | None = Field(description="`current_phase` of the context.")
    intervention_required: bool = Field(description="`circuit_breaker.intervention_required`.")
    blocked_task: str | None = Field(description="`circuit_breaker.blocked_task`.")
    size_bytes: int
    created_at: datetime
    updated_at: datetime


class WorkflowSummary(BaseModel):
    feature_id: str = Field(description="The feature: its directory's name.")
    size_bytes: int
    created_at: datetime
    updated_at: datetime


class HandoverCreate(ClosedBody):
    """A handover note, in the order the seed documents its fields."""

    timestamp: Annotated[str | None, AfterValidator(_iso_timestamp)] = Field(
        default=None, description="ISO 8601, kept as written; now (the tool's style) if absent."
    )
    from_agent: AgentName
    to_agent: AgentName
    task_completed: str
    message: str
    critical_points: list[str] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    artifacts_created: list[str] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)


class HandoverAppended(BaseModel):
    feature_id: str
    index: int = Field(description="The note's position in `handover_notes.history`.")
    note: dict[str, Any] = Field(description="The note as stored.")
    last_updated: str = Field(description="The context's new `last_updated`.")


class HandoverItem(BaseModel):
    feature_id: str
    index: int = Field(description="The note's position in `handover_notes.history`.")
    note: dict[str, Any]


class ReviewCreate(ClosedBody):
    phase: str = Field(
        min_length=1, max_length=128, description="A key of `iteration_tracking`, e.g. design-l1."
    )
    outcome: feature_context.ReviewOutcome
    rejecting_agents: list[AgentName] = Field(
        default_factory=list, max_length=feature_context.MAX_REJECTING_AGENTS
    )
    issues_count: StrictInt = Field(default=0, ge=0, le=jsondoc.INT64_MAX)


class BreakerChange(BaseModel):
    feature_id: str
    iteration_tracking: dict[str, Any] = Field(description="The phases this changed, as stored.")
    circuit_breaker: dict[str, Any] = Field(description="`circuit_breaker` as stored.")
    tripped: bool = Field(description="This review tripped the circuit breaker.")
    last_updated: str = Field(description="The context's new `last_updated`.")
    added: list[str] = Field(
        description="JSON Pointers of the documented parts the service had to add (from the "
        "template) because the file had none."
    )
