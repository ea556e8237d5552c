"""The agents routes as /docs shows them: summaries and examples (see app/core/api_docs.py)."""

from typing import Any

from app.core.api_docs import DomainDocs, Operation, Reply, Tag

PREFIX = "/v1/projects/{project}/agents/{agent}"


def _message(role: str, content: str | None, **fields: Any) -> dict[str, Any]:
    """A message as autobyteus's snapshot serializer writes it: every field, in its order."""
    return {
        "role": role,
        "content": content,
        "reasoning_content": fields.get("reasoning_content"),
        "image_urls": [],
        "audio_urls": [],
        "video_urls": [],
        "tool_payload": fields.get("tool_payload"),
    }


# Seed 001's working-context snapshot (`memory/agents/<agent_id>/working_context_snapshot.json`).
SNAPSHOT: dict[str, Any] = {
    "schema_version": 1,
    "agent_id": "agent_123",
    "epoch_id": 4,
    "last_compaction_ts": 1738100000.0,
    "messages": [
        _message("system", "You are a careful coding agent."),
        _message("user", "Read the config and tell me the port."),
        _message(
            "assistant",
            None,
            reasoning_content="Need the file first.",
            tool_payload={
                "tool_calls": [
                    {"id": "call_1", "name": "read_file", "arguments": {"path": "config.yaml"}}
                ]
            },
        ),
        _message(
            "tool",
            None,
            tool_payload={
                "tool_call_id": "call_1",
                "tool_name": "read_file",
                "tool_result": {"port": 8080},
                "tool_error": None,
            },
        ),
        _message("assistant", "The port is 8080.", reasoning_content="Read it."),
    ],
}

# Seed 001's episodic items (`episodic.jsonl`), as the agent's memory manager appends them.
EPISODIC = [
    {
        "id": "ep_1",
        "ts": 1738100000.5,
        "turn_ids": ["turn_0001"],
        "summary": "Turn one: the user asked for the port.",
        "salience": 0.2,
    },
    {
        "id": "ep_2",
        "ts": 1738100001.5,
        "turn_ids": ["turn_0002"],
        "summary": "Turn two: read config.yaml; the port is 8080.",
        "salience": 0.5,
        "tags": ["config"],
    },
]

SNAPSHOT_RECEIPT = {
    "agent_id": "agent_123",
    "schema_version": 1,
    "epoch_id": 4,
    "message_count": 5,
    "size_bytes": 1043,
}

DOCS = DomainDocs(
    Tag(
        "agents",
        "autobyteus agents' memory: the working-context snapshot "
        "(`memory/agents/<agent_id>/working_context_snapshot.json`, the cache a restore starts "
        "from) and the `raw_traces.jsonl`, `episodic.jsonl`, `semantic.jsonl` and "
        "`raw_traces_archive.jsonl` memory files.",
    ),
    {
        f"PUT {PREFIX}/working-context-snapshot": Operation(
            "Store an autobyteus working-context snapshot",
            {
                200: Reply("Replaced.", SNAPSHOT_RECEIPT),
                201: Reply("Created.", SNAPSHOT_RECEIPT),
            },
            body=SNAPSHOT,
        ),
        f"GET {PREFIX}/working-context-snapshot": Operation(
            "Download the working-context snapshot",
            {200: Reply("The snapshot exactly as autobyteus writes it (one line).", SNAPSHOT)},
        ),
        f"DELETE {PREFIX}/working-context-snapshot": Operation(
            "Drop the working-context snapshot", {204: Reply("Dropped.")}
        ),
        f"POST {PREFIX}/memory/{{memory}}": Operation(
            "Append items to an agent's memory file",
            {201: Reply("Appended, in the order given.", {"appended": 2})},
            body=EPISODIC,
        ),
        f"GET {PREFIX}/memory/{{memory}}": Operation(
            "List an agent's memory items",
            {
                200: Reply(
                    "A page of items, oldest first.", {"items": EPISODIC, "next_cursor": None}
                )
            },
        ),
        f"POST {PREFIX}/restore": Operation(
            "Restore an agent's working context",
            {
                200: Reply(
                    "The restored snapshot, now the cache.",
                    {
                        "source": "cache",
                        "reason": "the cached snapshot is valid",
                        "snapshot": {**SNAPSHOT, "epoch_id": 5},
                    },
                )
            },
            body={
                "system_prompt": "You are a careful coding agent.",
                "max_episodic": 3,
                "max_semantic": 20,
                "raw_tail_turns": 4,
            },
        ),
    },
)
