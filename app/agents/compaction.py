"""The rebuild of a snapshot from memory, laid out exactly as autobyteus 1.4 lays it out.

Pure functions over memory items (the dicts of the JSONL lines), mirroring
``MemoryManager.get_raw_tail``, ``build_tool_interactions`` and
``CompactionSnapshotBuilder.build``. Values are put into the text with Python's own
formatting (``f"{value}"``), as the reference does: a dict of arguments reads
``{'path': 'a.txt'}``.
"""

from dataclasses import dataclass
from enum import Enum
from typing import Any

from app.formats import working_context_snapshot as snapshot_format

Item = dict[str, Any]
TOOL_TRACE_TYPES = ("tool_call", "tool_result")


def select_raw_tail(traces: list[Item], turns: int) -> list[Item]:
    """The traces of the last ``turns`` turns (by order of first appearance), sorted by
    turn and then seq; traces that tie keep their order."""
    if turns <= 0:
        return []
    turn_order = list(dict.fromkeys(trace["turn_id"] for trace in traces))
    position = {turn_id: index for index, turn_id in enumerate(turn_order[-turns:])}
    tail = [trace for trace in traces if trace["turn_id"] in position]
    return sorted(tail, key=lambda trace: (position[trace["turn_id"]], trace["seq"]))


class Status(Enum):
    pending = "pending"
    success = "success"
    error = "error"


@dataclass
class ToolInteraction:
    tool_call_id: str
    tool_name: Any
    arguments: Any = None
    result: Any = None
    error: Any = None
    status: Status = Status.pending

    def outcome(self) -> Any:
        if self.status is Status.pending:
            return "pending"
        if self.status is Status.error:
            return self.error or "error"
        return self.result


def tool_interactions(traces: list[Item]) -> list[ToolInteraction]:
    """Tool calls paired with their results by ``tool_call_id``, in order of first sight."""
    interactions: dict[str, ToolInteraction] = {}
    for trace in traces:
        call_id = trace.get("tool_call_id")
        if trace["trace_type"] not in TOOL_TRACE_TYPES or not call_id:
            continue
        interaction = interactions.setdefault(
            call_id, ToolInteraction(call_id, trace.get("tool_name"))
        )
        if trace["trace_type"] == "tool_call":
            interaction.tool_name = trace.get("tool_name")
            interaction.arguments = trace.get("tool_args")
        else:
            interaction.tool_name = trace.get("tool_name") or interaction.tool_name
            interaction.result = trace.get("tool_result")
            interaction.error = trace.get("tool_error")
            interaction.status = Status.error if interaction.error else Status.success
    return list(interactions.values())


def _trace_line(trace: Item) -> str:
    prefix = f"({trace['turn_id']}:{trace['seq']}) {trace['trace_type'].upper()}:"
    if trace["trace_type"] == "tool_call":
        return f"{prefix} {trace.get('tool_name')} {trace.get('tool_args')}"
    if trace["trace_type"] == "tool_result":
        result = trace.get("tool_error") or trace.get("tool_result")
        return f"{prefix} {trace.get('tool_name')} {result}"
    return f"{prefix} {trace['content']}"


def recent_turn_lines(raw_tail: list[Item]) -> list[str]:
    """Tool interactions first (by the seq of their first trace), then every other trace."""
    interactions = tool_interactions(raw_tail)
    first_trace: dict[str, Item] = {}
    for trace in raw_tail:
        call_id = trace.get("tool_call_id")
        if call_id and call_id not in first_trace:
            first_trace[call_id] = trace
    lines = []
    for interaction in sorted(interactions, key=lambda i: first_trace[i.tool_call_id]["seq"]):
        trace = first_trace[interaction.tool_call_id]
        lines.append(
            f"({trace['turn_id']}:{trace['seq']}) TOOL: {interaction.tool_name} "
            f"{interaction.arguments} -> {interaction.outcome()}"
        )
    paired = {interaction.tool_call_id for interaction in interactions}
    for trace in raw_tail:
        if trace["trace_type"] in TOOL_TRACE_TYPES and trace.get("tool_call_id") in paired:
            continue
        lines.append(_trace_line(trace))
    return lines


def summary_text(episodic: list[Item], semantic: list[Item], raw_tail: list[Item]) -> str:
    parts: list[str] = []
    if episodic:
        parts.append("[MEMORY:EPISODIC]")
        parts.extend(f"{index}) {item['summary']}" for index, item in enumerate(episodic, 1))
        parts.append("")
    if semantic:
        parts.append("[MEMORY:SEMANTIC]")
        parts.extend(f"- {item['fact']}" for item in semantic)
        parts.append("")
    if raw_tail:
        parts.append("[RECENT TURNS]")
        parts.extend(recent_turn_lines(raw_tail))
        parts.append("")
    return "\n".join(parts).strip()


def build_messages(
    system_prompt: str, episodic: list[Item], semantic: list[Item], raw_tail: list[Item]
) -> list[Item]:
    """The system prompt, then the compaction summary as a user message when there is one."""
    messages = [snapshot_format.message("system", system_prompt)]
    summary = summary_text(episodic, semantic, raw_tail)
    if summary:
        messages.append(snapshot_format.message("user", summary))
    return messages
