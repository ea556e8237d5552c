"""The one pattern every name in a path (project, agent, run, feature, bead, tenant) obeys."""

from typing import Annotated

from fastapi import Path

IDENTIFIER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
IDENTIFIER_RULE = (
    "1 to 128 characters: letters, digits, '.', '_', ':' and '-', starting with a letter or digit"
)

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
