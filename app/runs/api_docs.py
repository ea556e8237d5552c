"""The runs routes as /docs shows them: summaries and examples (see app/core/api_docs.py)."""

from typing import Any

from app.core.api_docs import DomainDocs, Operation, Reply, Tag

PREFIX = "/v1/projects/{project}/runs"

# Seed 002's `.atari/state.json`, version 2, as atari's `json.MarshalIndent` writes it.
STATE: dict[str, Any] = {
    "version": 2,
    "status": "running",
    "iteration": 5,
    "current_bead": "bd-123",
    "history": {
        "bd-001": {
            "id": "bd-001",
            "status": "completed",
            "attempts": 1,
            "last_attempt": "2024-01-15T10:30:00Z",
            "last_session_id": "sess-abc123",
        },
        "bd-002": {
            "id": "bd-002",
            "status": "failed",
            "attempts": 3,
            "last_attempt": "2024-01-15T11:00:00Z",
            "last_error": "tests failed",
        },
    },
    "total_cost": 1.25,
    "total_turns": 150,
    "updated_at": "2024-01-15T11:05:00Z",
    "active_top_level": "bd-epic-001",
    "active_top_level_title": "Feature Epic",
}

RUN_SUMMARY = {
    "run": "nightly",
    "version": 2,
    "status": "running",
    "iteration": 5,
    "current_bead": "bd-123",
    "total_cost": 1.25,
    "total_turns": 150,
    "updated_at": "2024-01-15T11:05:00Z",
    "has_backup": False,
    "modified_at": "2024-01-15T11:05:01Z",
    "etag": '"9b1d0c6e0f4a3b2c"',
}
ENTRY = {
    "id": "bd-124",
    "status": "working",
    "attempts": 1,
    "last_attempt": "2024-01-15T11:10:00Z",
    "last_error": None,
    "last_session_id": None,
}

DOCS = DomainDocs(
    Tag(
        "runs",
        "atari's run state: `.atari/state.json` (the drain loop's iteration, current bead and "
        "per-bead history) and `.atari/state.json.backup`, one pair per named run.",
    ),
    {
        f"GET {PREFIX}": Operation(
            "List a project's atari runs",
            {200: Reply("A page of runs.", {"items": [RUN_SUMMARY], "next_cursor": None})},
        ),
        f"PUT {PREFIX}/{{run}}/state": Operation(
            "Store an atari state.json",
            {
                200: Reply("Replaced.", {**RUN_SUMMARY, "notices": []}),
                201: Reply("Created.", {**RUN_SUMMARY, "notices": []}),
            },
            body=STATE,
        ),
        f"GET {PREFIX}/{{run}}/state": Operation(
            "Download an atari state.json",
            {200: Reply("`.atari/state.json` byte for byte as atari writes it.", STATE)},
        ),
        f"PATCH {PREFIX}/{{run}}/state": Operation(
            "Set a run's status and stall fields",
            {200: Reply("The run as it now stands.", {**RUN_SUMMARY, "status": "stalled"})},
            body={
                "status": "stalled",
                "stalled_bead_id": "bd-002",
                "stalled_bead_title": "Flaky integration test",
                "stall_reason": "max failures reached",
                "stalled_at": "2024-01-15T11:20:00Z",
                "stall_type": "abandoned",
            },
        ),
        f"GET {PREFIX}/{{run}}/state/backup": Operation(
            "Download an atari state.json.backup",
            {200: Reply("The bytes the last resetting `state:load` set aside.", STATE)},
        ),
        f"POST {PREFIX}/{{run}}/state:load": Operation(
            "Load a state.json from disk as atari does",
            {
                200: Reply(
                    "What atari's load made of the file.",
                    {
                        "outcome": "stored",
                        "reason": "version 2: stored as it is",
                        "file_version": 2,
                        "backup_size": None,
                        "notices": [],
                        "state": RUN_SUMMARY,
                    },
                )
            },
            body=STATE,
        ),
        f"POST {PREFIX}/{{run}}/iterations": Operation(
            "Start an iteration on a bead",
            {
                200: Reply(
                    "The run and the bead's history entry.",
                    {
                        "state": {**RUN_SUMMARY, "iteration": 6, "current_bead": "bd-124"},
                        "entry": ENTRY,
                    },
                )
            },
            body={"bead_id": "bd-124", "at": "2024-01-15T11:10:00Z"},
        ),
        f"POST {PREFIX}/{{run}}/iterations/end": Operation(
            "End an iteration on a bead",
            {
                200: Reply(
                    "The run, the entry, and whether cost and turns were added this time.",
                    {
                        "state": {**RUN_SUMMARY, "current_bead": None},
                        "entry": {**ENTRY, "status": "completed", "last_session_id": "sess-def456"},
                        "counted": True,
                    },
                )
            },
            body={
                "bead_id": "bd-124",
                "outcome": "completed",
                "session_id": "sess-def456",
                "cost": 0.42,
                "turns": 18,
            },
        ),
        f"DELETE {PREFIX}/{{run}}": Operation("Delete an atari run", {204: Reply("Deleted.")}),
    },
)
