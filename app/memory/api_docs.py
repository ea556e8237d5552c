"""The project memory routes as /docs shows them: summaries and examples (see
app/core/api_docs.py)."""

from typing import Any

from app.core.api_docs import DomainDocs, Operation, Reply, Tag

PREFIX = "/v1/projects/{project}/memory"

# Seed 004's Context Agent files (`.autonomous/context/`), in the agent's camelCase.
RUNNING_SUMMARY: dict[str, Any] = {
    "content": "# Project Summary\n\n## Completed Work\n- Authentication with JWT (feat-005)\n"
    "- Order service migrations (feat-012)\n\n## Next\n- Checkout flow",
    "updatedAt": 1734604800000,
    "trigger": "category_complete",
    "featuresSinceLastUpdate": 8,
    "totalFeaturesCompleted": 23,
}
DECISION: dict[str, Any] = {
    "id": "dec-001",
    "featureId": "feat-005",
    "decision": "Using JWT tokens for authentication",
    "rationale": "Stateless auth simplifies scaling",
    "impact": ["All API endpoints must validate JWT", "User sessions stored in token, not DB"],
    "timestamp": 1734604500000,
    "category": "architecture",
}
FAILURE: dict[str, Any] = {
    "id": "fail-001",
    "featureId": "feat-012",
    "description": "Database migration failed in production",
    "rootCause": "Migration tried to add NOT NULL column without default",
    "resolution": "Added default value to column definition",
    "prevention": "Always include defaults for NOT NULL columns in migrations",
    "timestamp": 1734603000000,
    "severity": "high",
}
CONSTRAINT: dict[str, Any] = {
    "id": "con-001",
    "description": "Must support Node.js 18+",
    "reason": "Client requirement for production environment",
    "affectedAreas": ["package.json", "CI/CD", "async/await patterns"],
    "addedAt": 1734600000000,
    "expiresAt": None,
    "type": "technical",
}

# What each item route is called, its file, its example and a change a person would make.
_ITEMS: dict[str, tuple[str, str, dict[str, Any], dict[str, Any]]] = {
    "decisions": (
        "decision",
        "key-decisions.json",
        DECISION,
        {"rationale": "Stateless auth simplifies scaling across regions"},
    ),
    "failures": ("failure", "failure-memory.json", FAILURE, {"severity": "critical"}),
    "constraints": (
        "constraint",
        "active-constraints.json",
        CONSTRAINT,
        {"expiresAt": 1766140000000},
    ),
}


def _public(item: dict[str, Any]) -> dict[str, Any]:
    """The item as the item routes answer it: its file's fields, and the indexed ones."""
    return {
        "id": item["id"],
        "feature_id": item.get("featureId"),
        "category": item.get("category", item.get("type")),
        "severity": item.get("severity"),
        "timestamp": item.get("timestamp", item.get("addedAt")),
        "expires_at": item.get("expiresAt"),
        "expired": False,
        "resolved": bool(item.get("resolution")),
        "archived_at": None,
        "item": item,
    }


def _item_operations(route: str) -> dict[str, Operation]:
    kind, file, item, change = _ITEMS[route]
    public = _public(item)
    return {
        f"GET {PREFIX}/{route}": Operation(
            f"List the {route} ({file})",
            {
                200: Reply(
                    "A page of items, newest first.", {"items": [public], "next_cursor": None}
                )
            },
        ),
        # Without its `id`: the service gives the next one in the writer's numbering, as the
        # Context Agent does, so the example can be sent again (an id in use is a 409).
        f"POST {PREFIX}/{route}": Operation(
            f"Add a {kind} to {file}",
            {
                201: Reply(
                    "Added; `filled` names the fields the service filled in.",
                    {**public, "filled": ["/id"]},
                )
            },
            body={name: value for name, value in item.items() if name != "id"},
        ),
        f"GET {PREFIX}/{route}/{{item_id}}": Operation(
            f"Get a {kind}",
            {200: Reply(f"The {kind}.", public)},
            parameters={"item_id": item["id"]},
        ),
        f"PATCH {PREFIX}/{route}/{{item_id}}": Operation(
            f"Change a {kind} (merge patch)",
            {200: Reply(f"The {kind} as it now stands.", {**public, "item": {**item, **change}})},
            body=change,
            parameters={"item_id": item["id"]},
        ),
        f"DELETE {PREFIX}/{route}/{{item_id}}": Operation(
            f"Delete a {kind}", {204: Reply("Deleted.")}, parameters={"item_id": item["id"]}
        ),
    }


DOCS = DomainDocs(
    Tag(
        "memory",
        "The Context Agent's project memory: `.autonomous/context/running-summary.json`, "
        "`key-decisions.json`, `failure-memory.json` and `active-constraints.json`, and the "
        "context pack built from them before a feature.",
    ),
    {
        f"GET {PREFIX}/running-summary": Operation(
            "Download running-summary.json",
            {
                200: Reply(
                    "`running-summary.json` exactly as the Context Agent writes it.",
                    RUNNING_SUMMARY,
                )
            },
        ),
        f"PUT {PREFIX}/running-summary": Operation(
            "Store running-summary.json",
            {
                200: Reply("Replaced."),
                201: Reply("Created."),
            },
            body=RUNNING_SUMMARY,
        ),
        f"GET {PREFIX}/files/{{name}}": Operation(
            "Download a Context Agent file",
            {200: Reply("The file exactly as the tools write it.", [DECISION])},
        ),
        f"PUT {PREFIX}/files/{{name}}": Operation(
            "Import a Context Agent file",
            {200: Reply("Stored; how many items the file now holds.")},
            body=[DECISION],
        ),
        **_item_operations("decisions"),
        **_item_operations("failures"),
        **_item_operations("constraints"),
        f"POST {PREFIX}/maintenance": Operation(
            "Archive stale memory items",
            {
                200: Reply(
                    "What was archived, by kind.",
                    {
                        "total_features_completed": 23,
                        "archived": {"decision": 0, "failure": 0, "constraint": 0},
                    },
                )
            },
        ),
        f"GET {PREFIX}/context": Operation(
            "Build the context pack for a feature",
            {200: Reply("The sections within the token budget, and as markdown.")},
            parameters={"feature_id": "feat-012", "about": "database migrations"},
        ),
    },
)
