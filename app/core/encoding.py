"""Content codings, in front of Starlette's gzip layer.

Starlette's GZipMiddleware compresses whenever "gzip" appears anywhere in Accept-Encoding,
q=0 included. This middleware reads the header as RFC 9110 12.5.3 defines it and hands the
layers behind it a plain ``gzip`` or nothing. On the way out, a gzip-coded response gets an
ETag of its own (``"<tag>-gzip"``: a strong validator names one representation, RFC 9110
8.8.3), and a repeated Vary is folded into one.
"""

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

GZIP_ETAG_SUFFIX = '-gzip"'


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


def identity_etag(tag: str) -> str:
    """The ETag of the identity representation behind a gzip one."""
    return tag[: -len(GZIP_ETAG_SUFFIX)] + '"' if tag.endswith(GZIP_ETAG_SUFFIX) else tag


class ContentCodingMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = MutableHeaders(scope=scope)
        wants_gzip = accepts_gzip(headers.get("accept-encoding"))
        del headers["accept-encoding"]
        if wants_gzip:
            headers["accept-encoding"] = "gzip"

        async def send_with_coded_etag(message: Message) -> None:
            if message["type"] == "http.response.start":
                response_headers = MutableHeaders(scope=message)
                etag = response_headers.get("etag")
                coded = response_headers.get("content-encoding", "").lower() == "gzip"
                if etag and coded and etag.endswith('"') and not etag.endswith(GZIP_ETAG_SUFFIX):
                    response_headers["etag"] = etag[:-1] + GZIP_ETAG_SUFFIX
                vary = response_headers.getlist("vary")
                if vary:
                    names = dict.fromkeys(v.strip() for item in vary for v in item.split(","))
                    del response_headers["vary"]
                    response_headers["vary"] = ", ".join(name for name in names if name)
            await send(message)

        await self.app(scope, receive, send_with_coded_etag)
