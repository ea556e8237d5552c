"""What a project holds, by the name its counts are listed under."""

from sqlmodel import SQLModel

from app.agents.models import AgentMemoryItem, AgentSnapshot
from app.features.models import FeatureContext, Handover
from app.memory.models import MemoryItem, MemorySummary
from app.runs.models import RunState
from app.saves.models import Save

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
