"""The working context snapshot codec on its own: no server, no database."""

import json

import pytest

from app.formats import working_context_snapshot as codec
from app.formats.errors import InvalidDocument, MalformedDocument
from tests.helpers import golden_bytes

GOLDEN = "autobyteus/working_context_snapshot.json"


def golden_snapshot() -> dict:
    return json.loads(golden_bytes(GOLDEN))


def test_the_golden_file_parses_and_renders_byte_for_byte():
    document = codec.parse(golden_bytes(GOLDEN), "agent_123")
    assert codec.render(document) == golden_bytes(GOLDEN)


def test_render_is_compact_ascii_one_line_without_newline():
    rendered = codec.render({"a": [1, {"b": None}], "c": "ü😀"})
    assert rendered == b'{"a": [1, {"b": null}], "c": "\\u00fc\\ud83d\\ude00"}'


def test_an_indented_file_is_accepted_and_keeps_unknown_fields_in_place():
    document = golden_snapshot()
    document = {"x_first": True, **document}
    document["messages"][0]["x_extra"] = {"kept": [1.5]}
    parsed = codec.parse(json.dumps(document, indent=2).encode(), "agent_123")
    assert codec.render(parsed) == json.dumps(document).encode()


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (lambda d: d.update(agent_id="agent_999"), "/agent_id"),
        (lambda d: d.update(schema_version=2), "/schema_version"),
        (lambda d: d.update(schema_version=True), "/schema_version"),
        (lambda d: d.update(epoch_id=-1), "/epoch_id"),
        (lambda d: d.update(last_compaction_ts="yesterday"), "/last_compaction_ts"),
        (lambda d: d.pop("epoch_id"), "/epoch_id"),
        (lambda d: d.update(messages={}), "/messages"),
        (lambda d: d["messages"][1].update(role="developer"), "/messages/1/role"),
        (lambda d: d["messages"][1].pop("video_urls"), "/messages/1/video_urls"),
        (lambda d: d["messages"][1].update(content=["x"]), "/messages/1/content"),
        (lambda d: d["messages"][1].update(image_urls=[1]), "/messages/1/image_urls"),
        (lambda d: d["messages"][1].update(tool_payload={}), "/messages/1/tool_payload"),
        (
            lambda d: d["messages"][2]["tool_payload"]["tool_calls"][0].update(name=None),
            "/messages/2/tool_payload/tool_calls/0/name",
        ),
        (
            lambda d: d["messages"][3]["tool_payload"].pop("tool_error"),
            "/messages/3/tool_payload/tool_error",
        ),
        (lambda d: d["messages"].append("hello"), "/messages/5"),
    ],
)
def test_each_fault_is_named(change, path):
    document = golden_snapshot()
    change(document)
    with pytest.raises(InvalidDocument) as raised:
        codec.parse(json.dumps(document).encode(), "agent_123")
    assert [fault_path for fault_path, _ in raised.value.errors] == [path]


def test_several_faults_are_all_reported():
    document = golden_snapshot()
    document["agent_id"] = "other"
    document["messages"][0]["role"] = "robot"
    paths = [path for path, _ in codec.faults(document, "agent_123")]
    assert paths == ["/agent_id", "/messages/0/role"]


def test_unsupported_version_says_which_version_is_read():
    document = golden_snapshot()
    document["schema_version"] = 7
    [(_, message)] = codec.faults(document, "agent_123")
    assert message == "schema_version 7 is not supported; this service reads 1"


@pytest.mark.parametrize("raw", [b"[]", b'"snapshot"', b"null"])
def test_a_non_object_is_invalid(raw):
    with pytest.raises(InvalidDocument):
        codec.parse(raw, "agent_123")


@pytest.mark.parametrize("raw", [b"{", b"\xff", b'{"a": 1e999}'])
def test_malformed_json_is_refused(raw):
    with pytest.raises(MalformedDocument):
        codec.parse(raw, "agent_123")


def test_message_has_the_seven_keys_in_message_to_dict_order():
    assert list(codec.message("user", "hi")) == list(codec.MESSAGE_KEYS)
    assert codec.message_faults(codec.message("user", "hi")) == []
