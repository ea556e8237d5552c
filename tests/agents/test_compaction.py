"""The rebuild from memory on its own, against autobyteus 1.4's layout: no server, no DB."""

import json

from app.agents import compaction
from app.formats import working_context_snapshot as snapshot_format
from tests.helpers import golden_bytes


def golden_items(name: str) -> list[dict]:
    return [json.loads(line) for line in golden_bytes(f"autobyteus/{name}").splitlines()]


def _trace(turn: str, seq: int, trace_type: str = "user", **fields) -> dict:
    return {"turn_id": turn, "seq": seq, "trace_type": trace_type, "content": f"{turn}/{seq}"} | (
        fields
    )


def _keys(traces: list[dict]) -> list[tuple[str, int]]:
    return [(trace["turn_id"], trace["seq"]) for trace in traces]


def test_raw_tail_keeps_the_last_turns_by_first_appearance_sorted_by_seq():
    traces = [_trace("b", 1), _trace("a", 2), _trace("c", 1), _trace("a", 1), _trace("b", 0)]
    # Turns by first appearance: b, a, c. The last two are a and c.
    assert _keys(compaction.select_raw_tail(traces, 2)) == [("a", 1), ("a", 2), ("c", 1)]
    assert _keys(compaction.select_raw_tail(traces, 9)) == [
        ("b", 0),
        ("b", 1),
        ("a", 1),
        ("a", 2),
        ("c", 1),
    ]
    assert compaction.select_raw_tail(traces, 0) == []


def test_equal_seqs_keep_their_append_order():
    first, second = _trace("t", 1, content="first"), _trace("t", 1, content="second")
    assert compaction.select_raw_tail([first, second], 1) == [first, second]


def test_the_fixture_rebuilds_to_the_reference_summary():
    tail = compaction.select_raw_tail(golden_items("raw_traces.jsonl"), 4)
    summary = compaction.summary_text(
        golden_items("episodic.jsonl")[-3:], golden_items("semantic.jsonl"), tail
    )
    assert summary == golden_bytes("autobyteus/compaction-summary-default.txt").decode()


def test_messages_are_the_system_prompt_and_the_summary():
    episodic = [{"summary": "did a thing"}]
    messages = compaction.build_messages("Be brief.", episodic, [], [])
    assert messages == [
        snapshot_format.message("system", "Be brief."),
        snapshot_format.message("user", "[MEMORY:EPISODIC]\n1) did a thing"),
    ]


def test_no_memory_means_no_user_message():
    assert compaction.build_messages("Be brief.", [], [], []) == [
        snapshot_format.message("system", "Be brief.")
    ]


def test_tool_interactions_pair_by_call_id_and_fall_back_to_single_traces():
    traces = [
        _trace("t", 1, "tool_result", tool_call_id="c1", tool_name="grep", tool_result=[1, "x"]),
        _trace("t", 2, "tool_call", tool_call_id="c1", tool_name="grep", tool_args=None),
        _trace("t", 3, "tool_result", tool_name="cat", tool_error="", tool_result="ok"),
        _trace("t", 4, "tool_call", tool_call_id="c2", tool_name="rm", tool_args={"f": "a"}),
        _trace("t", 5, "tool_result", tool_call_id="c2", tool_error="denied"),
    ]
    assert compaction.recent_turn_lines(traces) == [
        "(t:1) TOOL: grep None -> [1, 'x']",
        "(t:4) TOOL: rm {'f': 'a'} -> denied",
        "(t:3) TOOL_RESULT: cat ok",
    ]
