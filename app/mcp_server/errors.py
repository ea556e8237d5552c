"""A failed call of the store as the MCP error of the request it served, written once for the
tools, the resources and the prompt: each says which error is the caller's and which the
server's, and all carry the same text, never a stack trace."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx

from app.client import ContextStoreError
from app.client.errors import EmptyName


def describe(error: ContextStoreError) -> str:
    """The route's problem as text: its status, title and detail, then a line per field error:
    what a model can act on, nothing more."""
    lines = [f"{error.status} {error.title}" + (f": {error.detail}" if error.detail else "")]
    lines += [f"{item.get('path') or '(request)'}: {item.get('message')}" for item in error.errors]
    return "\n".join(lines)


@contextmanager
def answering(
    callers: Callable[[str], Exception], servers: Callable[[str], Exception]
) -> Iterator[None]:
    """Calls of the store whose failures are raised as ``callers(text)`` when the route answered
    a 4xx problem (the request's own mistake: another tenant's project, a name no file has, a
    bad cursor) or the client refused an empty name or arguments no request can carry before
    sending it, and as
    ``servers(text)`` for a 5xx or a store out of reach (over stdio, its URL)."""
    try:
        yield
    except ContextStoreError as error:
        failure = callers if error.status < 500 else servers
        raise failure(describe(error)) from None
    except EmptyName as error:  # refused before the request: the caller's
        raise callers(str(error)) from None
    except (httpx.InvalidURL, httpx.LocalProtocolError) as error:
        # Arguments no request can carry (a query past httpx's length, a line break in a
        # header): refused before the request, as the route refuses what it cannot take.
        raise callers(f"The arguments cannot be sent as a request: {error}.") from None
    except httpx.TransportError as error:
        raise servers(f"The store could not be reached: {error!r}") from None
