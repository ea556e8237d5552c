"""The atari run state codec: strict reading, and writing as Go's json.MarshalIndent does.

The golden outputs were written by Go's encoding/json from the same inputs.
"""

import json
from datetime import UTC, datetime

import pytest

from app.formats import atari_state, jsondoc
from app.formats.errors import MAX_LISTED, InvalidDocument, MalformedDocument
from tests.helpers import go_written_atari_states, golden_bytes


def _state(**changes: object) -> dict:
    document = json.loads(golden_bytes("atari-state-seed-example.json"))
    document.update(changes)
    return document


def _parse(document: object) -> dict:
    return atari_state.parse(json.dumps(document).encode())[0]


def _faults(raw: bytes) -> list[tuple[str, str]]:
    with pytest.raises(InvalidDocument) as caught:
        atari_state.parse(raw)
    return caught.value.errors


def test_the_seed_example_is_written_back_byte_for_byte():
    raw = golden_bytes("atari-state-seed-example.json")
    state, notes = atari_state.parse(raw)
    assert atari_state.render(state) == raw
    assert notes == []


def test_a_version_2_document_is_written_as_go_writes_it():
    state, _ = atari_state.parse(golden_bytes("atari-state-v2-input.json"))
    assert atari_state.render(state) == golden_bytes("atari-state-v2.json")


def test_rendering_is_stable():
    expected = golden_bytes("atari-state-v2.json")
    assert atari_state.render(atari_state.parse(expected)[0]) == expected


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("<a href='x'>&amp;</a>", "\"\\u003ca href='x'\\u003e\\u0026amp;\\u003c/a\\u003e\""),
        ("line\u2028para\u2029", '"line\\u2028para\\u2029"'),
        ("tab\tnl\ncr\rbs\bff\f", '"tab\\tnl\\ncr\\rbs\\bff\\f"'),
        ("\x00\x01\x1f\x7f", '"\\u0000\\u0001\\u001f\x7f"'),
        ('quote" back\\ slash/', '"quote\\" back\\\\ slash/"'),
        ("ünïcødé 中文 😀", '"ünïcødé 中文 😀"'),
    ],
)
def test_strings_are_escaped_as_go_escapes_them(text, written):
    assert atari_state.go_string(text) == written


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (1.25, "1.25"),
        (0.0, "0"),
        (-0.0, "-0"),
        (2.0, "2"),
        (100.0, "100"),
        (0.1 + 0.2, "0.30000000000000004"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1.5e300, "1.5e+300"),
        (0.000001, "0.000001"),
        (1e-7, "1e-7"),
        (1.25e-10, "1.25e-10"),
        (5e-324, "5e-324"),
        (-123456.789, "-123456.789"),
    ],
)
def test_floats_are_written_as_go_writes_float64(value, written):
    assert atari_state.go_float(value) == written


def test_history_keys_are_sorted_and_fields_take_struct_order():
    history = {
        key: {"last_attempt": "2024-01-15T10:30:00Z", "attempts": 1, "status": "working", "id": key}
        for key in ("b", "a", "é", "Z")
    }
    written = atari_state.render(_parse(_state(history=history))).decode()
    assert [line.strip() for line in written.splitlines() if line.startswith('    "')] == [
        '"Z": {',
        '"a": {',
        '"b": {',
        '"é": {',
    ]
    assert '"id": "a",\n      "status": "working",\n      "attempts": 1,' in written


def test_unknown_fields_are_kept_after_the_known_ones_in_their_order():
    document = {"x_later": [1.50, {"b": None, "a": True}], **_state(), "x_first": "kept <&>"}
    document["history"]["bd-001"]["x_note"] = 1e2
    written = atari_state.render(_parse(document)).decode()
    assert written.endswith(
        '"active_top_level_title": "Feature Epic",\n'
        '  "x_later": [\n    1.5,\n    {\n      "b": null,\n      "a": true\n    }\n  ],\n'
        '  "x_first": "kept \\u003c\\u0026\\u003e"\n}'
    )
    assert '"last_session_id": "sess-abc123",\n      "x_note": 100.0\n' in written


def test_unknown_numbers_keep_their_literal():
    raw = golden_bytes("atari-state-seed-example.json")[:-1] + b',\n  "x": 1.50e+3\n}'
    assert atari_state.render(atari_state.parse(raw)[0]).endswith(b'"x": 1.50e+3\n}')


@pytest.mark.parametrize("name", go_written_atari_states())
def test_every_state_go_wrote_is_read_without_notes_and_written_back(name):
    raw = golden_bytes(name)
    state, notes = atari_state.parse(raw)
    assert notes == [] and atari_state.render(state) == raw


def test_a_version_2_state_is_written_with_the_zero_stall_time_when_nothing_is_stalled():
    state, notes = atari_state.parse(json.dumps(_state(version=2)).encode())
    assert "stalled_at" not in state
    assert notes == [
        atari_state.Note(
            "/stalled_at", "missing; atari writes Go's zero value, 0001-01-01T00:00:00Z"
        )
    ]
    written = atari_state.render(state)
    assert written.endswith(b'"Feature Epic",\n  "stalled_at": "0001-01-01T00:00:00Z"\n}')


def test_a_version_1_state_has_no_stall_time():
    state, notes = atari_state.parse(json.dumps(_state(stalled_at=None)).encode())
    assert notes == [atari_state.Note("/stalled_at", "null; atari omits it")]
    assert b"stalled_at" not in atari_state.render(state)


def test_an_omitempty_field_may_be_null_as_go_reads_it():
    state, notes = atari_state.parse(json.dumps(_state(current_bead=None)).encode())
    assert "current_bead" not in state
    assert notes == [atari_state.Note("/current_bead", "null; atari omits it")]


