"""The tokenizer behind project memory: real cl100k_base counts, offline."""

from app.memory import tokens


def test_counts_are_cl100k_base_counts():
    # Ids [15339, 1917] in cl100k_base: two tokens, where characters / 4 would say 2.75.
    assert tokens.count("hello world") == 2
    assert tokens.count("") == 0
    # A repeated word is one token each time; a character count would be far off.
    assert tokens.count(" token" * 100) == 100


def test_counts_are_cached_and_stable():
    text = "The running summary of the project. " * 200
    assert tokens.count(text) == tokens.count(text) > 0


def test_truncate_keeps_a_prefix_within_the_limit():
    text = "Déjà vu 🧠 again and again " * 20
    for limit in (0, 1, 3, 10, 50):
        kept = tokens.truncate(text, limit)
        assert text.startswith(kept)
        assert tokens.count(kept) <= limit


def test_lone_surrogates_from_json_do_not_break_counting():
    assert tokens.count("a \ud800 b") >= 3
    assert tokens.truncate("a \ud800 b", 100) == "a \ud800 b"
