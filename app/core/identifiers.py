"""The names in a path (project, agent, run, feature), checked against the one identifier
pattern, and holding no secret (``constraints.py``)."""

from typing import Annotated

from fastapi import Path

from app.core.constraints import IDENTIFIER_PATTERN, IDENTIFIER_RULE, NoSecret

ProjectName = Annotated[
    str,
    Path(pattern=IDENTIFIER_PATTERN, description=f"Project name: {IDENTIFIER_RULE}."),
    NoSecret,
]
AgentName = Annotated[
    str,
    Path(pattern=IDENTIFIER_PATTERN, description=f"Agent id: {IDENTIFIER_RULE}."),
    NoSecret,
]
RunName = Annotated[
    str,
    Path(pattern=IDENTIFIER_PATTERN, description=f"Run name: {IDENTIFIER_RULE}."),
    NoSecret,
]
FeatureName = Annotated[
    str,
    Path(pattern=IDENTIFIER_PATTERN, description=f"Feature id: {IDENTIFIER_RULE}."),
    NoSecret,
]
