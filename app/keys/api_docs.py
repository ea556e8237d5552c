"""The admin routes as /docs shows them: summaries and examples (see app/core/api_docs.py)."""

from app.core.api_docs import DomainDocs, Operation, Reply, Tag

PREFIX = "/v1/admin/keys"

KEY = {
    "id": "key_01HZX3Q4",
    "tenant": "acme",
    "scopes": ["read", "write"],
    "name": "ci-runner",
    "prefix": "cs_2kMZPB",
    "created_at": "2024-01-15T10:00:00Z",
    "revoked_at": None,
}

DOCS = DomainDocs(
    Tag("admin", "API keys of the caller's tenant (the `admin` scope): create, list, get, revoke."),
    {
        f"POST {PREFIX}": Operation(
            "Create an API key",
            {201: Reply("Created; `key` is shown this once.", {**KEY, "key": "cs_2kMZPB…"})},
            body={"scopes": ["read", "write"], "name": "ci-runner"},
        ),
        f"GET {PREFIX}": Operation(
            "List the tenant's API keys",
            {
                200: Reply(
                    "A page of keys (never the keys themselves).",
                    {"items": [KEY], "next_cursor": None},
                )
            },
        ),
        f"GET {PREFIX}/{{key_id}}": Operation(
            "Get an API key",
            {200: Reply("The key's record, with its `ETag` (never the key itself).", KEY)},
        ),
        f"DELETE {PREFIX}/{{key_id}}": Operation(
            "Revoke an API key",
            {204: Reply("Revoked (If-Match: the ETag of the key's GET).")},
        ),
    },
)
