"""The JSON primitives every format and service shares."""

import pytest

from app.formats import jsondoc
from app.formats.errors import InvalidDocument


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
