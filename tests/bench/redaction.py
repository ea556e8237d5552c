"""Redaction's gate candidates on a generated save of 1 and 10 MB (issue 20): what decides which
of a document's texts the patterns run on. Each candidate's time is the gate plus the patterns
on the texts it lets through (parse excluded, best of 3), and each must find everything the
patterns find on every text (checked here on the same save).

    .venv/bin/python -m tests.bench.redaction

The candidates of the ``bench`` extra (pyahocorasick, detect-secrets) are skipped when absent.
Not run by ``make test``; the figures are in the README's Redaction section.
"""

import json
import re
import time
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable
from itertools import accumulate
from typing import Any

from app import redaction
from tests.bench.documents import mdan_save

SIZES = (1_000_000, 10_000_000)
ROUNDS = 3

# A gate: texts -> {index of a text the patterns must see: the kinds to run on it}.
Gate = Callable[[list[str]], dict[int, set[str]]]
ALL_KINDS = set(redaction._KINDS)

# The literal text every match of a kind holds, case-folded: the gate before Hyperscan.
LITERALS: dict[str, tuple[str, ...]] = {
    "private_key": ("-----begin",),
    "jwt": ("eyj",),
    "api_key": (
        *("sk-", "sk_", "rk_", "gh", "github_pat_", "glpat-", "xox", "aiza", "hf_", "xai-"),
        *("npm_", "sg."),
    ),
    "cloud_access_key": (
        *("akia", "asia", "agpa", "aida", "aroa", "anpa", "anva", "aipa"),
        *("aws_s", "accountkey", "accesskey"),
    ),
    "bearer_token": ("bearer",),
    "basic_auth": ("basic",),
    "url_credential": ("://",),
    "password": ("pass", "pwd", "secret", "api", "token", "key", "credential", "authorization"),
}


def _fold(text: str) -> str:
    return text.casefold().replace("\u0131", "i")


def no_gate(texts: list[str]) -> dict[int, set[str]]:
    return dict.fromkeys(range(len(texts)), ALL_KINDS)


def literals_in_python(texts: list[str]) -> dict[int, set[str]]:
    """Each kind's literals searched in each case-folded text (the release before)."""
    found = {}
    for index, text in enumerate(texts):
        folded = _fold(text)
        kinds = {kind for kind, words in LITERALS.items() if any(map(folded.__contains__, words))}
        if kinds:
            found[index] = kinds
    return found


def _joined_ends(lengths: Iterable[int]) -> list[int]:
    """Where each text ends (its newline included) in the texts joined by newlines."""
    return list(accumulate(length + 1 for length in lengths))


def heads_in_python_re(texts: list[str]) -> dict[int, set[str]]:
    """One combined pass of Python's re: the gate's heads as one bytes pattern (a named group
    a kind) over the texts joined."""
    data = "\n".join(texts).encode("utf-8", "surrogatepass")
    ends = _joined_ends(len(text.encode("utf-8", "surrogatepass")) for text in texts)
    found: dict[int, set[str]] = {}
    for match in COMBINED.finditer(data):
        kind = match.lastgroup
        assert kind is not None
        found.setdefault(bisect_right(ends, match.start()), set()).add(kind)
    return found


COMBINED = re.compile(
    "|".join(f"(?P<{kind}>{head})" for kind, head in redaction._HEADS.items()).encode()
)


def literals_in_aho_corasick() -> Gate | None:
    """Every kind's literals in one pyahocorasick automaton over the texts joined and
    case-folded (folding changes lengths: a text's end is found from its own folded length)."""
    try:
        import ahocorasick
    except ImportError:
        return None
    automaton = ahocorasick.Automaton()
    for kind, words in LITERALS.items():
        for word in words:
            kinds = automaton.get(word, set()) if automaton.exists(word) else set()
            automaton.add_word(word, kinds | {kind})
    automaton.make_automaton()

    def gate(texts: list[str]) -> dict[int, set[str]]:
        folded = [_fold(text) for text in texts]
        ends = _joined_ends(map(len, folded))
        found: dict[int, set[str]] = {}
        for end, kinds in automaton.iter("\n".join(folded)):
            found.setdefault(bisect_right(ends, end), set()).update(kinds)
        return found

    return gate


def heads_in_hyperscan(texts: list[str]) -> dict[int, set[str]]:
    """The gate kept: ``app.redaction._found_kinds``."""
    return redaction._found_kinds(texts)


def _redacted(texts: list[str], gate: Gate) -> tuple[list[str], int]:
    found = gate(texts)
    out = list(texts)
    for index, kinds in found.items():
        out[index] = redaction._redact_found(texts[index], kinds, Counter())
    return out, len(found)


def _best_ms(run: Callable[[], Any]) -> float:
    best = float("inf")
    for _round in range(ROUNDS):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best * 1000


def _detect_secrets(raw: bytes) -> Callable[[], int] | None:
    try:
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import default_settings
    except ImportError:
        return None
    lines = raw.decode().splitlines()

    def scan() -> int:
        with default_settings():
            return sum(1 for line in lines for _secret in scan_line(line))

    return scan


def main() -> None:
    candidates: dict[str, Gate | None] = {
        "no gate (every pattern on every text)": no_gate,
        "literals, Python `in` on folded text": literals_in_python,
        "heads, one Python `re` pass": heads_in_python_re,
        "literals, pyahocorasick": literals_in_aho_corasick(),
        "heads, Hyperscan (kept)": heads_in_hyperscan,
    }
    for size in SIZES:
        raw = mdan_save(size)
        found = redaction._texts(json.loads(raw))
        texts = found.values + list(found.keys)
        expected, _ = _redacted(texts, no_gate)
        label = f"{size // 1_000_000} MB"
        for name, gate in candidates.items():
            if gate is None:
                print(f"{label} {name}: not installed")
                continue
            if gate is no_gate and size > SIZES[0]:
                continue  # minutes; the 1 MB figure says enough
            redacted, flagged = _redacted(texts, gate)
            took = _best_ms(lambda gate=gate, texts=texts: _redacted(texts, gate))
            same = "finds everything" if redacted == expected else "**misses secrets**"
            print(f"{label} {name}: {took:.1f} ms, {flagged} of {len(texts)} texts, {same}")
        walk = _best_ms(
            lambda raw=raw: redaction.redact_document(json.loads(raw), redaction.Redactions())
        )
        loads = _best_ms(lambda raw=raw: json.loads(raw))
        print(f"{label} redact_document (the walk too): {walk - loads:.1f} ms")
        scan = _detect_secrets(raw)
        if scan is not None and size == SIZES[0]:  # 10 MB takes minutes
            started = time.perf_counter()
            found = scan()
            took = (time.perf_counter() - started) * 1000
            print(f"{label} detect-secrets (its default plugins): {took:.0f} ms, {found} findings")


if __name__ == "__main__":
    main()
