"""A document kept as its parts: the head joined with its members is the full render, byte for
byte, for both writers (Python's indent=2 and Go's MarshalIndent), at any size, and a member
appended (or replaced) changes the size as ``size_change`` says."""

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.formats import atari_state, feature_context, parts
from tests.helpers import go_written_atari_states, golden_bytes

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
# The marker's own text, so that a document holding it is generated too.
TRICKY_TEXT = st.one_of(
    TEXT,
    st.sampled_from(["\x00context-store:parts:0\x00", '"\x00context-store:parts:0\x00"', "\n"]),
)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TRICKY_TEXT,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(TRICKY_TEXT, children, max_size=4)
    ),
    max_leaves=12,
)
NOTES = st.lists(
    st.fixed_dictionaries(
        {"timestamp": st.just("2026-01-01T00:00:00+00:00"), "from_agent": TEXT, "to_agent": TEXT},
        optional={"message": TRICKY_TEXT, "x_extra": JSON},
    ),
    max_size=6,
)


def _context(notes: list[dict[str, Any]], extra: dict[str, Any]) -> dict[str, Any]:
    """A context with ``extra``'s members, and more of them around its notes."""
    document = feature_context.template("f", "2026-01-01T00:00:00+00:00")
    document.update(extra)
    document["handover_notes"] = {"before": extra, "history": notes, "after": [1]}
    return document


@given(notes=NOTES, extra=st.dictionaries(TRICKY_TEXT, JSON, max_size=3))
@settings(max_examples=300, deadline=None)
def test_a_context_is_its_head_joined_with_its_notes(notes, extra):
    document = _context(notes, extra)
    head, members = feature_context.split(document)
    assert head.at is not None
    assert parts.join(head.content, head.at, members) == feature_context.render(document)
    # The head is the document with no notes; splitting it again finds the same place.
    empty = feature_context.split(json.loads(head.content))[0]
    assert empty == head


@given(notes=NOTES, extra=st.dictionaries(TRICKY_TEXT, JSON, max_size=3))
@settings(max_examples=200, deadline=None)
def test_appending_notes_one_by_one_grows_the_size_as_the_full_render(notes, extra):
    document = _context([], extra)
    head, _members = feature_context.split(document)
    assert head.at is not None
    size = len(head.content)
    for count, note in enumerate(notes):
        member = feature_context.note_part(note)
        size += parts.size_change(head.content, head.at, member, replaced=None, first=count == 0)
        document["handover_notes"]["history"].append(note)
        assert size == len(feature_context.render(document))


def test_a_context_without_the_array_is_all_head():
    document = feature_context.template("f", "2026-01-01T00:00:00+00:00")
    del document["handover_notes"]
    head, members = feature_context.split(document)
    assert (head.at, members) == (None, [])
    assert parts.join(head.content, head.at, members) == feature_context.render(document)


def test_the_tool_written_context_splits_and_joins_byte_for_byte():
    golden = golden_bytes("sdd-context-tool-written.json")
    head, members = feature_context.split(feature_context.parse(golden))
    assert len(members) == 2
    assert parts.join(head.content, head.at, members) == golden


ENTRIES = st.dictionaries(
    TEXT,
    st.fixed_dictionaries(
        {
            "status": TEXT,
            "attempts": st.integers(min_value=0, max_value=2**63 - 1),
            "last_attempt": st.just("2026-01-01T00:00:00.5Z"),
        },
        # Non-empty: atari omits an empty one, and a parsed state never holds it.
        optional={"last_error": TEXT.filter(bool), "last_session_id": TRICKY_TEXT.filter(bool)},
    ),
    max_size=6,
)


def _state(entries: dict[str, dict[str, Any]], extra: dict[str, Any]) -> dict[str, Any]:
    state = atari_state.fresh(datetime(2026, 1, 1, tzinfo=UTC))
    state["history"] = {bead: {"id": bead, **entry} for bead, entry in entries.items()}
    state |= {f"x_{key}": value for key, value in extra.items()}
    return state


@given(entries=ENTRIES, extra=st.dictionaries(TRICKY_TEXT, JSON, max_size=3))
@settings(max_examples=300, deadline=None)
def test_a_run_state_is_its_head_joined_with_its_entries_in_key_order(entries, extra):
    state = _state(entries, extra)
    head, members = atari_state.split(state)
    assert head.at is not None
    assert [bead for bead, _part in members] == sorted(entries)
    rendered = atari_state.render(state)
    assert parts.join(head.content, head.at, [part for _bead, part in members]) == rendered
    for bead, part in members:
        assert atari_state.entry_of_part(part) == (bead, state["history"][bead])


@given(entries=ENTRIES, extra=st.dictionaries(TRICKY_TEXT, JSON, max_size=3))
@settings(max_examples=200, deadline=None)
def test_adding_and_replacing_entries_changes_the_size_as_the_full_render(entries, extra):
    state = _state({}, extra)
    head, _members = atari_state.split(state)
    assert head.at is not None
    size = len(head.content)
    for bead, entry in entries.items():
        part = atari_state.entry_part(bead, {"id": bead, **entry})
        first = not state["history"]
        size += parts.size_change(head.content, head.at, part, replaced=None, first=first)
        state["history"][bead] = {"id": bead, **entry}
        assert size == len(atari_state.render(state))
        replaced = {**state["history"][bead], "status": entry["status"] + "-again"}
        new = atari_state.entry_part(bead, replaced)
        size += parts.size_change(head.content, head.at, new, replaced=part, first=False)
        state["history"][bead] = replaced
        assert size == len(atari_state.render(state))


@pytest.mark.parametrize("name", go_written_atari_states())
def test_every_go_written_state_splits_and_joins_byte_for_byte(name):
    golden = golden_bytes(name)
    state = atari_state.parse(golden)[0]
    head, members = atari_state.split(state)
    assert parts.join(head.content, head.at, [part for _bead, part in members]) == golden
