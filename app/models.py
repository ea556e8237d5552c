"""Every table, imported in one place for the app and for Alembic's autogenerate; and which of
them a project holds (handed to projects by the app factory)."""

from sqlmodel import SQLModel

from app.agents.models import AgentMemoryItem, AgentMemoryTurn, AgentSnapshot
from app.features.models import FeatureContext, FeatureWorkflow, Handover
from app.idempotency.models import IdempotencyRecord
from app.keys.models import ApiKey
from app.memory.models import MemoryFileStyle, MemoryItem, MemorySummary
from app.projects.models import Project
from app.runs.models import RunBead, RunCountedSession, RunState
from app.saves.models import Save

# By the name each count is listed under, in the order a project lists them.
PROJECT_RESOURCES: dict[str, type[SQLModel]] = {
    "saves": Save,
    "working_context_snapshots": AgentSnapshot,
    "agent_memory_items": AgentMemoryItem,
    "runs": RunState,
    "features": FeatureContext,
    "handovers": Handover,
    "memory_summaries": MemorySummary,
    "memory_items": MemoryItem,
}

__all__ = [
    "AgentMemoryItem",
    "AgentMemoryTurn",
    "AgentSnapshot",
    "ApiKey",
    "FeatureContext",
    "FeatureWorkflow",
    "Handover",
    "IdempotencyRecord",
    "MemoryFileStyle",
    "MemoryItem",
    "MemorySummary",
    "PROJECT_RESOURCES",
    "Project",
    "RunBead",
    "RunCountedSession",
    "RunState",
    "Save",
]
