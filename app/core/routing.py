"""Routers that a request passes over at the cost of one regular expression.

FastAPI (0.165) finds a request's route by asking every included router in turn, and each router
tries every one of its routes, with bookkeeping in the request's scope around each try: a
decision POST tried about sixty routes (80-160 µs of CPU) before it reached the memory router,
and a 404 tried all of them, twice (the trailing-slash redirect, now off, tried again). A
``GatedRouter`` first matches the request's path against one expression that joins its routes'
own path expressions, and answers "no match" at once when none of them could match it.
"""

import re
from typing import Any

from fastapi import APIRouter
from starlette._utils import get_route_path  # the path the routes match: Starlette's own rule
from starlette.routing import BaseRoute, Match
from starlette.types import Scope

# Starlette names each path parameter's group; joined, the names would repeat.
_NAMED_GROUP = re.compile(r"\(\?P<\w+>")


def _path_gate(routes: list[BaseRoute]) -> re.Pattern[str] | None:
    """One expression matching every path some route of ``routes`` matches (None when a route
    has no path expression, such as a mount: then every request is tried)."""
    patterns = []
    for route in routes:
        path_regex: re.Pattern[str] | None = getattr(route, "path_regex", None)
        if path_regex is None:
            return None
        patterns.append(_NAMED_GROUP.sub("(?:", path_regex.pattern))
    return re.compile("|".join(f"(?:{pattern})" for pattern in patterns))


class GatedRouter(APIRouter):
    """An ``APIRouter`` that is skipped at once by a path none of its routes matches. Its
    routes' paths already hold the router's prefix; it must be included without a further one
    (``app/main.py`` includes every router as it is), or the gate would refuse its routes."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gate: re.Pattern[str] | None = None
        self._tries: list[tuple[re.Pattern[str], set[str] | None]] = []
        self._gated_routes = -1

    @property
    def gate(self) -> re.Pattern[str] | None:
        """The expression a request's path must match for any route here to (None: no gate)."""
        # Routes are added while the app is built; the gate follows them.
        if self._gated_routes != len(self.routes):
            self._gate = _path_gate(self.routes)
            # With a gate, every route has a path expression (which BaseRoute does not declare).
            self._tries = (
                []
                if self._gate is None
                else [
                    (getattr(route, "path_regex"), getattr(route, "methods", None))  # noqa: B009
                    for route in self.routes
                ]
            )
            self._gated_routes = len(self.routes)
        return self._gate

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        gate = self.gate
        if scope["type"] != "http" or gate is None:
            return super().matches(scope)
        path = get_route_path(scope)
        if gate.match(path) is None:
            return Match.NONE, {}
        # Whether a route here takes the request, as FastAPI's own matching decides it: the
        # first route whose path matches, with the method; else a path match (405). FastAPI
        # asks this, discards all but the answer, then matches route by route again to handle
        # the request, with its bookkeeping in the request's scope around each try (about 4 µs
        # a route): the answer alone costs a regular expression a route.
        partial = False
        for path_regex, methods in self._tries:
            if path_regex.match(path) is not None:
                if not methods or scope["method"] in methods:
                    return Match.FULL, {}
                partial = True
        return (Match.PARTIAL if partial else Match.NONE), {}
