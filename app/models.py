"""Every table, imported in one place for the app and for Alembic's autogenerate."""

from app.agents.models import AgentMemoryItem, AgentMemoryTurn, AgentSnapshot
from app.features.models import FeatureContext, FeatureWorkflow, Handover
from app.idempotency.models import IdempotencyRecord
from app.keys.models import ApiKey
from app.memory.models import MemoryFileStyle, MemoryItem, MemorySummary
from app.projects.models import Project
from app.runs.models import RunCountedSession, RunState
from app.saves.models import Save

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
    "Project",
    "RunCountedSession",
    "RunState",
    "Save",
]
