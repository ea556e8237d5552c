"""The JSON primitives every format and service shares."""

import json
import math
from collections import OrderedDict
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.formats import jsondoc
from app.formats.errors import InvalidDocument, MalformedDocument


# RFC 7396, Appendix A.
@pytest.mark.parametrize(
    ("target", "patch", "result"),
    [
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        (["a", "b"], ["c", "d"], ["c", "d"]),
        ({"a": "b"}, ["c"], ["c"]),
        ({"a": "foo"}, None, None),
        ({"a": "foo"}, "bar", "bar"),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch_follows_rfc_7396(target, patch, result):
    assert jsondoc.merge_patch(target, patch) == result


def test_merge_patch_keeps_key_order():
    patched = jsondoc.merge_patch({"a": 1, "b": 2, "c": 3}, {"b": 20, "d": 4})
    assert list(patched) == ["a", "b", "c", "d"]


def test_merge_patch_refuses_a_patch_nested_past_the_recursion_limit():
    patch: dict = {}
    for _ in range(100_000):
        patch = {"a": patch}
    with pytest.raises(InvalidDocument):
        jsondoc.merge_patch({}, patch)


def test_int64_is_the_range_a_bigint_column_holds():
    assert (jsondoc.INT64_MIN, jsondoc.INT64_MAX) == (-(2**63), 2**63 - 1)
    assert jsondoc.INT64_MAX in jsondoc.INT64 and jsondoc.INT64_MAX + 1 not in jsondoc.INT64


# --- orjson's C paths against Python's json, the reference -----------------------------------

GOLDEN = Path(__file__).parent / "golden"

# Floats where writers disagree most: signed zero, the ends of each notation, subnormals, the
# largest doubles, and the values Python writes as NaN and Infinity.
AWKWARD_FLOATS = [
    0.0, -0.0, 1.0, 0.1, 1e15, 1e16, 1e17, 9007199254740993.0, 1e-4, 1e-5, 1e-7, 5e-324,
    2.2250738585072014e-308, 1.7976931348623157e308, 1e22, 1e23, 123456789.123, 2.0**63,
    -(2.0**63), 2.0**64, math.nan, math.inf, -math.inf,
]  # fmt: skip
AWKWARD_INTEGERS = [
    0, -1, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**30, -(10**40),
]  # fmt: skip
AWKWARD_STRINGS = [
    "", "\x00", "\x1f", "\x7f", "\x80", "é", "\u2028", "\ufeff", "\uffff", "😀", "\ud800",
    "\udfff", "a\ud83d", '"\\/', "\b\f\n\r\t", "caf\u00e9 \u2014 \U0001f600",
]  # fmt: skip


def _texts() -> st.SearchStrategy[str]:
    """Mostly ASCII (the documents orjson writes), sometimes any code point, surrogates too."""
    return st.one_of(
        st.text(st.characters(max_codepoint=0x7F)),
        st.text(st.characters(max_codepoint=0x7F)).map(lambda text: text + "é"),
        st.text(st.characters(exclude_categories=())),
        st.sampled_from(AWKWARD_STRINGS),
    )


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from(AWKWARD_INTEGERS),
    st.floats(),
    st.sampled_from(AWKWARD_FLOATS),
    _texts(),
)
DOCUMENTS = st.recursive(
    SCALARS,
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(_texts(), children, max_size=6)
    ),
    max_leaves=40,
)


def _orjson_path_only(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(document: Any) -> bytes:
        raise AssertionError("Python's json wrote the document")

    monkeypatch.setattr(jsondoc, "_dumps_indent2_with_python", refuse)


@given(DOCUMENTS)
def test_dumps_indent2_is_python_json_indent_2_on_any_document(document):
    assert jsondoc.dumps_indent2(document) == json.dumps(document, indent=2).encode()


ASCII = st.text(st.characters(max_codepoint=0x7F))
# What orjson writes as Python does: 64-bit integers, ASCII text, and floats orjson writes with
# Python's digits (it writes those under 1e-4 without an exponent, 0.00001 for 1e-05).
PLAIN_DOCUMENTS = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False).filter(lambda x: orjson.dumps(x) == json.dumps(x).encode())
    | ASCII,
    lambda children: st.lists(children, max_size=6) | st.dictionaries(ASCII, children, max_size=6),
    max_leaves=40,
)


