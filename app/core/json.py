"""The service's own JSON (API bodies, problems, cursors): compact, UTF-8, via orjson.

Documents in the tools' formats never go through here; ``app/formats`` renders those exactly.
"""

from typing import Any

import orjson
from fastapi.responses import JSONResponse


def dumps(value: Any) -> bytes:
    return orjson.dumps(value)


class FastJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)
