"""The MDAN-AUTO save codec on its own: no server, no database."""

import json
from datetime import UTC, datetime

import pytest

from app.formats import jsondoc, mdan_save
from app.formats.errors import MAX_LISTED, InvalidDocument, MalformedDocument
from app.formats.jsondoc import pointer
from tests.helpers import golden_bytes, python_indent2, seed_save

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def test_the_seed_example_parses_without_warnings_and_renders_as_python_does():
    document, warnings = mdan_save.parse(golden_bytes("mdan-save-seed-example.json"), NOW)
    assert warnings == []
    assert mdan_save.render(document) == python_indent2(seed_save())


def test_render_expands_arrays_and_escapes_non_ascii():
    rendered = mdan_save.render({"a": ["x", "y"], "b": "ü€😀"})
    assert (
        rendered
        == b'{\n  "a": [\n    "x",\n    "y"\n  ],\n  "b": "\\u00fc\\u20ac\\ud83d\\ude00"\n}'
    )


def test_missing_fields_get_documented_defaults_and_one_warning_each():
    document = seed_save()
    del document["configuration"]["token_limit"]
    del document["configuration"]["fail_fast"]
    del document["debates"]
    parsed, warnings = mdan_save.parse(python_indent2(document), NOW)
    assert parsed["configuration"]["token_limit"] == 128000
    assert parsed["configuration"]["fail_fast"] is True
    assert parsed["debates"] == []
    assert [w.path for w in warnings] == [
        "/debates",
        "/configuration/token_limit",
        "/configuration/fail_fast",
    ]
    # Filled in at the end of their object; everything else stays where it was.
    assert list(parsed["configuration"])[-2:] == ["token_limit", "fail_fast"]


def test_invalid_fields_are_replaced_in_place_with_a_warning():
    document = seed_save()
    document["configuration"]["save_threshold"] = "high"
    document["phases"]["status"]["TEST"] = "maybe"
    document["timestamp"] = "yesterday"
    parsed, warnings = mdan_save.parse(python_indent2(document), NOW)
    assert parsed["configuration"]["save_threshold"] == 0.8
    assert list(parsed["configuration"]).index("save_threshold") == 1
    assert parsed["phases"]["status"]["TEST"] == "pending"
    assert parsed["timestamp"] == "2026-01-02T03:04:05Z"
    assert {w.path for w in warnings} == {
        "/timestamp",
        "/configuration/save_threshold",
        "/phases/status/TEST",
    }


def test_an_empty_object_becomes_a_complete_save():
    parsed, warnings = mdan_save.parse(b"{}", NOW)
    assert parsed["version"] == "1.0" and parsed["configuration"]["log_level"] == "INFO"
    assert parsed["metadata"] == {
        "created_at": "2026-01-02T03:04:05Z",
        "updated_at": "2026-01-02T03:04:05Z",
        "save_count": 1,
        "resume_count": 0,
    }
    # Every documented field: 11 top-level, 3 project, 3 phases, 4 context, 3 token usage,
    # 6 configuration, 4 metadata.
    assert len(warnings) == len({w.path for w in warnings}) == 34


def test_unknown_fields_survive_in_place():
    text = (
        b'{"x_first": 1, "version": "1.0", "context": {"token_usage": {"total": 5, "extra": [1]},'
        b' "mystery": {"deep": true}}, "z_last": null}'
    )
    parsed, _ = mdan_save.parse(text, NOW)
    assert list(parsed)[:2] == ["x_first", "version"]
    assert parsed["context"]["mystery"] == {"deep": True}
    assert parsed["context"]["token_usage"]["extra"] == [1]
    assert "z_last" in parsed and parsed["z_last"] is None


@pytest.mark.parametrize("version", ["2.0", "1", 1.0, None, ""])
def test_another_version_is_refused(version):
    with pytest.raises(InvalidDocument) as refused:
        mdan_save.parse(json.dumps({"version": version}).encode(), NOW)
    assert refused.value.errors[0][0] == "/version"


@pytest.mark.parametrize("raw", [b"[]", b'"save"', b"42", b"null"])
def test_a_document_that_is_not_an_object_is_refused(raw):
    with pytest.raises(InvalidDocument):
        mdan_save.parse(raw, NOW)


# 1e999 is no number Python's json writes (it writes an infinity as Infinity).
@pytest.mark.parametrize("raw", [b"{", b"", b"{'a': 1}", b"\xff\xfe{}", b'{"a": 1e999}'])
def test_malformed_bytes_are_refused(raw):
    with pytest.raises(MalformedDocument):
        mdan_save.parse(raw, NOW)


def test_numbers_python_writes_are_kept_and_left_out_of_the_columns():
    document = seed_save()
    document["metadata"]["save_count"] = 2**70
    document["context"]["token_usage"]["total"] = 10**400
    document["context"]["token_usage"]["limit"] = float("inf")
    document["context"]["token_usage"]["percentage"] = float("nan")
    raw = python_indent2(document)
    parsed, warnings = mdan_save.parse(raw, NOW)
    assert warnings == []
    assert mdan_save.render(parsed) == raw
    summary = mdan_save.summarize(parsed, 512)
    assert (summary.save_count, summary.token_total, summary.token_limit) == (None, None, None)
    assert summary.token_percentage is None and summary.resume_count == 0
    assert {w.path for w in summary.unlisted} == {
        "/metadata/save_count",
        "/context/token_usage/total",
        "/context/token_usage/limit",
        "/context/token_usage/percentage",
    }


def test_a_missing_percentage_of_integers_no_float_divides_is_the_default():
    document = seed_save()
    document["context"]["token_usage"] = {"total": 10**400, "limit": 3}
    parsed, _warnings = mdan_save.parse(python_indent2(document), NOW)
    assert parsed["context"]["token_usage"]["percentage"] == 0.0


def test_filename_is_the_unix_seconds_of_the_timestamp():
    summary = mdan_save.summarize(mdan_save.parse(python_indent2(seed_save()), NOW)[0], 512)
    assert mdan_save.filename_for(summary.timestamp) == "mdan-save-1705314225.json"
    assert summary.current_phase == "IMPLEMENT" and not summary.all_phases_complete


def test_warnings_past_the_listed_are_not_made(monkeypatch):
    """A save of many wrong phase statuses keeps the first ``MAX_LISTED`` warnings and says
    there were more; the pointers and texts of the others are never made."""
    built = []

    def counted(*parts: str) -> str:
        built.append(parts)
        return pointer(*parts)

    monkeypatch.setattr(jsondoc, "pointer", counted)
    statuses = {f"phase-{n}": "bogus" for n in range(1_000)}
    raw = json.dumps(seed_save() | {"phases": {"status": statuses}}).encode()
    _document, warnings = mdan_save.parse(raw, datetime(2026, 1, 1, tzinfo=UTC))
    assert len(warnings) == MAX_LISTED and warnings.more
    kept = [warning for warning in warnings if warning.path.startswith("/phases/status/")]
    assert len([parts for parts in built if parts[-1].startswith("phase-")]) == len(kept)
