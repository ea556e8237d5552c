"""What a codec raises when bytes are not a document of its format.

The HTTP layer renders ``MalformedDocument`` as 400 and ``InvalidDocument`` as 422, with
``errors`` as the problem's ``{path, message}`` list (paths are JSON Pointers).
"""


class FormatError(ValueError):
    def __init__(self, message: str, errors: list[tuple[str, str]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.errors = errors or []


class MalformedDocument(FormatError):
    """Not well-formed: not JSON, not UTF-8, not gzip."""


class InvalidDocument(FormatError):
    """Well-formed, but not a document this format allows."""
