"""The service's own JSON (API bodies, problems, cursors): compact, UTF-8, via orjson.

Documents in the tools' formats never go through here; ``app/formats`` renders those exactly.
"""

import json
from typing import Any

import orjson
from fastapi.responses import JSONResponse


def dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError:
        # orjson refuses what JSON allows and a stored document may hold: lone surrogates
        # (written as escapes), integers beyond 64 bits, nesting past 254 levels (documents
        # may reach MAX_DEPTH, 256). The standard library writes all of them, as ASCII.
        return json.dumps(value, separators=(",", ":")).encode()


class FastJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        return dumps(content)
