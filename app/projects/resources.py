"""What a project holds, by the name its counts are listed under."""

from sqlmodel import SQLModel

from app.memory.models import MemoryItem, MemorySummary
from app.saves.models import Save

PROJECT_RESOURCES: dict[str, type[SQLModel]] = {
    "saves": Save,
    "memory_summaries": MemorySummary,
    "memory_items": MemoryItem,
}
