"""The context pack's budget and ranking, without a database."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.memory import pack, tokens
from app.memory.pack import Entry
from app.memory.repository import RANKED_CHARACTERS


def _decision(n: int, feature: str) -> Entry:
    document = {
        "id": f"dec-{n:03d}",
        "featureId": feature,
        "decision": f"Decision {n}: use approach {n} for the storage layer and its callers",
        "rationale": "Because it keeps the service simple " * 3,
        "impact": ["every module", "the migrations"],
        "timestamp": 1_000 + n,
        "category": "architecture",
    }
    return Entry(document, feature, 1_000 + n, document["decision"])


def _failure(n: int, feature: str, text: str = "the build broke") -> Entry:
    document = {
        "id": f"fail-{n:03d}",
        "featureId": feature,
        "description": f"Failure {n}: {text}",
        "rootCause": "a missing default " * 4,
        "resolution": "added it",
        "prevention": "always check",
        "timestamp": 2_000 + n,
        "severity": "high",
    }
    return Entry(document, feature, 2_000 + n, document["description"])


def _constraint(n: int) -> Entry:
    document = {
        "id": f"con-{n:03d}",
        "description": f"Constraint {n}: must support Node.js 18+",
        "reason": "client requirement",
        "affectedAreas": ["package.json", "CI/CD"],
        "addedAt": 1,
        "expiresAt": None,
        "type": "technical",
    }
    return Entry(document, None, 1, document["description"])


SUMMARY = "# Project Summary\n\n" + "The project completed feature work on the API. " * 300
DECISIONS = [_decision(n, "feat-1" if n % 3 == 0 else "feat-2") for n in range(10, 0, -1)]
FAILURES = [_failure(n, "feat-1" if n < 3 else "feat-9") for n in range(5, 0, -1)]
CONSTRAINTS = [_constraint(n) for n in range(1, 4)]


@pytest.mark.parametrize("budget", [200, 250, 400, 700, 1000, 1500, 2000, 3000, 4000])
def test_the_pack_never_exceeds_the_budget_and_keeps_every_constraint(budget):
    built = pack.build("feat-1", SUMMARY, DECISIONS, FAILURES, CONSTRAINTS, budget)
    assert built.token_count == tokens.count(built.markdown)
    assert built.token_count <= budget
    assert built.constraints == CONSTRAINTS
    for constraint in CONSTRAINTS:
        assert constraint.document["description"] in built.markdown


def test_the_summary_is_truncated_only_after_every_item_is_dropped():
    built = pack.build("feat-1", SUMMARY, DECISIONS, FAILURES, CONSTRAINTS, 600)
    assert built.summary_truncated
    assert built.decisions == [] and built.failures == []
    assert built.summary and SUMMARY.startswith(built.summary)
    roomy = pack.build("feat-1", SUMMARY, DECISIONS, FAILURES, CONSTRAINTS, 100_000)
    assert not roomy.summary_truncated and roomy.summary == SUMMARY
    assert roomy.dropped == {"decisions": 0, "failures": 0}


def test_items_of_other_features_go_first():
    full = pack.build("feat-1", None, DECISIONS, FAILURES, CONSTRAINTS, 100_000).token_count
    built = pack.build("feat-1", None, DECISIONS, FAILURES, CONSTRAINTS, full - 1)
    dropped_decision = set(map(id, DECISIONS)) - set(map(id, built.decisions))
    assert len(dropped_decision) == 1
    # The oldest decision of another feature went first.
    oldest_other = min(
        (d for d in DECISIONS if d.feature_id != "feat-1"), key=lambda d: d.timestamp
    )
    assert oldest_other not in built.decisions
    for budget in range(300, full, 100):
        built = pack.build("feat-1", None, DECISIONS, FAILURES, CONSTRAINTS, budget)
        kept = built.decisions + built.failures
        own_dropped = any(e not in kept for e in DECISIONS + FAILURES if e.feature_id == "feat-1")
        other_kept = any(e.feature_id != "feat-1" for e in kept)
        assert not (own_dropped and other_kept), budget


def test_constraints_over_the_budget_are_refused():
    with pytest.raises(pack.ConstraintsOverBudget) as raised:
        pack.build(None, SUMMARY, [], [], CONSTRAINTS, 20)
    assert raised.value.needed > 20


# What makes tokens merge across a cut, if anything could: line breaks, white space of every
# kind, punctuation that takes the line breaks after it, contractions, long runs of one kind.
_JOINING = st.lists(
    st.sampled_from(["\n", "\n\n", "\r\n", " ", "\t", "\xa0", "\x1c", "\u2028", "\x85", ".", "-"])
    | st.sampled_from(["#", "'s", "a", "Zz", "123456", "密钥", "🧠", "\u0301", "\ud800", "- x"]),
    max_size=30,
).map("".join)


@given(
    _JOINING, st.lists(_JOINING, max_size=4), st.lists(_JOINING, max_size=2), st.integers(1, 300)
)
def test_the_pack_counted_in_pieces_is_counted_as_a_whole(summary, decisions, failures, budget):
    """The cut counts the markdown as the sum of its pieces' counts; tokens never merge
    across the places it cuts, whatever the texts around them."""
    entries = [Entry({"id": "d", "decision": text}, None, 1, "") for text in decisions]
    ranked = [Entry({"id": "f", "description": text}, "f1", 1, "") for text in failures]
    constraint = [Entry({"id": "c", "description": "x"}, None, 1, "")]
    try:
        built = pack.build("f1", summary, entries, ranked, constraint, budget)
    except pack.ConstraintsOverBudget:
        return
    assert built.token_count == tokens.count(built.markdown) <= budget


def test_failures_rank_by_feature_then_similarity_then_recency():
    own = _failure(1, "feat-1", "unrelated words")
    similar = _failure(2, "feat-2", "database migration failed in production")
    newer = _failure(3, "feat-3", "unrelated words")
    ranked = pack.rank_failures([newer, similar, own], "feat-1", "database migration")
    assert ranked == [own, similar, newer]


def _words_by_the_rule(text: str) -> set[str]:
    """What ranking compares: the words (``\\w+``), in small letters."""
    return {word.lower() for word in re.findall(r"\w+", text)}


def _overlap_by_the_rule(text: str, about: str) -> float:
    """Seed 004's ranking: Jaccard over the words of each."""
    words, reference = _words_by_the_rule(text), _words_by_the_rule(about)
    union = words | reference
    return len(words & reference) / len(union) if union else 0.0