@given(PLAIN_DOCUMENTS)
def test_dumps_indent2_writes_plain_ascii_documents_with_orjson(document):
    # Not a silent fallback: these documents take the C path, and it writes Python's bytes.
    with pytest.MonkeyPatch.context() as monkeypatch:
        _orjson_path_only(monkeypatch)
        assert jsondoc.dumps_indent2(document) == json.dumps(document, indent=2).encode()


def test_orjson_escapes_every_code_point_as_python_json_without_ensure_ascii():
    # Both escape one code point at a time, so all of them, as a value and as a key, is the
    # whole of the claim dumps_indent2 rests on for strings. Surrogates orjson refuses.
    every = "".join(map(chr, [*range(0xD800), *range(0xE000, 0x110000)]))
    for document in (every, {every: every}):
        python = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
        assert orjson.dumps(document) == python.encode()


def test_every_code_point_past_ascii_is_escaped_as_python_json_escapes_it():
    every = "".join(map(chr, [*range(0x7F, 0xD800), *range(0xE000, 0x110000)]))
    text = json.dumps(every, ensure_ascii=False)
    escaped = text.encode("ascii", "jsondoc.ensure_ascii").replace(b"\x7f", b"\\u007f")
    assert escaped == json.dumps(every).encode()


@pytest.mark.parametrize("value", AWKWARD_FLOATS + AWKWARD_INTEGERS + AWKWARD_STRINGS, ids=repr)
def test_dumps_indent2_writes_each_awkward_value_as_python_does(value):
    for document in (value, [value], {"k": value, "l": [value, {}], "m": []}):
        assert jsondoc.dumps_indent2(document) == json.dumps(document, indent=2).encode()


def test_dumps_indent2_leaves_other_types_and_subclasses_to_python():
    class Text(str):
        pass

    for document in ({"t": (1, 2)}, {"s": Text("x")}, {1: "int key"}, {"d": OrderedDict(a=1.5)}):
        assert jsondoc.dumps_indent2(document) == json.dumps(document, indent=2).encode()
    with pytest.raises(TypeError):
        jsondoc.dumps_indent2({"x": object()})


def test_dumps_indent2_leaves_mostly_non_ascii_text_to_python(monkeypatch):
    mostly_ascii = {"note": "x" * 640 + "é" * 5}
    accented = {"note": "é" * 10}
    assert jsondoc.dumps_indent2(accented) == json.dumps(accented, indent=2).encode()
    _orjson_path_only(monkeypatch)
    assert jsondoc.dumps_indent2(mostly_ascii) == json.dumps(mostly_ascii, indent=2).encode()
    with pytest.raises(AssertionError, match="Python's json"):
        jsondoc.dumps_indent2(accented)


def test_dumps_indent2_on_documents_deeper_than_orjson_writes():
    document: Any = 1.5
    for _level in range(400):
        document = [document]
    assert jsondoc.dumps_indent2(document) == json.dumps(document, indent=2).encode()


@pytest.mark.parametrize("references", [1, 2])
def test_dumps_indent2_refuses_a_container_that_holds_itself_as_python_does(references):
    # Held twice, a walk down it would double at each level: it must be refused at once.
    cycle: list[Any] = [1.5]
    cycle.extend([cycle] * references)
    with pytest.raises(ValueError, match="Circular reference"):
        jsondoc.dumps_indent2(cycle)
    with pytest.raises(ValueError, match="Circular reference"):
        json.dumps(cycle, indent=2)


def _golden_documents() -> list[Path]:
    return sorted(GOLDEN.rglob("*.json"))


@pytest.mark.parametrize("path", _golden_documents(), ids=lambda path: path.name)
def test_dumps_indent2_on_every_golden_file(path):
    document = json.loads(path.read_bytes())
    assert jsondoc.dumps_indent2(document) == json.dumps(document, indent=2).encode()


def _outcome(load: Any, raw: bytes | str) -> tuple[str, str]:
    """What a reader made of ``raw``: the object's repr (which tells 1 from 1.0 and -0.0 from
    0.0, and shows key order), or the error's type and message."""
    try:
        return "document", repr(load(raw))
    except (MalformedDocument, InvalidDocument) as exc:
        return type(exc).__name__, f"{exc} {getattr(exc, 'errors', '')}"


def _same_as_python(raw: bytes | str, *, allow_nan: bool = True) -> None:
    fast = _outcome(lambda raw: jsondoc.load(raw, allow_nan=allow_nan), raw)
    python = _outcome(lambda raw: jsondoc._load_with_python(raw, allow_nan), raw)
    assert fast == python


