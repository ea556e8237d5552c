"""The context pack: what to inject before a feature, within a token budget (seed 004,
"Context Injection" and "Token Budget"). Pure: items in, sections and markdown out.

The budget is checked on the final markdown by the real tokenizer, never on a sum of
estimates. Over budget, the least relevant item goes first: decisions of other features
(oldest first), then failures of other features (least relevant first), then this feature's
decisions, then this feature's failures; the summary is truncated last. Active constraints are
never dropped: when they alone exceed the budget there is no valid pack.
"""

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


def render_markdown(
    feature: str | None,
    summary: str | None,
    decisions: list[Entry],
    failures: list[Entry],
    constraints: list[Entry],
) -> str:
    """``feature``: as the pack quotes it (``Pack.feature``)."""
    title = "# Project context" + (f" for {feature}" if feature else "")
    sections = [title]
    if summary:
        sections.append("## Summary\n\n" + summary)
    for heading, entries, line in (
        ("Key decisions", decisions, _decision),
        ("Failures to learn from", failures, _failure),
        ("Active constraints", constraints, _constraint),
    ):
        if entries:
            sections.append(f"## {heading}\n\n" + "\n".join(line(e.document) for e in entries))
    return "\n\n".join(sections) + "\n"


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
    """``decisions`` newest first, ``ranked_failures`` most relevant first (already capped)."""
    # The caller's query, quoted: never a secret pasted into it (it came back as it was sent).
    feature = None if feature_id is None else redact_value(feature_id)
    floor = tokens.count(render_markdown(feature, None, [], [], constraints))
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

    def size() -> int:
        pack.markdown = render_markdown(
            feature, pack.summary, pack.decisions, pack.failures, pack.constraints
        )
        pack.token_count = tokens.count(pack.markdown)
        return pack.token_count

    for section, entry in _drop_order(feature_id, decisions, ranked_failures):
        if size() <= max_tokens:
            return pack
        getattr(pack, section).remove(entry)
        pack.dropped[section] += 1
    if summary and size() > max_tokens:
        _truncate_summary(pack, summary, max_tokens, size)
    size()
    return pack


def _truncate_summary(pack: Pack, summary: str, max_tokens: int, size: Callable[[], int]) -> None:
    """The longest prefix of the summary that fits; none at all if nothing fits."""
    pack.summary_truncated = True
    allowance = tokens.count(summary) - (size() - max_tokens)
    while allowance > 0:
        pack.summary = tokens.truncate(summary, allowance) or None
        over = size() - max_tokens
        if over <= 0:
            return
        allowance -= over
    pack.summary = None
