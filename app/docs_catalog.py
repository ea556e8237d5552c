"""The domains' /docs tables in the order the page shows their tags, and the example for each
path parameter the routes share: one project, agent, run and feature taken from the seeds, so
that each Try it out addresses what the examples before it created."""

from typing import Any

from app.agents.api_docs import DOCS as AGENTS
from app.archive.api_docs import DOCS as ARCHIVE
from app.core.api_docs import DomainDocs
from app.features.api_docs import DOCS as FEATURES
from app.health.api_docs import DOCS as OPERATIONS
from app.keys.api_docs import DOCS as ADMIN
from app.memory.api_docs import DOCS as MEMORY
from app.projects.api_docs import DOCS as PROJECTS
from app.runs.api_docs import DOCS as RUNS
from app.saves.api_docs import DOCS as SAVES

DOMAINS: list[DomainDocs] = [
    SAVES,
    AGENTS,
    RUNS,
    FEATURES,
    MEMORY,
    ARCHIVE,
    PROJECTS,
    ADMIN,
    OPERATIONS,
]

PATH_EXAMPLES: dict[str, Any] = {
    "project": "MyProject",  # the seed save's project.name
    "save_id": 1,  # the first save a fresh database stores
    "agent": "agent_123",  # the seed snapshot's agent_id
    "memory": "episodic",
    "run": "nightly",
    "feature": "checkout-flow",  # the seed context's feature_id
    "name": "key-decisions.json",
    "key_id": "key_01HZX3Q4",
}
