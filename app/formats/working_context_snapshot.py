"""autobyteus working context snapshots (seed 001): ``working_context_snapshot.json``.

The layout is the one autobyteus 1.4's ``WorkingContextSnapshotSerializer`` writes:
``schema_version``, ``agent_id``, ``epoch_id``, ``last_compaction_ts`` and ``messages``, each
message with the seven keys of ``Message.to_dict()``. Its store writes the file with
``json.dump(payload, handle)``: compact, one line, non-ASCII escaped, no newline at the end.

``faults`` lists everything that makes a document an invalid cache; ``parse`` refuses such a
document naming each fault. Unknown fields are kept where they are.
"""

import json
from typing import Any

from app.formats import jsondoc
from app.formats.errors import Faults, InvalidDocument, quoted

SCHEMA_VERSION = 1
FILENAME = "working_context_snapshot.json"
ROLES = ("system", "user", "assistant", "tool")
MEDIA_KEYS = ("image_urls", "audio_urls", "video_urls")
MESSAGE_KEYS = ("role", "content", "reasoning_content", *MEDIA_KEYS, "tool_payload")
TOOL_CALL_KEYS = ("id", "name", "arguments")
HEADER_KEYS = ("schema_version", "agent_id", "epoch_id", "last_compaction_ts", "messages")
# The header as a JSON Schema, for the API's description of the body (the checks below are the
# rule; ``agent_id`` must also equal the agent in the path).
HEADER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": list(HEADER_KEYS),
    "properties": {
        "schema_version": {"type": "integer", "enum": [SCHEMA_VERSION]},
        "agent_id": {"type": "string"},
        "epoch_id": {"type": "integer", "minimum": 0},
        "last_compaction_ts": {"type": ["number", "null"]},
        "messages": {"type": "array", "items": {"type": "object"}},
    },
}
TOOL_RESULT_KEYS = ("tool_call_id", "tool_name", "tool_result", "tool_error")
# The epochs restore counts from (a non-negative 64-bit integer); a file may hold any
# non-negative integer, as Python's int and json do.
EPOCH_RANGE = range(0, jsondoc.INT64.stop)
# A restore (AgentFactory.restore_agent) builds a new MemoryManager, whose snapshot starts at
# epoch 1, and resets it once, from the cache or from memory: whatever epoch the cache held,
# the snapshot autobyteus persists after a restore is at epoch 2.
RESTORED_EPOCH = 2

Fault = tuple[str, str]


def is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    # NaN and the infinities included: json.dump writes them.
    return is_integer(value) or isinstance(value, float)


