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
        # orjson refuses lone surrogates, which JSON allows (as escapes) and which a document's
        # strings may hold; the standard library writes them as escapes, the rest as ASCII.
        return json.dumps(value, separators=(",", ":")).encode()


class FastJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        return dumps(content)
