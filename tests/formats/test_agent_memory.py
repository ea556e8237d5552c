"""The JSONL memory codecs on their own: no server, no database."""

import json

import pytest

from app.formats import agent_memory
from app.formats.agent_memory import FILENAMES, NDJSON_MEDIA_TYPE, MemoryKind
from app.formats.errors import InvalidDocument, MalformedDocument
from tests.helpers import golden_bytes

# Hand-made fixtures (checked by the generator to be what autobyteus writes for their items),
# and the memory of an agent autobyteus itself wrote.
GOLDEN_FILES = [
    *(f"autobyteus/{FILENAMES[kind]}" for kind in MemoryKind if kind != MemoryKind.archived_trace),
    *(f"workspace/memory/agents/coder_worker_4821/{FILENAMES[kind]}" for kind in MemoryKind),
]


@pytest.mark.parametrize("path", GOLDEN_FILES)
def test_golden_files_parse_as_ndjson_and_render_byte_for_byte(path):
    kind = next(kind for kind, filename in FILENAMES.items() if path.endswith("/" + filename))
    raw = golden_bytes(path)
    items = agent_memory.parse(raw, NDJSON_MEDIA_TYPE, kind)
    assert len(items) == raw.count(b"\n")
    assert agent_memory.render_file(agent_memory.render_line(item) for item in items) == raw


def _trace(**changes):
    item = {
        "id": "rt_1",
        "ts": 1.5,
        "turn_id": "turn_0001",
        "seq": 1,
        "trace_type": "user",
        "content": "hi",
        "source_event": "LLMUserMessageReadyEvent",
    }
    item.update(changes)
    return item


def test_one_object_or_an_array_of_them():
    one = agent_memory.parse(
        json.dumps(_trace()).encode(), "application/json", MemoryKind.raw_trace
    )
    many = agent_memory.parse(
        json.dumps([_trace(), _trace(seq=2)]).encode(), "application/json", MemoryKind.raw_trace
    )
    assert one == [_trace()]
    assert [item["seq"] for item in many] == [1, 2]


def test_ndjson_skips_blank_lines_and_keeps_unknown_fields():
    body = (json.dumps(_trace(x_new={"a": 1})) + "\n\n  \n" + json.dumps(_trace(seq=2))).encode()
    items = agent_memory.parse(body, NDJSON_MEDIA_TYPE, MemoryKind.raw_trace)
    assert items == [_trace(x_new={"a": 1}), _trace(seq=2)]


@pytest.mark.parametrize(
    ("item", "path"),
    [
        ({k: v for k, v in _trace().items() if k != "seq"}, "/seq"),
        (_trace(seq="1"), "/seq"),
        (_trace(seq=1.5), "/seq"),
        (_trace(ts=True), "/ts"),
        (_trace(tool_args=[1]), "/tool_args"),
        (_trace(media={"images": "a.png"}), "/media"),
        (_trace(tags=[1]), "/tags"),
    ],
)
def test_raw_trace_faults_point_at_the_field(item, path):
    with pytest.raises(InvalidDocument) as raised:
        agent_memory.parse(json.dumps(item).encode(), "application/json", MemoryKind.raw_trace)
    assert [p for p, _ in raised.value.errors] == [path]


def test_optional_fields_may_be_null():
    item = _trace(tool_name=None, tool_result=None, tags=None, media=None)
    assert agent_memory.item_faults(MemoryKind.raw_trace, item) == []


def test_array_faults_name_the_item():
    body = json.dumps([{"id": "ep", "ts": 1, "turn_ids": [], "summary": "s", "salience": 0}, 3])
    with pytest.raises(InvalidDocument) as raised:
        agent_memory.parse(body.encode(), "application/json", MemoryKind.episodic)
    assert raised.value.errors == [("/1", "a memory item is a JSON object")]


def test_episodic_and_semantic_required_fields():
    assert [p for p, _ in agent_memory.item_faults(MemoryKind.episodic, {})] == [
        "/id",
        "/ts",
        "/turn_ids",
        "/summary",
        "/salience",
    ]
    assert [p for p, _ in agent_memory.item_faults(MemoryKind.semantic, {"fact": 1})] == [
        "/id",
        "/ts",
        "/fact",
        "/confidence",
        "/salience",
    ]


@pytest.mark.parametrize(
    ("raw", "media_type"), [(b"[]", "application/json"), (b"\n", NDJSON_MEDIA_TYPE)]
)
def test_nothing_to_append_is_invalid(raw, media_type):
    with pytest.raises(InvalidDocument):
        agent_memory.parse(raw, media_type, MemoryKind.semantic)


def test_a_malformed_ndjson_line_is_named():
    body = json.dumps(_trace()).encode() + b"\n{oops\n"
    with pytest.raises(MalformedDocument) as raised:
        agent_memory.parse(body, NDJSON_MEDIA_TYPE, MemoryKind.raw_trace)
    assert raised.value.message.startswith("Line 2:")


def test_render_line_is_json_dumps():
    item = _trace(content="héllo 😀", tool_result={"n": 2**70})
    assert agent_memory.render_line(item) == json.dumps(item).encode()


def _lines(*traces: tuple[str, int]) -> list[bytes]:
    return [agent_memory.render_line(_trace(turn_id=turn, seq=seq)) for turn, seq in traces]


@pytest.mark.parametrize(
    ("now", "pruned"),
    [
        # autobyteus's prune: whole turns out, the others in order, then new traces.
        (_lines(("b", 1), ("c", 1)), {"a"}),
        (_lines(("c", 1)), {"a", "b"}),
        # Not a prune: part of a turn, another order, or nothing taken out.
        (_lines(("a", 2), ("b", 1)), None),
        (_lines(("b", 1), ("a", 1), ("a", 2)), None),
        (_lines(("a", 1), ("a", 2), ("b", 1), ("c", 1)), None),
    ],
)
def test_pruned_turns_recognises_what_prune_raw_traces_leaves(now, pruned):
    stored = _lines(("a", 1), ("a", 2), ("b", 1))
    assert agent_memory.pruned_turns(stored, now) == pruned