def _string_or_null(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _missing_keys(node: dict[str, Any], keys: tuple[str, ...], *path: str | int) -> list[Fault]:
    return [(jsondoc.pointer(*path, key), "missing") for key in keys if key not in node]


def _tool_call_faults(call: Any, *path: str | int) -> list[Fault]:
    if not isinstance(call, dict):
        return [(jsondoc.pointer(*path), "a tool call is an object")]
    faults = _missing_keys(call, TOOL_CALL_KEYS, *path)
    for key in ("id", "name"):
        if key in call and not isinstance(call[key], str):
            faults.append((jsondoc.pointer(*path, key), "must be a string"))
    if "arguments" in call and not (
        call["arguments"] is None or isinstance(call["arguments"], dict)
    ):
        faults.append((jsondoc.pointer(*path, "arguments"), "must be an object or null"))
    return faults


def _tool_payload_faults(payload: Any, *path: str | int) -> list[Fault]:
    """A payload is either tool calls (``tool_calls``) or one tool result, as Message writes."""
    if payload is None:
        return []
    if not isinstance(payload, dict):
        return [(jsondoc.pointer(*path), "must be an object or null")]
    if "tool_calls" in payload:
        calls = payload["tool_calls"]
        if not isinstance(calls, list):
            return [(jsondoc.pointer(*path, "tool_calls"), "must be an array")]
        found = Faults()
        for index, call in enumerate(calls):
            found.extend(_tool_call_faults(call, *path, "tool_calls", index))
        return found
    if "tool_call_id" not in payload:
        return [(jsondoc.pointer(*path), "must hold either tool_calls or a tool result")]
    faults = _missing_keys(payload, TOOL_RESULT_KEYS, *path)
    for key in ("tool_call_id", "tool_name"):
        if key in payload and not isinstance(payload[key], str):
            faults.append((jsondoc.pointer(*path, key), "must be a string"))
    if not _string_or_null(payload.get("tool_error")):
        faults.append((jsondoc.pointer(*path, "tool_error"), "must be a string or null"))
    return faults


def message_faults(message: Any, *path: str | int) -> list[Fault]:
    if not isinstance(message, dict):
        return [(jsondoc.pointer(*path), "a message is an object")]
    faults = _missing_keys(message, MESSAGE_KEYS, *path)
    if "role" in message and message["role"] not in ROLES:
        faults.append((jsondoc.pointer(*path, "role"), f"must be one of {', '.join(ROLES)}"))
    for key in ("content", "reasoning_content"):
        if not _string_or_null(message.get(key)):
            faults.append((jsondoc.pointer(*path, key), "must be a string or null"))
    for key in MEDIA_KEYS:
        urls = message.get(key, [])
        if not isinstance(urls, list) or not all(isinstance(url, str) for url in urls):
            faults.append((jsondoc.pointer(*path, key), "must be an array of strings"))
    faults.extend(_tool_payload_faults(message.get("tool_payload"), *path, "tool_payload"))
    return faults


def _header_faults(document: dict[str, Any], agent_id: str) -> list[Fault]:
    faults = _missing_keys(document, HEADER_KEYS)
    version = document.get("schema_version", SCHEMA_VERSION)
    if version != SCHEMA_VERSION or not is_integer(version):
        faults.append(
            (
                "/schema_version",
                f"schema_version {quoted(version)} is not supported; "
                f"this service reads {SCHEMA_VERSION}",
            )
        )
    if "agent_id" in document and document["agent_id"] != agent_id:
        faults.append(("/agent_id", f"must equal the agent in the path, {agent_id!r}"))
    epoch = document.get("epoch_id", 0)
    if not (is_integer(epoch) and epoch >= 0):
        faults.append(("/epoch_id", "must be a non-negative integer"))
    compacted = document.get("last_compaction_ts")
    if not (compacted is None or is_number(compacted)):
        faults.append(("/last_compaction_ts", "must be a number (unix seconds) or null"))
    return faults


def faults(document: Any, agent_id: str) -> list[Fault]:
    """Everything that keeps ``document`` from being a valid cache for ``agent_id``; past
    ``MAX_LISTED`` of them, ``TooManyFaults`` with the first."""
    if not isinstance(document, dict):
        return [("", "a working context snapshot is a JSON object")]
    found = Faults()
    found.extend(_header_faults(document, agent_id))
    messages = document.get("messages", [])
    if not isinstance(messages, list):
        return [*found, ("/messages", "must be an array")]
    for index, message in enumerate(messages):
        found.extend(message_faults(message, "messages", index))
    return found


def parse(raw: bytes, agent_id: str) -> dict[str, Any]:
    """The snapshot in ``raw``, or InvalidDocument naming each fault."""
    document = jsondoc.load(raw)
    found = faults(document, agent_id)
    if found:
        raise InvalidDocument("The working context snapshot is not valid.", found)
    assert isinstance(document, dict)
    return document


def render(document: dict[str, Any]) -> bytes:
    """Byte for byte what ``json.dump(payload, handle)`` writes."""
    return json.dumps(document).encode("ascii")


def message(role: str, content: str | None) -> dict[str, Any]:
    """A message as autobyteus's ``Message(role, content).to_dict()`` lays it out."""
    return {
        "role": role,
        "content": content,
        "reasoning_content": None,
        "image_urls": [],
        "audio_urls": [],
        "video_urls": [],
        "tool_payload": None,
    }


def _tool_payload_through_message(payload: Any) -> dict[str, Any] | None:
    """The payload after ``_deserialize_tool_payload`` (into ToolCallPayload or
    ToolResultPayload, unknown keys dropped, ``arguments`` null or absent made ``{}``), then
    ``Message.to_dict`` and ``_normalize_tool_payload``. The payload is valid (see
    ``message_faults``): ids and names are strings already, so ``str()`` changes nothing, and
    values that came from JSON are all serialisable, so ``_safe_json_value`` keeps them."""
    if payload is None:
        return None
    if "tool_calls" in payload:
        return {
            "tool_calls": [
                {"id": call["id"], "name": call["name"], "arguments": call["arguments"] or {}}
                for call in payload["tool_calls"]
            ]
        }
    return {key: payload[key] for key in TOOL_RESULT_KEYS}


def message_through_message(data: dict[str, Any]) -> dict[str, Any]:
    """A valid cached message as autobyteus writes it again after a restore: read into its
    ``Message`` by ``WorkingContextSnapshotSerializer._deserialize_message`` and written by
    ``_serialize_message``. Only the seven keys of ``Message.to_dict()`` remain."""
    return {
        "role": data["role"],
        "content": data["content"],
        "reasoning_content": data["reasoning_content"],
        **{key: data[key] or [] for key in MEDIA_KEYS},
        "tool_payload": _tool_payload_through_message(data["tool_payload"]),
    }


def snapshot(
    agent_id: str, epoch_id: int, last_compaction_ts: float, messages: list[dict[str, Any]]
) -> dict[str, Any]:
    """A new snapshot document, keys in the serializer's order."""
    return {
        "schema_version": SCHEMA_VERSION,
        "agent_id": agent_id,
        "epoch_id": epoch_id,
        "last_compaction_ts": last_compaction_ts,
        "messages": messages,
    }
