"""Document downloads: exact bytes, a strong ETag, the file's name, gzip when asked for."""

import gzip

from fastapi import Request, Response

from app.core.conditional import not_modified


def accepts_gzip(request: Request) -> bool:
    for coding in request.headers.get("accept-encoding", "").split(","):
        name, _, params = coding.strip().partition(";")
        if name.strip().lower() in ("gzip", "*"):
            quality = params.strip().removeprefix("q=").strip()
            return quality not in ("0", "0.0", "0.00", "0.000")
    return False


def document_response(
    request: Request,
    *,
    etag: str,
    filename: str,
    content: bytes,
    gzipped: bool = False,
    media_type: str = "application/json",
) -> Response:
    """``content`` is the file, or its gzip form when ``gzipped``: served as is to a client
    that accepts gzip (no second compression), decompressed for one that does not."""
    if (unchanged := not_modified(request, etag)) is not None:
        return unchanged
    headers = {
        "ETag": etag,
        "Content-Disposition": f'attachment; filename="{filename}"',
        "Vary": "Accept-Encoding",
    }
    if gzipped:
        if accepts_gzip(request):
            headers["Content-Encoding"] = "gzip"
        else:
            content = gzip.decompress(content)
    return Response(content=content, media_type=media_type, headers=headers)