def test_empty_omitempty_fields_are_dropped_and_noted():
    state, notes = atari_state.parse(json.dumps(_state(current_bead="", created_beads=[])).encode())
    assert "current_bead" not in state and "created_beads" not in state
    assert notes == [
        atari_state.Note("/current_bead", "empty; atari omits it"),
        atari_state.Note("/created_beads", "empty; atari omits it"),
    ]


def test_a_float_total_cost_written_as_an_integer_is_a_float():
    assert b'"total_cost": 2,' in atari_state.render(_parse(_state(total_cost=2)))


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"iteration": 1.0}, "/iteration"),
        ({"iteration": "5"}, "/iteration"),
        ({"iteration": 2**63}, "/iteration"),
        ({"total_turns": True}, "/total_turns"),
        ({"total_cost": "1.25"}, "/total_cost"),
        ({"status": 3}, "/status"),
        ({"status": None}, "/status"),
        ({"updated_at": "2024-01-15 11:05:00Z"}, "/updated_at"),
        ({"updated_at": "2024-02-30T11:05:00Z"}, "/updated_at"),
        ({"updated_at": "2024-01-15T24:05:00Z"}, "/updated_at"),
        ({"updated_at": "2024-01-15T11:05:00+24:00"}, "/updated_at"),
        ({"stalled_at": "yesterday"}, "/stalled_at"),
        ({"created_beads": ["a", 1]}, "/created_beads/1"),
        ({"history": []}, "/history"),
        ({"history": {"bd-1": {"id": "bd-1"}}}, "/history/bd-1/status"),
        ({"Version": 2}, "/Version"),
    ],
)
def test_values_go_cannot_read_into_the_struct_are_refused(change, path):
    assert path in [where for where, _ in _faults(json.dumps(_state(**change)).encode())]


def test_every_missing_field_is_named():
    faults = _faults(b'{"version": 2}')
    assert [path for path, _ in faults] == [
        "/status",
        "/iteration",
        "/history",
        "/total_cost",
        "/total_turns",
        "/updated_at",
    ]


@pytest.mark.parametrize("version", [0, 3, -1])
def test_versions_other_than_1_and_2_are_refused(version):
    assert _faults(json.dumps(_state(version=version)).encode()) == [("/version", "must be 1 or 2")]


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"{",
        b"\xef\xbb\xbf{}",
        b"\xff\xfe{\x00}\x00",
        b'{"version": NaN}',
        b"[" * 100000,
    ],
)
def test_bytes_that_are_not_json_as_go_reads_it_are_malformed(raw):
    with pytest.raises(MalformedDocument):
        atari_state.parse(raw)


def test_duplicate_keys_and_lone_surrogates_are_refused():
    assert _faults(b'{"version": 1, "version": 2}')[0][1] == "duplicate key 'version'"
    raw = json.dumps(_state(status="\ud800")).encode()
    assert ("/status", "contains a lone surrogate, which is not text") in _faults(raw)


def test_huge_floats_are_refused():
    raw = golden_bytes("atari-state-seed-example.json").replace(b"1.25", b"1e400")
    assert [path for path, _ in _faults(raw)] == ["/total_cost"]


def test_reading_as_go_does_fills_zero_values_and_notes_them():
    state, notes = atari_state.read(
        atari_state.decode(b'{"status": null, "history": {}}'), zero_missing=True
    )
    assert (
        state["version"] == 0
        and state["status"] == ""
        and state["updated_at"] == ("0001-01-01T00:00:00Z")
    )
    assert notes[0] == atari_state.Note("/status", "null; Go's zero value used")
    assert atari_state.Note("/version", "missing; Go's zero value used") in notes


def test_version_1_migrates_to_2_keeping_everything_else():
    state = _parse(_state(x_extra="kept"))
    assert atari_state.migrate(state) == {**state, "version": 2}


def test_a_migrated_state_is_written_as_go_writes_it_with_the_zero_stall_time():
    seed = golden_bytes("atari-state-seed-example.json")
    migrated = atari_state.migrate(atari_state.parse(seed)[0])
    assert atari_state.render(migrated) == golden_bytes("atari/seed-migrated.json")


def test_a_fresh_state_is_version_2_and_empty():
    moment = datetime(2025, 1, 2, 3, 4, 5, 120000, tzinfo=UTC)
    assert atari_state.render(atari_state.fresh(moment)) == (
        b'{\n  "version": 2,\n  "status": "",\n  "iteration": 0,\n  "history": {},\n'
        b'  "total_cost": 0,\n  "total_turns": 0,\n  "updated_at": "2025-01-02T03:04:05.12Z",\n'
        b'  "stalled_at": "0001-01-01T00:00:00Z"\n}'
    )


def test_go_time_writes_utc_with_z_and_trims_the_fraction():
    assert atari_state.go_time(datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2025-01-02T03:04:05Z"
    assert atari_state.is_rfc3339(atari_state.go_time(datetime.now(UTC)))


def test_notes_past_the_listed_are_not_made(monkeypatch):
    """A load of many entries Go would zero keeps the first ``MAX_LISTED`` notes and says there
    were more; the pointers of the others are never built (they were half of such a load's
    CPU: 100,000 empty history entries, 2026-11-27)."""
    built = []

    def counted(*parts: str) -> str:
        built.append(parts)
        return jsondoc.pointer(*parts)

    monkeypatch.setattr(atari_state, "pointer", counted)
    raw = json.dumps({"version": 2, "history": {f"b-{n}": {} for n in range(1_000)}}).encode()
    loaded = atari_state.load(raw, datetime(2026, 1, 1, tzinfo=UTC))
    assert len(loaded.notes) == MAX_LISTED and loaded.notes.more
    assert len(built) == MAX_LISTED