@given(DOCUMENTS, st.sampled_from(["indent", "compact", "utf-8", "orjson"]), st.booleans())
def test_load_reads_any_written_document_as_python_json(document, writer, allow_nan):
    try:
        raw = {
            "indent": lambda: json.dumps(document, indent=2).encode(),
            "compact": lambda: json.dumps(document, separators=(",", ":")).encode(),
            "utf-8": lambda: json.dumps(document, ensure_ascii=False).encode(
                "utf-8", "surrogatepass"
            ),
            "orjson": lambda: orjson.dumps(document),
        }[writer]()
    except orjson.JSONEncodeError:
        return
    _same_as_python(raw, allow_nan=allow_nan)


NUMBERS = st.from_regex(r"\A-?(0|[1-9][0-9]{0,40})(\.[0-9]{1,40})?([eE][-+]?[0-9]{1,4})?\Z")


@given(NUMBERS)
def test_load_reads_any_number_literal_as_python_json(number):
    _same_as_python(number.encode())
    _same_as_python(f'{{"n": [{number}, {number}]}}'.encode())


JSON_PIECES = st.sampled_from(
    ["{", "}", "[", "]", ",", ":", '"', "\\", "\\u", "d800", "\\n", "1", "-", "0", ".", "e",
     "+", "E", " ", "\t", "\n", "\r", "\x0b", "\x0c", "\xa0", "\x00", "\x1f", "\x7f", "é",
     "true", "false", "null", "NaN", "Infinity", "-Infinity", '"a"', '"k":', "1e999", "01",
     "99999999999999999999", "\ufeff", "\ud800"]
)  # fmt: skip


@given(st.lists(JSON_PIECES, max_size=20), st.sampled_from(["utf-8", "str", "utf-16"]))
def test_load_on_any_text_reads_or_refuses_as_python_json(pieces, encoding):
    text = "".join(pieces)
    raw: bytes | str = text if encoding == "str" else text.encode(encoding, "surrogatepass")
    _same_as_python(raw)
    _same_as_python(raw, allow_nan=False)


@pytest.mark.parametrize(
    "raw",
    [
        b"", b" ", b"1e999", b"-1e999", b"[1.7976931348623159e308]", b"18446744073709551615",
        b"18446744073709551616", b"-9223372036854775808", b"-9223372036854775809",
        b"[9.3e18, 1]", b"123456789012345678901234567890", b"-0", b"-0.0", b"1E5", b"1e-400",
        b'{"a": 1, "b": 2, "a": 3}', b'"\\ud800"', b'"\\ud83d\\ude00"', b'"\xed\xa0\x80"',
        b"\xef\xbb\xbf[1]", '{"a": "é"}'.encode("utf-16"), '{"a": "é"}'.encode("utf-32"),
        b"NaN", b"[Infinity, -Infinity]", b'"\x01"', b"\xff", b"[1,]", b"01", b"1 2",
        b"[" * 257 + b"]" * 257, b"[" * 256 + b"]" * 256, b"[" * 2000 + b"]" * 2000,
    ],
    ids=repr,
)  # fmt: skip
def test_load_reads_or_refuses_each_awkward_text_as_python_json(raw):
    _same_as_python(raw)
    _same_as_python(raw, allow_nan=False)


def test_load_reads_plain_documents_with_orjson(monkeypatch):
    # Not a silent fallback: a document with nothing only Python reads takes orjson's path.
    def refuse(raw: bytes, allow_nan: bool) -> Any:
        raise AssertionError("Python's json read the document")

    raw = b'{"a": [1, -0.0, 1e-400, 18446744073709551615, "\\u00e9\xc3\xa9", null, true]}'
    expected = repr(json.loads(raw))
    monkeypatch.setattr(jsondoc, "_load_with_python", refuse)
    assert repr(jsondoc.load(raw)) == expected


def test_utf_8_of_a_lone_surrogate_is_refused_and_its_escape_read():
    """Python's json reads bytes with surrogatepass, which takes ED A0 80 (not UTF-8) for a
    lone surrogate; JSON's escape of one is valid and stays readable."""
    with pytest.raises(MalformedDocument, match="not valid UTF-8"):
        jsondoc.load(b'{"a": "\xed\xa0\x80"}')
    assert jsondoc.load(b'{"a": "\\ud800"}') == {"a": "\ud800"}
