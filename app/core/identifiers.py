"""The names in a path (project, agent, run, feature), checked against the one identifier
pattern (``constraints.py``)."""

from typing import Annotated

from fastapi import Path

from app.core.constraints import IDENTIFIER_PATTERN, IDENTIFIER_RULE

ProjectName = Annotated[
    str, Path(pattern=IDENTIFIER_PATTERN, description=f"Project name: {IDENTIFIER_RULE}.")
]
AgentName = Annotated[
    str, Path(pattern=IDENTIFIER_PATTERN, description=f"Agent id: {IDENTIFIER_RULE}.")
]
RunName = Annotated[
    str, Path(pattern=IDENTIFIER_PATTERN, description=f"Run name: {IDENTIFIER_RULE}.")
]
FeatureName = Annotated[
    str, Path(pattern=IDENTIFIER_PATTERN, description=f"Feature id: {IDENTIFIER_RULE}.")
]
