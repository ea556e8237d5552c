"""Document downloads: exact bytes, a strong ETag, the file's name, gzip when asked for."""

import gzip

from fastapi import Request, Response

from app.core.conditional import not_modified


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
        # ContentCodingMiddleware has reduced Accept-Encoding to "gzip" or nothing.
        if request.headers.get("accept-encoding") == "gzip":
            headers["Content-Encoding"] = "gzip"
        else:
            content = gzip.decompress(content)
    return Response(content=content, media_type=media_type, headers=headers)