_ASCII = st.text(st.sampled_from("abcXYZ019_ -.,;:!?'\"()[]{}/\\\t\n\x0b\x1c\x7f"), max_size=40)
_ANY = st.text(
    st.one_of(st.sampled_from("aZ1_ .éÉßİıſKΣσς密钥١\u0301\u00a0"), st.characters()), max_size=40
)
_TEXT = st.one_of(_ASCII, _ANY)
# Texts that share words, so that overlaps differ and decide the order.
_WORDY = st.lists(
    st.sampled_from(["db", "DB", "migration", "lock_file", "lock", "file", "été", "İd"]),
    max_size=6,
).map(" ".join)


@given(st.lists(_WORDY, min_size=1, max_size=12), _WORDY)
def test_failures_rank_by_word_overlap_as_the_rule_defines_it(texts, about):
    failures = [Entry({}, None, 0, text) for text in texts]
    expected = sorted(
        failures, key=lambda e: _overlap_by_the_rule(e.search_text, about), reverse=True
    )
    assert pack.rank_failures(failures, None, about) == expected


@given(_TEXT)
def test_a_failures_words_are_its_runs_of_word_characters_in_small_letters(text):
    # ASCII text is split in C rather than by the expression: the same words.
    assert pack._words(text) == _words_by_the_rule(text)


def test_a_secret_pasted_as_the_feature_is_not_quoted_back(client, project):
    """The pack quotes its feature (the answer's field, the markdown's title): a key pasted
    into the query came back as it was."""
    secret = "ghp_Zq7Wk2Lm9Xp4Rt6Yv8Bn3Cd5Ef7Gh9Jk1Mn"
    decision = {"id": "dec-1", "decision": "x"}
    assert client.post(f"/v1/projects/{project}/memory/decisions", json=decision).is_success
    answer = client.get(f"/v1/projects/{project}/memory/context", params={"feature_id": secret})
    assert answer.status_code == 200, answer.text
    assert secret not in answer.text
    assert answer.json()["feature_id"] == "[REDACTED:api_key]"
    assert answer.json()["markdown"].startswith("# Project context for [REDACTED:api_key]")


