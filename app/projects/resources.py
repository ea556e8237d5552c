"""What a project holds, by the name its counts are listed under."""

from sqlmodel import SQLModel

from app.runs.models import RunState
from app.saves.models import Save

PROJECT_RESOURCES: dict[str, type[SQLModel]] = {"saves": Save, "runs": RunState}
