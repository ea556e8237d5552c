"""What a codec raises when bytes are not a document of its format.

The HTTP layer renders ``MalformedDocument`` as 400 and ``InvalidDocument`` as 422, with
``errors`` as the problem's ``{path, message}`` list (paths are JSON Pointers).

A document's faults are listed up to ``MAX_LISTED``, and a check stops at the first fault past
them (``Faults``): a 300 kB array of 100,000 empty raw traces cost 8.4 s of CPU, 500 MB and a
31 MB answer listing 700,000 faults when every fault was (2026-11-27), and a body of the
4 MiB limit would have cost 14 times that, holding the interpreter for everyone else. What a
codec fills in or drops as it reads a document, which it reads whole, is noted up to as many
(``Notes``): a 1.4 MB atari state of 100,000 empty history entries was answered with 30 MB of
notices, after 8.3 s of CPU.
"""

from collections.abc import Iterable
from typing import TypeVar

MAX_LISTED = 100

ItemT = TypeVar("ItemT")


# A value from a document quoted in a message: whole up to this many characters, else
# described by its kind and size. A message quotes what it names, so that a client can find it;
# a save's 50 MB "version" quoted whole was redacted with the problem on the event loop, 8.6 s
# of CPU while every request waited (2026-11-27). Never cut: a secret cut in two is matched by
# no pattern, and its half would be sent back.
MAX_QUOTED = 100


def quoted(value: object) -> str:
    """``value`` as a message quotes it (its ``repr``), or what it is when that is longer than
    ``MAX_QUOTED`` characters; a container is always described."""
    if isinstance(value, str) and len(value) > MAX_QUOTED:
        return f"(a string of {len(value):,} characters)"
    if isinstance(value, list):
        return f"(an array of {len(value):,} items)"
    if isinstance(value, dict):
        return f"(an object of {len(value):,} members)"
    shown = repr(value)
    return shown if len(shown) <= MAX_QUOTED else f"(a number of {len(shown):,} characters)"


class FormatError(ValueError):
    def __init__(
        self, message: str, errors: list[tuple[str, str]] | None = None, *, more: bool = False
    ) -> None:
        super().__init__(message)
        self.message = message
        errors = errors or []
        self.errors = errors[:MAX_LISTED]
        # Whether the document has faults ``errors`` does not list.
        self.more = more or len(errors) > MAX_LISTED


class MalformedDocument(FormatError):
    """Not well-formed: not JSON, not UTF-8, not gzip."""


class InvalidDocument(FormatError):
    """Well-formed, but not a document this format allows."""


class TooManyFaults(InvalidDocument):
    """A check found a fault past ``MAX_LISTED``, and stopped there."""

    def __init__(self, faults: list[tuple[str, str]]) -> None:
        super().__init__(
            f"The document has more than {MAX_LISTED} faults: the first {MAX_LISTED} are listed.",
            faults,
            more=True,
        )


class _Listed(list[ItemT]):
    """A list whose ``append`` decides what happens past ``MAX_LISTED``; ``extend`` goes
    through it, one item at a time."""

    def extend(self, items: Iterable[ItemT]) -> None:
        for item in items:
            self.append(item)


class Faults(_Listed[tuple[str, str]]):
    """The ``(JSON Pointer, message)`` faults a check finds in a document, as it finds them:
    adding one past ``MAX_LISTED`` raises ``TooManyFaults`` with those found, so that a check
    over a client's arrays costs at most what ``MAX_LISTED`` faults do."""

    def append(self, fault: tuple[str, str]) -> None:
        if len(self) >= MAX_LISTED:
            raise TooManyFaults(self)
        super().append(fault)


class Notes(_Listed[ItemT]):
    """What a codec noted as it read a document (a default filled in, a field dropped), up to
    ``MAX_LISTED``: past them a note is not kept, and ``more`` says so."""

    more = False

    def room(self) -> bool:
        """Whether another note would be kept (when not, ``more`` is set): a codec asks first
        where making the note costs more than the check that found it (a pointer, a repr:
        an atari state of 100,000 empty history entries spent half its load making notes
        past the hundredth, 2026-11-27)."""
        if len(self) >= MAX_LISTED:
            self.more = True
            return False
        return True

    def append(self, note: ItemT) -> None:
        if self.room():
            super().append(note)