def test_a_pack_ranks_failures_by_the_first_characters_of_their_text(client, project, monkeypatch):
    """A pack ranks up to a thousand failures, whose texts hold up to 100,000 characters each:
    splitting them all into words cost 0.8-1.1 s of CPU a pack. It reads the first
    RANKED_CHARACTERS of each."""
    for n in range(3):
        failure = {"id": f"f{n}", "description": f"failure {n} " + "word " * 20_000}
        response = client.post(f"/v1/projects/{project}/memory/failures", json=failure)
        assert response.status_code == 201, response.text
    ranked: list[int] = []
    rank = pack.rank_failures

    def measured(failures, feature_id, about):
        ranked.extend(len(failure.search_text) for failure in failures)
        return rank(failures, feature_id, about)

    monkeypatch.setattr(pack, "rank_failures", measured)
    answer = client.get(f"/v1/projects/{project}/memory/context", params={"max_tokens": 2000})
    assert answer.status_code == 200, answer.text
    assert ranked and max(ranked) <= RANKED_CHARACTERS, ranked


def test_a_pack_cut_from_a_summary_of_megabytes_tokenizes_it_a_bounded_number_of_times(
    client, project, monkeypatch
):
    """An import may hold a running summary of megabytes. The pack rendered and counted the
    whole markdown again at each step of its cut (each item dropped, each try of the summary's
    length): 3.3 s of CPU a pack for 3.9 MB. Counted here, not timed: the characters handed to
    the tokenizer, whatever the number of steps."""
    lines = (
        f"Feature {n} shipped: the storage layer and its callers changed." for n in range(45_000)
    )
    content = "# Project Summary\n\n" + "\n".join(lines)
    assert 2_500_000 < len(content) < 3_500_000
    stored = client.put(
        f"/v1/projects/{project}/memory/files/running-summary.json", json={"content": content}
    )
    assert stored.status_code == 201, stored.text
    items = (
        [("decisions", {"featureId": f"f{n % 2}", "decision": f"D{n} " * 40}) for n in range(10)]
        + [("failures", {"featureId": f"f{n % 2}", "description": f"F{n} " * 40}) for n in range(5)]
        + [
            ("constraints", {"description": f"Constraint {n}", "type": "technical"})
            for n in range(2)
        ]
    )
    for kind, item in items:
        response = client.post(f"/v1/projects/{project}/memory/{kind}", json=item)
        assert response.status_code == 201, response.text
    tokenized: list[int] = []
    count, truncate = tokens.count, tokens.truncate

    def counted(text):
        tokenized.append(len(text))
        return count(text)

    def truncated(text, max_tokens):
        tokenized.append(len(text))
        return truncate(text, max_tokens)

    monkeypatch.setattr(tokens, "count", counted)
    monkeypatch.setattr(tokens, "truncate", truncated)
    answer = client.get(
        f"/v1/projects/{project}/memory/context", params={"feature_id": "f1", "max_tokens": 500}
    )
    monkeypatch.undo()
    assert answer.status_code == 200, answer.text
    built = answer.json()
    assert built["token_count"] == tokens.count(built["markdown"]) <= 500
    assert built["dropped"] == {"decisions": 10, "failures": 5}
    assert built["decisions"] == built["failures"] == []
    assert [c["description"] for c in built["constraints"]] == ["Constraint 0", "Constraint 1"]
    assert built["summary_truncated"] and content.startswith(built["summary"])
    # The longest prefix that fits: one token more does not.
    assert built["summary"] == tokens.truncate(content, tokens.count(built["summary"]))
    # Once to find that it does not fit, once to cut it (the old cut: 19 times).
    assert sum(tokenized) < 3 * len(content), sum(tokenized) / len(content)
