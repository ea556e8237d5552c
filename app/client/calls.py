"""One request to the service, described once for the sync and the async client alike."""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx
from pydantic import BaseModel, TypeAdapter

T = TypeVar("T")


@dataclass(frozen=True)
class Document:
    """A file as an export route answers it: its exact bytes and what describes them.

    ``modified`` is False when the download named an ETag (``if_none_match``) and the server
    answered 304 Not Modified: the copy with that ETag is current, and ``content`` is empty."""

    content: bytes
    etag: str | None
    filename: str | None
    media_type: str | None
    modified: bool = True


@dataclass(frozen=True)
class Call(Generic[T]):
    method: str
    path: str
    parse: Callable[[httpx.Response], T]
    params: dict[str, Any] = field(default_factory=dict)
    # A header whose value is None is not sent (an optional If-Match, Idempotency-Key...).
    headers: dict[str, str | None] = field(default_factory=dict)
    content: bytes | Iterable[bytes] | None = None
    json: Any = None

    def request(self, client: httpx.Client | httpx.AsyncClient) -> httpx.Request:
        params = {name: _param(value) for name, value in self.params.items() if value is not None}
        # As UTF-8: httpx encodes a text value as ASCII, and an Idempotency-Key in any other
        # script raised before the request was made, where the service takes its bytes.
        headers = {
            name.encode(): value.encode()
            for name, value in self.headers.items()
            if value is not None
        }
        if self.json is not None:
            return client.build_request(
                self.method, self.path, params=params, headers=headers, json=self.json
            )
        return client.build_request(
            self.method, self.path, params=params, headers=headers, content=self.content
        )


def _param(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def model(type_: Any) -> Callable[[httpx.Response], Any]:
    """Parse the JSON body as ``type_`` (a pydantic model, or any type pydantic knows)."""
    if isinstance(type_, type) and issubclass(type_, BaseModel):
        return lambda response: type_.model_validate_json(response.content)
    adapter: TypeAdapter[Any] = TypeAdapter(type_)
    return lambda response: adapter.validate_json(response.content)


def document(response: httpx.Response) -> Document:
    if response.status_code == httpx.codes.NOT_MODIFIED:
        return Document(b"", response.headers.get("etag"), None, None, modified=False)
    disposition = response.headers.get("content-disposition", "")
    _, _, filename = disposition.partition('filename="')
    return Document(
        content=response.content,
        etag=response.headers.get("etag"),
        filename=filename.rstrip('"') or None,
        media_type=response.headers.get("content-type"),
    )


def nothing(_response: httpx.Response) -> None:
    return None


def text(response: httpx.Response) -> str:
    return response.text
