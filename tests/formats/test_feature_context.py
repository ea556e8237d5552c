"""The sdd-unified context.json codec on its own: no server, no database."""

import json
from datetime import UTC, datetime

import pytest

from app.formats import feature_context
from app.formats.errors import InvalidDocument, MalformedDocument
from tests.helpers import golden_bytes, python_indent2


def test_the_seed_template_is_what_the_template_function_builds():
    golden = golden_bytes("sdd-context-template.json")
    built = feature_context.template("{{feature_name}}", "{{timestamp}}")
    assert feature_context.render(built) == golden


def test_the_seed_examples_render_as_python_does():
    for name in ("sdd-handover-note-example.json", "sdd-iteration-tracking-example.json"):
        golden = golden_bytes(name)
        assert feature_context.render(json.loads(golden)) == golden


def test_a_tool_written_file_parses_and_renders_byte_for_byte():
    golden = golden_bytes("sdd-context-tool-written.json")
    document = feature_context.parse(golden)
    assert feature_context.render(document) == golden
    assert document["handover_notes"]["history"][1]["x_tool_extra"] == {
        "tokens": 18446744073709551617
    }


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        (datetime(2026, 3, 1, 9, 14, 27, 2145, tzinfo=UTC), "2026-03-01T09:14:27.002145+00:00"),
        # isoformat() leaves the fraction out when it is zero; so does the tool.
        (datetime(2026, 3, 1, 9, 14, 27, tzinfo=UTC), "2026-03-01T09:14:27+00:00"),
    ],
)
def test_timestamps_are_written_as_the_tool_writes_them(moment, text):
    assert feature_context.tool_timestamp(moment) == text


def _faults(document) -> list[tuple[str, str]]:
    with pytest.raises(InvalidDocument) as raised:
        feature_context.check(document)
    return raised.value.errors


def test_every_fault_is_named():
    document = feature_context.template("f1", "2026-01-01T00:00:00+00:00")
    document["feature_id"] = 7
    document["context_sources"]["l1_architecture"]["status"] = "done"
    document["handover_notes"]["history"] = [
        {"timestamp": "yesterday", "from_agent": "a", "critical_points": "one"},
        "not a note",
    ]
    document["iteration_tracking"]["design-l2"]["attempts"] = -1
    del document["iteration_tracking"]["design-l3"]["reviews"]
    document["circuit_breaker"]["intervention_required"] = "yes"
    document["current_phase"] = "in\x00it"
    assert _faults(document) == [
        ("/feature_id", "must be a string"),
        ("/current_phase", "must be a string without NUL characters or lone surrogates"),
        (
            "/context_sources/l1_architecture/status",
            "must be one of pending, in_progress, completed",
        ),
        ("/handover_notes/history/0/timestamp", "must be an ISO 8601 timestamp"),
        ("/handover_notes/history/0/to_agent", "is required"),
        ("/handover_notes/history/0/critical_points", "must be an array of strings"),
        ("/handover_notes/history/1", "must be an object"),
        ("/iteration_tracking/design-l2/attempts", "must be a non-negative integer"),
        ("/iteration_tracking/design-l3/reviews", "is required"),
        ("/circuit_breaker/intervention_required", "must be true or false"),
    ]


def test_only_feature_id_is_required():
    feature_context.check({"feature_id": "f1", "anything": [1, {"x": None}]})
    # Any string: the document's name for its feature is not the directory's.
    feature_context.check({"feature_id": "password-reset"})
    assert _faults({"handover_notes": {}}) == [("/feature_id", "is required")]
    assert _faults([1]) == [("", "must be an object")]


def test_an_over_long_agent_name_is_refused():
    note = {"timestamp": "2026-01-01T00:00:00Z", "from_agent": "a" * 257, "to_agent": "b"}
    faults = _faults({"feature_id": "f1", "handover_notes": {"history": [note]}})
    assert [path for path, _ in faults] == ["/handover_notes/history/0/from_agent"]


def test_malformed_json_is_malformed():
    for raw in (b'{"feature_id": ', b"\xff", b'{"feature_id": "f1", "x": 1e999}'):
        with pytest.raises(MalformedDocument):
            feature_context.parse(raw)


def test_numbers_python_writes_are_kept():
    values = [float("nan"), float("-inf"), 123456789012345678901234567890]
    raw = json.dumps({"feature_id": "f1", "x": values}, indent=2).encode()
    assert feature_context.render(feature_context.parse(raw)) == raw


def test_handovers_are_read_for_the_index():
    document = json.loads(golden_bytes("sdd-context-tool-written.json"))
    handovers = feature_context.handovers(document)
    assert [(h.position, h.from_agent, h.to_agent) for h in handovers] == [
        (0, "sdd-ba", "next-ready-task"),
        (1, "sdd-architect", "sdd-pe"),
    ]
    assert handovers[1].timestamp == datetime(2026, 3, 1, 9, 14, 27, tzinfo=UTC)
    assert json.loads(feature_context.note_part(handovers[1].note)) == handovers[1].note


def test_render_is_json_dumps_indent_2():
    document = json.loads(golden_bytes("sdd-context-tool-written.json"))
    assert feature_context.render(document) == python_indent2(document)
