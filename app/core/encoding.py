"""Content codings: Accept-Encoding read as RFC 9110 12.5.3 defines it, and the headers that
name a response's coding.

Starlette's GZipMiddleware compresses whenever "gzip" appears anywhere in Accept-Encoding,
q=0 included. ``negotiate`` reduces the header to a plain ``gzip`` or nothing before anything
reads it. On the way out, a gzip-coded response gets an ETag of its own (``"<tag>-gzip"``: a
strong validator names one representation, RFC 9110 8.8.3), a repeated Vary is folded into
one, and a response that a gzip client would have been sent compressed says that it varies.
The pass that applies these to every response is ``app/core/sending.py``'s.
"""

from starlette.datastructures import MutableHeaders
from starlette.middleware.gzip import DEFAULT_EXCLUDED_CONTENT_TYPES
from starlette.types import Scope

GZIP_ETAG_SUFFIX = '-gzip"'
_ACCEPT_ENCODING = b"accept-encoding"
_GZIP_ONLY = (_ACCEPT_ENCODING, b"gzip")


def _quality(params: str) -> float:
    for param in params.split(";"):
        name, _, value = param.strip().partition("=")
        if name.strip().lower() == "q":
            try:
                return float(value.strip())
            except ValueError:
                return 0.0
    return 1.0


def accepts_gzip(accept_encoding: str | None) -> bool:
    if accept_encoding is None:
        return False
    qualities: dict[str, float] = {}
    for coding in accept_encoding.split(","):
        name, _, params = coding.strip().partition(";")
        qualities[name.strip().lower()] = _quality(params)
    for name in ("gzip", "x-gzip"):
        if name in qualities:
            return qualities[name] > 0
    return qualities.get("*", 0.0) > 0


def negotiate(scope: Scope) -> bool:
    """Whether the request accepts gzip; its Accept-Encoding is left as ``gzip`` when it does,
    and removed when it does not, for every layer and route that reads it after this. Several
    Accept-Encoding lines are one list (RFC 9110 5.3)."""
    headers: list[tuple[bytes, bytes]] = scope["headers"]
    offered = [value.decode("latin-1") for name, value in headers if name == _ACCEPT_ENCODING]
    if not offered:
        return False
    wants_gzip = accepts_gzip(", ".join(offered))
    kept = [header for header in headers if header[0] != _ACCEPT_ENCODING]
    scope["headers"] = [*kept, _GZIP_ONLY] if wants_gzip else kept
    return wants_gzip


def identity_etag(tag: str) -> str:
    """The ETag of the identity representation behind a gzip one."""
    return tag[: -len(GZIP_ETAG_SUFFIX)] + '"' if tag.endswith(GZIP_ETAG_SUFFIX) else tag


def could_be_compressed(headers: MutableHeaders, status: int) -> bool:
    """Whether a response the gzip layer would compress for a client that accepts gzip, once
    its body is long enough: not already coded, not a range (206), not of a type that is
    compressed already or streamed as events (Starlette's list)."""
    if status == 206 or "content-encoding" in headers:
        return False
    media_type = headers.get("content-type", "").partition(";")[0].strip().lower()
    excluded = DEFAULT_EXCLUDED_CONTENT_TYPES
    return media_type not in excluded and media_type.partition("/")[0] + "/*" not in excluded


def finish_coded_headers(headers: MutableHeaders, *, varies: bool) -> None:
    """A gzip-coded response's own ETag; ``Vary: Accept-Encoding`` where the response
    ``varies`` by it; each name once in Vary."""
    if varies:
        headers.add_vary_header("Accept-Encoding")
    etag = headers.get("etag")
    coded = headers.get("content-encoding", "").lower() == "gzip"
    if etag and coded and etag.endswith('"') and not etag.endswith(GZIP_ETAG_SUFFIX):
        headers["etag"] = etag[:-1] + GZIP_ETAG_SUFFIX
    vary = headers.getlist("vary")
    if len(vary) > 1 or (vary and "," in vary[0]):
        names = dict.fromkeys(v.strip() for item in vary for v in item.split(","))
        del headers["vary"]
        headers["vary"] = ", ".join(name for name in names if name)
