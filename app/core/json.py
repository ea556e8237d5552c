"""The service's own JSON (API bodies, problems, cursors): compact, UTF-8, via orjson.

Documents in the tools' formats never go through here; ``app/formats`` renders those exactly.
"""

import json
import math
from typing import Any

import orjson
from fastapi.responses import JSONResponse

from app.formats import jsondoc


def _nan_as_null(value: Any) -> Any:
    """``value`` with NaN and the infinities (which a stored document may hold, as Python's
    json writes them, but JSON cannot express) as null, as orjson writes them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _nan_as_null(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_nan_as_null(item) for item in value]
    return value


def dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError:
        # orjson refuses what JSON allows and a stored document may hold: lone surrogates
        # (written as escapes), integers beyond 64 bits, nesting past 254 levels (documents
        # may reach MAX_DEPTH, 256). The standard library writes all of them, as ASCII.
        return json.dumps(_nan_as_null(value), separators=(",", ":"), allow_nan=False).encode()


class FastJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        return dumps(content)


def spliceable(document: bytes) -> bytes:
    """A stored document's compact JSON, made fit to splice into the service's own JSON:
    as it is, unless it may hold NaN or an infinity (Python's json writes them, JSON has no
    such values), which become null as in every other answer."""
    if b"NaN" not in document and b"Infinity" not in document:
        return document
    return dumps(jsondoc.load(document))
