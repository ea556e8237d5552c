"""What a project holds, by the name its counts are listed under."""

from sqlmodel import SQLModel

from app.features.models import FeatureContext, Handover
from app.saves.models import Save

PROJECT_RESOURCES: dict[str, type[SQLModel]] = {
    "saves": Save,
    "features": FeatureContext,
    "handovers": Handover,
}
