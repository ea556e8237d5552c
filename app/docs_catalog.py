"""The domains' /docs tables in the order the page shows their tags, and the example for each
path parameter the routes share: one project, agent, run and feature taken from the seeds,
so that every Try it out addresses what the examples before it created."""

from typing import Any

from app.core.api_docs import DomainDocs
from app.saves.api_docs import DOCS as SAVES

DOMAINS: list[DomainDocs] = [SAVES]

PATH_EXAMPLES: dict[str, Any] = {
    "project": "MyProject",
    "save_id": 1,
}
