"""A document kept as its parts: its head, and the members of one of its collections.

Both JSON writers of these formats (Python's ``json.dumps(indent=2)`` and Go's
``json.MarshalIndent(v, "", "  ")``) lay out a collection alike: empty, ``[]`` or ``{}``;
otherwise the opening bracket, each member on a line of its own one level in (``,`` between
members), and the closing bracket on a line at the collection's own level. A member's bytes
do not depend on its neighbours (Go's map is written in the order of its keys), and a JSON
string never holds a raw newline. So the document's bytes are the head (the document with the
collection empty) with the members put back at the empty brackets, each member rendered alone
and its lines moved in to the collection's level: ``join`` (tested against the full render of
many generated documents in ``tests/formats/test_parts.py``).

This lets a service store a large document as its head and one row a member, and append to it
at a cost that does not depend on its size.
"""

import itertools
from collections.abc import Callable
from dataclasses import dataclass

_INDENT = b"  "


@dataclass(frozen=True)
class Head:
    """A document's bytes with one collection empty, and where that collection's opening
    bracket is (``at``; None when the document has no such collection)."""

    content: bytes
    at: int | None


def hole(render: Callable[[str], bytes], quote: Callable[[str], bytes], empty: bytes) -> Head:
    """The head of a document: ``render(marker)`` renders it with a string, the marker, in
    the collection's place, and ``quote`` renders a string as its writer does; the marker is
    then replaced by the empty collection ``empty`` (``[]`` or ``{}``). A marker the
    document's own text holds is passed over for the next one (NUL, which both writers escape,
    makes that rare)."""
    for number in itertools.count():
        marker = f"\x00context-store:parts:{number}\x00"
        rendered, quoted = render(marker), quote(marker)
        count = rendered.count(quoted)
        if count == 0:
            return Head(rendered, None)
        if count == 1:
            at = rendered.index(quoted)
            return Head(rendered[:at] + empty + rendered[at + len(quoted) :], at)
    raise AssertionError("unreachable: a document holds finitely many strings")


def _indents(head: bytes, at: int) -> tuple[bytes, bytes]:
    """The line break and indent before a member, and before the closing bracket."""
    line = head.rfind(b"\n", 0, at) + 1
    outer = b"\n" + head[line : line + len(head[line:at]) - len(head[line:at].lstrip(b" "))]
    return outer + _INDENT, outer


def join(head: bytes, at: int | None, members: list[bytes]) -> bytes:
    """The whole document: ``members`` (each rendered alone, at no indent) put in the head's
    empty collection, in order."""
    if at is None or not members:
        return head
    inner, outer = _indents(head, at)
    body = (b"," + inner).join(member.replace(b"\n", inner) for member in members)
    return head[: at + 1] + inner + body + outer + head[at + 1 :]


def _member_size(inner: bytes, member: bytes) -> int:
    # The comma, the line break and indent before it, and one more indent on each line of it.
    return 1 + len(inner) + len(member) + member.count(b"\n") * (len(inner) - 1)


def size_change(head: bytes, at: int, member: bytes, *, replaced: bytes | None, first: bool) -> int:
    """What ``member`` changes in the size of the document whose head is ``head``: in place
    of ``replaced``, or as a member more (the first one when ``first``: with the closing
    bracket's line, and without a comma)."""
    inner, outer = _indents(head, at)
    if replaced is not None:
        return _member_size(inner, member) - _member_size(inner, replaced)
    return _member_size(inner, member) + (len(outer) - 1 if first else 0)
