"""The two clients: the same routes (``Routes``), sent with httpx, sync or async."""

import os
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx

from app.client.calls import Call
from app.client.errors import ContextStoreError
from app.client.routes import Routes

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8000"
DEFAULT_TIMEOUT = 60.0
# Received bytes (of the body as sent), and the total when the server said it.
Progress = Callable[[int, int | None], None]


def _settings(base_url: str | None, api_key: str | None) -> tuple[str, dict[str, str]]:
    """The URL and auth header, from the arguments or CONTEXT_STORE_URL / CONTEXT_STORE_KEY."""
    url = base_url or os.environ.get("CONTEXT_STORE_URL") or DEFAULT_URL
    key = api_key or os.environ.get("CONTEXT_STORE_KEY")
    return url, ({"Authorization": f"Bearer {key}"} if key else {})


def _result(call: Call[T], response: httpx.Response) -> T:
    if response.is_error:
        raise ContextStoreError(response)
    return call.parse(response)


def _total(response: httpx.Response) -> int | None:
    length = response.headers.get("content-length", "")
    return int(length) if length.isdigit() else None


class ContextStoreClient(Routes):
    """Every route as a method; errors raise ``ContextStoreError``.

    ``http``: an ``httpx.Client`` of your own (its base URL and headers are used as they
    are), e.g. one that talks to the app in process."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        http: httpx.Client | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        url, headers = _settings(base_url, api_key)
        self.http = http or httpx.Client(base_url=url, headers=headers, timeout=timeout)
        self._owns_http = http is None

    def execute(self, call: Call[T]) -> T:
        return _result(call, self.http.send(call.request(self.http)))

    def download_archive(
        self, project: str, write: Callable[[bytes], Any], progress: Progress | None = None
    ) -> None:
        """Stream the project's .tar.gz to ``write`` chunk by chunk, without holding it."""
        call = Routes.export_archive.build(self, project)
        response = self.http.send(call.request(self.http), stream=True)
        try:
            if response.is_error:
                response.read()
                raise ContextStoreError(response)
            total = _total(response)
            for chunk in response.iter_raw():
                write(chunk)
                if progress is not None:
                    progress(response.num_bytes_downloaded, total)
        finally:
            response.close()

    def close(self) -> None:
        if self._owns_http:
            self.http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class AsyncContextStoreClient(Routes):
    """The same methods as ``ContextStoreClient``, each awaited."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        http: httpx.AsyncClient | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        url, headers = _settings(base_url, api_key)
        self.http = http or httpx.AsyncClient(base_url=url, headers=headers, timeout=timeout)
        self._owns_http = http is None

    async def execute(self, call: Call[T]) -> T:
        return _result(call, await self.http.send(call.request(self.http)))

    async def aclose(self) -> None:
        if self._owns_http:
            await self.http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()
