"""The framework ceiling: a bare FastAPI endpoint returning a constant, served by uvicorn with
the options ``context-store serve`` uses, by the same server class. No middleware, no database,
no validation."""

import uvicorn
from fastapi import FastAPI, Response

from app.cli import WarmingServer, freeze_heap, uvicorn_options
from app.core.config import Settings

CONSTANT = b'{"ok":true}'

app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)


@app.post("/ceiling", status_code=201)
async def ceiling() -> Response:
    return Response(CONSTANT, status_code=201, media_type="application/json")


if __name__ == "__main__":
    freeze_heap()
    WarmingServer(uvicorn.Config(app, **uvicorn_options(Settings()))).run()
