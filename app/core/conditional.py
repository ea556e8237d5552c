"""Strong ETags and the conditional headers If-Match and If-None-Match (RFC 9110 13.1)."""

from collections.abc import Callable

from blake3 import blake3
from fastapi import Request, Response

from app.core.encoding import identity_etag
from app.core.errors import PreconditionFailed

# A write's check of the client's conditions against the current ETag (None: the resource
# does not exist yet). Services call it once they hold the row's lock, so that the version
# checked is the version changed.
Precondition = Callable[[str | None], None]
# 128 bits, as BLAKE2b's tags were: the same 32 hex digits.
TAG_BYTES = 16


def tag_digest() -> blake3:
    """The hash every strong ETag is made of, a file's own (``etag_of``) or a chained one
    (``app/core/documents.py``): BLAKE3, its first 128 bits. BLAKE2b made them until migration
    0016: BLAKE3 hashes a 1 MB save in 0.16 ms against 1.1 (compiled, with SIMD, on one
    thread), beside a 1 MB import's 1.2 ms of parsing and 1.45 of gzip. Stored tags outlive
    the code that made them: an archive pushed again knows a save it holds by its stored tag
    (``SaveRepository.find_file``), so the hash changes only with a migration that rewrites
    every stored tag a new one is compared with (0016: the saves'). Every other stored tag is
    only ever compared with itself (``If-Match``, ``If-None-Match``, a chained tag's next
    link), so one made by BLAKE2b still names its version."""
    return blake3()


def etag_from(digest: blake3) -> str:
    return '"' + digest.hexdigest(length=TAG_BYTES) + '"'


def etag_of(content: bytes) -> str:
    return etag_from(blake3(content))


def _listed_tags(header: str) -> list[str]:
    # A client holding the gzip representation names its tag; it stands for the same version.
    return [identity_etag(tag.strip()) for tag in header.split(",") if tag.strip()]


def _strong_match(header: str, current: str) -> bool:
    # Strong comparison (If-Match): a weak tag (W/"...") never matches.
    return any(tag == current for tag in _listed_tags(header) if not tag.startswith("W/"))


def _weak_match(header: str, current: str) -> bool:
    # Weak comparison (If-None-Match, for every method): a tag matches weak or not.
    return header.strip() == "*" or current in {
        tag.removeprefix("W/") for tag in _listed_tags(header)
    }


def require_if_match(request: Request, current: str | None) -> None:
    """Before a PUT, PATCH or DELETE: the client's If-Match must name the current version."""
    header = request.headers.get("if-match")
    if header is None:
        return
    if current is None:
        raise PreconditionFailed("If-Match was given but the resource does not exist.")
    if header.strip() == "*" or _strong_match(header, current):
        return
    raise PreconditionFailed(
        "The resource has changed since the version named in If-Match.", current_etag=current
    )


def require_if_none_match(request: Request, current: str | None) -> None:
    """Before a PUT: ``If-None-Match: *`` means create only; the current tag, weak or not,
    that the client holds this version already."""
    header = request.headers.get("if-none-match")
    if header is None or current is None:
        return
    if _weak_match(header, current):
        raise PreconditionFailed("The resource exists (If-None-Match).", current_etag=current)


def if_match(request: Request) -> Precondition:
    """For a change or a delete: If-Match."""
    return lambda current: require_if_match(request, current)


def if_match_given(request: Request) -> Precondition | None:
    """``if_match``, or None when the request names no version: a check that would pass, for
    a write whose current version costs statements to work out (a project's, by counting)."""
    return None if request.headers.get("if-match") is None else if_match(request)


def if_match_or_create_only(request: Request) -> Precondition:
    """For a PUT that creates or replaces: If-Match, and ``If-None-Match: *`` (create only)."""

    def check(current: str | None) -> None:
        require_if_match(request, current)
        require_if_none_match(request, current)

    return check


def not_modified(request: Request, current: str) -> Response | None:
    """For a GET: 304 when the client already holds the current version."""
    header = request.headers.get("if-none-match")
    if header is None:
        return None
    if _weak_match(header, current):
        return Response(status_code=304, headers={"ETag": current})
    return None
