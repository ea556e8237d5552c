from typing import Any

import httpx


class ContextStoreError(Exception):
    """Any answer of the service that is not a success, with its problem+json parsed.

    ``errors`` is the problem's list of ``{path, message}`` (empty when it has none). An
    answer that is not problem+json (a proxy's error page) still gives ``status`` and a
    ``title``; ``body`` then holds the text."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.status: int = response.status_code
        problem = _problem(response)
        self.type: str = problem.get("type", "about:blank")
        self.title: str = problem.get("title", response.reason_phrase)
        self.detail: str | None = problem.get("detail")
        self.errors: list[dict[str, str]] = problem.get("errors", [])
        self.body: dict[str, Any] | str = problem or response.text
        super().__init__(f"{self.status} {self.title}: {self.detail or ''}".rstrip(": "))


def _problem(response: httpx.Response) -> dict[str, Any]:
    if "json" not in response.headers.get("content-type", ""):
        return {}
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


class EmptyName(ValueError):
    """A project, agent, run, feature or item name given empty: refused before any request,
    since its empty path segment would name another route."""
