"""The context pack: what to inject before a feature, within a token budget (seed 004,
"Context Injection" and "Token Budget"). Pure: items in, sections and markdown out.

The budget is checked by the real tokenizer on the markdown, counted in pieces whose counts
add up to the whole's exactly (see ``_LINE_START``), never on a sum of estimates. Over budget,
the least relevant item goes first: decisions of other features (oldest first), then failures
of other features (least relevant first), then this feature's decisions, then this feature's
failures; the summary is truncated last. Active constraints are never dropped: when they alone
exceed the budget there is no valid pack.
"""

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from app.formats.project_memory import field as doc_field
from app.memory import tokens
from app.redaction import redact_value

MAX_DECISIONS = 10
MAX_FAILURES = 5
_WORD = re.compile(r"\w+")


class ConstraintsOverBudget(Exception):
    """The active constraints, which a pack must hold every one of, exceed its budget."""

    def __init__(self, constraints: int, needed: int, max_tokens: int) -> None:
        super().__init__(f"the {constraints} active constraints alone take {needed} tokens")
        self.constraints = constraints
        self.needed = needed
        self.max_tokens = max_tokens


@dataclass(frozen=True)
class Entry:
    """One item offered to the pack: its document and what ranking needs."""

    document: dict[str, Any]
    feature_id: str | None
    timestamp: int
    search_text: str


@dataclass
class Pack:
    summary: str | None
    summary_truncated: bool
    decisions: list[Entry]
    failures: list[Entry]
    constraints: list[Entry]
    dropped: dict[str, int] = field(default_factory=dict)
    markdown: str = ""
    token_count: int = 0
    # The feature as the pack quotes it (its title, the answer): the caller's query, redacted.
    feature: str | None = None


class Rankable(Protocol):
    """What ranking reads of a failure: an ``Entry``, or a row of its columns alone."""

    @property
    def feature_id(self) -> str | None: ...

    @property
    def timestamp(self) -> int: ...

    @property
    def search_text(self) -> str: ...


RankableT = TypeVar("RankableT", bound=Rankable)


# In ASCII text a word (``\w``) is a run of letters, digits and "_": every other byte becomes a
# space and every capital its small letter, then the text is split, all in C (a third of the
# regular expression's time on the pack's candidates, which are mostly ASCII).
_ASCII_WORDS = (
    bytes(
        ord(chr(byte).lower()) if chr(byte).isalnum() or chr(byte) == "_" else ord(" ")
        for byte in range(128)
    )
    + b" " * 128
)


def _words(text: str) -> set[str]:
    """The text's words (``\\w+``), in small letters."""
    if text.isascii():
        return set(text.encode("ascii").translate(_ASCII_WORDS).decode("ascii").split())
    return set(map(str.lower, _WORD.findall(text)))


def rank_failures(
    failures: Sequence[RankableT], feature_id: str | None, about: str
) -> list[RankableT]:
    """Most relevant first: the feature's own failures, then by word overlap (Jaccard) with
    ``about`` (text describing the feature), then the newest."""
    reference = _words(about)

    def similarity(text: str) -> float:
        words = _words(text)
        shared = len(words & reference)
        # The union's size, without making the union: a pack ranks up to a thousand.
        union = len(words) + len(reference) - shared
        return shared / union if union else 0.0

    return sorted(
        failures,
        key=lambda e: (
            feature_id is not None and e.feature_id == feature_id,
            similarity(e.search_text),
            e.timestamp,
        ),
        reverse=True,
    )


def _text(document: dict[str, Any], name: str) -> str:
    value = doc_field(document, name)
    if isinstance(value, list):
        return "; ".join(str(v) for v in value)
    return "" if value is None else str(value)


def _tags(*values: str) -> str:
    shown = [value for value in values if value]
    return f" ({', '.join(shown)})" if shown else ""


def _item(head: str, tags: str, details: list[tuple[str, str]]) -> str:
    lines = [f"- {head}{tags}"]
    lines += [f"  - {label}: {value}" for label, value in details if value]
    return "\n".join(lines)


def _decision(d: dict[str, Any]) -> str:
    return _item(
        _text(d, "decision"),
        _tags(_text(d, "id"), _text(d, "featureId"), _text(d, "category")),
        [("Rationale", _text(d, "rationale")), ("Impact", _text(d, "impact"))],
    )


def _failure(f: dict[str, Any]) -> str:
    return _item(
        _text(f, "description"),
        _tags(_text(f, "id"), _text(f, "featureId"), _text(f, "severity")),
        [
            ("Root cause", _text(f, "rootCause")),
            ("Resolution", _text(f, "resolution")),
            ("Prevention", _text(f, "prevention")),
        ],
    )


