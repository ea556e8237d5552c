"""Every table, imported in one place for the app and for Alembic's autogenerate."""

from app.core.idempotency import IdempotencyRecord
from app.keys.models import ApiKey
from app.memory.models import MemoryFileStyle, MemoryItem, MemorySummary
from app.projects.models import Project
from app.saves.models import Save

__all__ = [
    "ApiKey",
    "IdempotencyRecord",
    "MemoryFileStyle",
    "MemoryItem",
    "MemorySummary",
    "Project",
    "Save",
]
