"""The archive routes as /docs shows them: summaries and examples (see app/core/api_docs.py)."""

from app.core.api_docs import DomainDocs, Operation, Reply, Tag

PREFIX = "/v1/projects/{project}"

DOCS = DomainDocs(
    Tag(
        "archive",
        "Every file of a project at once, as a `.tar.gz` in the tools' own on-disk layout "
        "(`mdan/`, `memory/agents/<agent>/`, `.atari/`, `features/<feature>/`, "
        "`.autonomous/context/`): what `context-store pull` writes and `push` sends.",
    ),
    {
        f"GET {PREFIX}/archive": Operation(
            "Download a project as a .tar.gz",
            {200: Reply("The archive, streamed.", media_type="application/gzip")},
        ),
        f"GET {PREFIX}/archive/members": Operation(
            "List the files a project's archive holds",
            {
                200: Reply(
                    "Their paths, in path order.",
                    {
                        "items": [
                            {"path": ".atari/state.json"},
                            {"path": "mdan/mdan-save-1705314225.json"},
                        ],
                        "next_cursor": None,
                    },
                )
            },
        ),
        # The body is a binary .tar.gz: Swagger UI offers a file picker, no example text.
        f"POST {PREFIX}/archive": Operation(
            "Import a project's .tar.gz",
            {
                200: Reply(
                    "What each member became.",
                    {
                        "imported": [
                            {
                                "path": "mdan/mdan-save-1705314225.json",
                                "kind": "save",
                                "status": 201,
                                "action": "created",
                                "result": {"id": 1, "filename": "mdan-save-1705314225.json"},
                            }
                        ],
                        "warnings": [],
                        "refused": [],
                        "skipped": [{"path": "notes.txt", "reason": "not a file of a known tool"}],
                    },
                )
            },
        ),
    },
)
