from datetime import datetime

from pydantic import BaseModel, Field


class ProjectPublic(BaseModel):
    name: str
    created_at: datetime
    last_write_at: datetime
    counts: dict[str, int] = Field(description="How many of each resource the project holds.")