def _expiry(c: dict[str, Any]) -> str:
    expires = doc_field(c, "expiresAt")
    if not isinstance(expires, int) or isinstance(expires, bool):
        return ""
    try:
        return datetime.fromtimestamp(expires / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")
    except (OverflowError, OSError, ValueError):
        return str(expires)


def _constraint(c: dict[str, Any]) -> str:
    return _item(
        _text(c, "description"),
        _tags(_text(c, "id"), _text(c, "type")),
        [
            ("Reason", _text(c, "reason")),
            ("Affects", _text(c, "affectedAreas")),
            ("Expires", _expiry(c)),
        ],
    )


# Why counting the markdown in pieces gives its count exactly. cl100k_base (tiktoken's pattern,
# which toktok follows) first splits a text by a regular expression, then BPE merges within
# each split only: a text's count is the sum of its splits' counts. No split holds a line break
# followed by a character that is not white space (the alternatives that match a line break
# match white space alone, or punctuation then line breaks), so such a pair always separates
# two splits, and those on each side are the side's own: the expression never looks back, and
# the split that ends at the line break ends there whether the text goes on or not (white space
# ending in a line break is taken by "\s*[\r\n]+", tried before "\s+(?!\S)", which looks ahead).
# So count(a + b) == count(a) + count(b) when ``a`` ends with "\n" and ``b`` begins with a
# character that is not white space. The markdown is cut only there: before each section (at
# "#"), before each item but a section's first (at "-"), and in the summary where one of its
# lines begins so (Python's \S is narrower than the tokenizer's: \x1c-\x1f are white space to
# it). test_pack checks the sum against a count of the whole on texts made to break it.
_LINE_START = re.compile(r"\n(?=\S)")
_LAST_LINE_START = re.compile(r".*\n(?=\S)", re.DOTALL)


@dataclass(frozen=True)
class Section:
    """A heading and its lines, joined by line breaks: each line after the first begins with
    a character that is not white space, where the markdown may be cut for counting."""

    heading: str
    lines: Sequence[str] = ()


def _summary_lines(summary: str) -> list[str]:
    """The summary as its first line, its middle and its last line, joined by line breaks
    where a line begins with a character that is not white space (at most three: counting a
    summary of megabytes one line at a time would cost more)."""
    first = _LINE_START.search(summary)
    if first is None:
        return [summary]
    last = _LAST_LINE_START.match(summary, first.end())
    if last is None:
        return [summary[: first.start()], summary[first.end() :]]
    return [
        summary[: first.start()],
        summary[first.end() : last.end() - 1],
        summary[last.end() :],
    ]


def _sections(
    feature: str | None,
    summary: list[str],
    decisions: list[str],
    failures: list[str],
    constraints: list[str],
) -> list[Section]:
    """``feature``: as the pack quotes it (``Pack.feature``); the summary as its
    ``_summary_lines``, items as their rendered lines."""
    title = Section("# Project context" + (f" for {feature}" if feature else ""))
    candidates = [
        Section("## Summary", summary),
        Section("## Key decisions", decisions),
        Section("## Failures to learn from", failures),
        Section("## Active constraints", constraints),
    ]
    return [title, *(section for section in candidates if section.lines)]


def render_markdown(sections: list[Section]) -> str:
    return (
        "\n\n".join(
            f"{section.heading}\n\n" + "\n".join(section.lines)
            if section.lines
            else section.heading
            for section in sections
        )
        + "\n"
    )


class _PieceCounts:
    """Token counts of the markdown's pieces, each counted once however many of the cut's steps
    hold it. A piece is known by the texts it is made of, whose hashes Python keeps: a
    summary of megabytes is neither joined nor hashed again at each step."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, ...], int] = {}

    def __call__(self, *parts: str) -> int:
        known = self._known.get(parts)
        if known is None:
            known = self._known[parts] = tokens.count("".join(parts))
        return known


def _lines_tokens(pieces: list[tuple[str, ...]], end: str, counts: _PieceCounts) -> int:
    """The tokens of ``pieces`` joined by line breaks, then ``end``: cut where each piece after
    the first begins (see ``_LINE_START``)."""
    *before, last = pieces
    return sum(counts(*piece, "\n") for piece in before) + counts(*last, end)


def _markdown_tokens(sections: list[Section], counts: _PieceCounts) -> int:
    """``tokens.count(render_markdown(sections))``, cut before each section and each line but
    the first of a section."""
    total = 0
    for n, section in enumerate(sections):
        end = "\n" if n == len(sections) - 1 else "\n\n"
        if not section.lines:
            total += counts(section.heading, end)
            continue
        first, *rest = section.lines
        pieces = [(section.heading, "\n\n", first), *((line,) for line in rest)]
        total += _lines_tokens(pieces, end, counts)
    return total


def _drop_order(
    feature_id: str | None, decisions: list[Entry], failures: list[Entry]
) -> list[tuple[str, Entry]]:
    def own(entry: Entry) -> bool:
        return feature_id is not None and entry.feature_id == feature_id

    oldest_first = sorted(decisions, key=lambda e: e.timestamp)
    least_relevant_first = list(reversed(failures))
    return (
        [("decisions", e) for e in oldest_first if not own(e)]
        + [("failures", e) for e in least_relevant_first if not own(e)]
        + [("decisions", e) for e in oldest_first if own(e)]
        + [("failures", e) for e in least_relevant_first if own(e)]
    )


def build(
    feature_id: str | None,
    summary: str | None,
    decisions: list[Entry],
    ranked_failures: list[Entry],
    constraints: list[Entry],
    max_tokens: int,
) -> Pack:
    """``decisions`` newest first, ``ranked_failures`` most relevant first (already capped).

    Each step of the cut counts the markdown it would give from its pieces' counts, each
    counted once (``_markdown_tokens``), and the markdown is rendered once, at the end: the
    same pack, and the same count, as rendering and counting the whole markdown at each step,
    which cost a count of a summary of megabytes at each item dropped."""
    # The caller's query, quoted: never a secret pasted into it (it came back as it was sent).
    feature = None if feature_id is None else redact_value(feature_id)
    counts = _PieceCounts()
    # Rendered once each; the steps keep the pack's lists, which hold these same entries.
    lines = {
        "decisions": {id(e): _decision(e.document) for e in decisions},
        "failures": {id(e): _failure(e.document) for e in ranked_failures},
    }
    constraint_lines = [_constraint(c.document) for c in constraints]
    # Split once for each summary tried: a slice of megabytes is copied, and hashed when counted.
    summary_lines = functools.cache(_summary_lines)
    floor = _markdown_tokens(_sections(feature, [], [], [], constraint_lines), counts)
    if floor > max_tokens:
        raise ConstraintsOverBudget(len(constraints), floor, max_tokens)
    pack = Pack(
        summary,
        False,
        list(decisions),
        list(ranked_failures),
        list(constraints),
        {"decisions": 0, "failures": 0},
        feature=feature,
    )

    def sections() -> list[Section]:
        return _sections(
            feature,
            summary_lines(pack.summary) if pack.summary else [],
            [lines["decisions"][id(e)] for e in pack.decisions],
            [lines["failures"][id(e)] for e in pack.failures],
            constraint_lines,
        )

    def size() -> int:
        return _markdown_tokens(sections(), counts)

    for section, entry in _drop_order(feature_id, decisions, ranked_failures):
        if size() <= max_tokens:
            break
        getattr(pack, section).remove(entry)
        pack.dropped[section] += 1
    else:  # every item dropped, and still over
        if summary and size() > max_tokens:
            _truncate_summary(pack, summary, summary_lines(summary), max_tokens, size, counts)
    pack.markdown = render_markdown(sections())
    pack.token_count = size()
    return pack


def _truncate_summary(
    pack: Pack,
    summary: str,
    lines: list[str],
    max_tokens: int,
    size: Callable[[], int],
    counts: _PieceCounts,
) -> None:
    """The longest prefix of the summary that fits; none at all if nothing fits. ``lines``:
    the summary's ``_summary_lines``."""
    pack.summary_truncated = True
    # The summary's own count, from its lines: the middle's is the one the markdown's holds.
    alone = _lines_tokens([(line,) for line in lines], "", counts)
    allowance = alone - (size() - max_tokens)
    cut_from = summary
    while allowance > 0:
        pack.summary = tokens.truncate(cut_from, allowance) or None
        over = size() - max_tokens
        if over <= 0:
            return
        allowance -= over
        # Each later try keeps fewer tokens, all within this prefix: the text up to the first
        # line that begins after it is cut as the whole summary is (its tokens are the
        # summary's, as above), and is all the tokenizer need read.
        after = _LINE_START.search(summary, max(len(pack.summary or "") - 1, 0))
        cut_from = summary if after is None else summary[: after.start() + 1]
    pack.summary = None
