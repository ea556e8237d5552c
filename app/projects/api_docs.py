"""The projects routes as /docs shows them: summaries and examples (see app/core/api_docs.py)."""

from app.core.api_docs import DomainDocs, Operation, Reply, Tag

PROJECT = {
    "name": "MyProject",
    "created_at": "2024-01-15T10:23:46Z",
    "last_write_at": "2024-01-15T11:05:01Z",
    "counts": {
        "saves": 1,
        "working_context_snapshots": 1,
        "agent_memory_items": 2,
        "runs": 1,
        "features": 1,
        "handovers": 1,
        "memory_summaries": 1,
        "memory_items": 3,
    },
}

DOCS = DomainDocs(
    Tag("projects", "A project holds every file of every tool for one code base."),
    {
        "GET /v1/projects": Operation(
            "List your projects",
            {
                200: Reply(
                    "A page of projects, newest first.", {"items": [PROJECT], "next_cursor": None}
                )
            },
        ),
        "GET /v1/projects/{project}": Operation(
            "Get a project", {200: Reply("The project.", PROJECT)}
        ),
        "DELETE /v1/projects/{project}": Operation(
            "Delete a project and everything in it", {204: Reply("Deleted.")}
        ),
    },
)
