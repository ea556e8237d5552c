"""The saves routes as /docs shows them: summaries and examples (see app/core/api_docs.py)."""

from typing import Any

from app.core.api_docs import DomainDocs, Operation, Reply, Tag

PREFIX = "/v1/projects/{project}"

# Seed 000's example save: what MDAN-AUTO writes to `mdan-auto-output/` at 80% of its tokens.
SAVE: dict[str, Any] = {
    "version": "1.0",
    "mode": "auto",
    "timestamp": "2024-01-15T10:23:45Z",
    "project": {
        "name": "MyProject",
        "description": "Project description",
        "tech_stack": {
            "language": "csharp",
            "framework": "dotnet",
            "ui": "blazor",
            "database": "sqlserver",
            "cloud": "azure",
        },
    },
    "phases": {
        "current": "IMPLEMENT",
        "completed": ["LOAD", "DISCOVER", "PLAN", "ARCHITECT"],
        "status": {
            "LOAD": "complete",
            "DISCOVER": "complete",
            "PLAN": "complete",
            "ARCHITECT": "complete",
            "IMPLEMENT": "in_progress",
            "TEST": "pending",
            "DEPLOY": "pending",
            "DOC": "pending",
        },
    },
    "context": {
        "token_usage": {"total": 102400, "limit": 128000, "percentage": 0.8},
        "conversation_history": [
            {
                "role": "system",
                "content": "You are the MDAN-AUTO orchestrator.",
                "timestamp": "2024-01-15T10:00:00Z",
            },
            {
                "role": "user",
                "content": "Build the order service.",
                "timestamp": "2024-01-15T10:00:01Z",
            },
            {
                "role": "assistant",
                "content": "Starting the IMPLEMENT phase with the agreed architecture.",
                "timestamp": "2024-01-15T10:00:05Z",
            },
        ],
        "artifacts": {
            "discover": {"file": "docs/discover.md", "content": "# Discover Phase\n\n..."},
            "plan": {"file": "docs/plan.md", "content": "# Plan\n\n#PHASE1\n..."},
            "architecture": {
                "file": "docs/architecture.md",
                "content": "# Architecture\n\n...",
            },
        },
        "decisions": [
            {
                "id": "decision-001",
                "topic": "Database Choice",
                "winner": "SQL Server",
                "rationale": "Azure integration and enterprise features",
                "timestamp": "2024-01-15T10:05:00Z",
            }
        ],
    },
    "debates": [
        {
            "id": "debate-001",
            "topic": "Architecture Pattern",
            "question": "Should we use monolith or microservices?",
            "participants": ["architect", "dev", "devops"],
            "arguments": {
                "architect": "Microservices for scalability",
                "dev": "Monolith for simplicity",
                "devops": "Microservices for deployment flexibility",
            },
            "winner": "architect",
            "rationale": "Project requires scalability",
            "timestamp": "2024-01-15T10:10:00Z",
        }
    ],
    "errors": [],
    "quality_gates": {
        "LOAD": True,
        "DISCOVER": True,
        "PLAN": True,
        "ARCHITECT": True,
        "IMPLEMENT": False,
        "TEST": False,
        "DEPLOY": False,
        "DOC": False,
    },
    "configuration": {
        "token_limit": 128000,
        "save_threshold": 0.8,
        "output_dir": "./mdan-auto-output",
        "log_level": "INFO",
        "fail_fast": True,
        "debate_enabled": True,
    },
    "metadata": {
        "created_at": "2024-01-15T10:00:00Z",
        "updated_at": "2024-01-15T10:23:45Z",
        "save_count": 1,
        "resume_count": 0,
    },
}

SAVE_SUMMARY = {
    "id": 1,
    "filename": "mdan-save-1705314225.json",
    "timestamp": "2024-01-15T10:23:45Z",
    "project_name": "MyProject",
    "current_phase": "IMPLEMENT",
    "all_phases_complete": False,
    "token_percentage": 0.8,
    "save_count": 1,
    "resume_count": 0,
    "size_bytes": 3010,
    "stored_at": "2024-01-15T10:23:46Z",
}

SAVE_FILE = Reply(
    "The save file exactly as MDAN-AUTO wrote it (`json.dumps(save, indent=2)`).", SAVE
)

DOCS = DomainDocs(
    Tag(
        "saves",
        "MDAN-AUTO's context saves: the `mdan-save-<epoch>.json` files its orchestrator writes "
        "to `mdan-auto-output/` when the context nears its token limit, and resumes from.",
    ),
    {
        f"POST {PREFIX}/saves": Operation(
            "Import an MDAN-AUTO save",
            {
                201: Reply(
                    "Stored. `id` is the save's number in the project (1, 2, 3..., never "
                    "reused) and `Location` its URL; `warnings` name each field given its "
                    "default, `redactions` count the secrets replaced, `redacted` says where.",
                    {
                        "id": 1,
                        "filename": "mdan-save-1705314225.json",
                        "timestamp": "2024-01-15T10:23:45Z",
                        "size_bytes": 3010,
                        "warnings": [],
                        "redactions": {},
                        "redacted": [],
                        "pruned": 0,
                    },
                )
            },
            body=SAVE,
        ),
        f"GET {PREFIX}/saves": Operation(
            "List a project's saves",
            {200: Reply("A page of summaries.", {"items": [SAVE_SUMMARY], "next_cursor": None})},
            parameters={"phase": "IMPLEMENT"},
        ),
        f"GET {PREFIX}/saves/latest": Operation("Download the newest save", {200: SAVE_FILE}),
        f"GET {PREFIX}/saves/{{save_id}}": Operation("Download a save", {200: SAVE_FILE}),
        f"DELETE {PREFIX}/saves/{{save_id}}": Operation("Delete a save", {204: Reply("Deleted.")}),
        f"POST {PREFIX}/saves/{{save_id}}/resume": Operation(
            "Resume from a save",
            {
                200: Reply(
                    "The phase to resume, and the save with `metadata.resume_count` + 1.",
                    {
                        "id": 1,
                        "resume_phase": "IMPLEMENT",
                        "resume_count": 1,
                        "save": {**SAVE, "metadata": {**SAVE["metadata"], "resume_count": 1}},
                    },
                )
            },
        ),
        f"POST {PREFIX}/saves:prune": Operation(
            "Keep only the newest saves",
            {200: Reply("How many saves were deleted.", {"deleted": 0})},
            body={"keep_latest": 10},
        ),
    },
)
