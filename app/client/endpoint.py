"""Routes are written once, as functions that describe a ``Call``; this descriptor turns each
into a method of both clients: it returns the parsed result on ``ContextStoreClient`` and an
awaitable of it on ``AsyncContextStoreClient``."""

import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar, overload

from app.client.calls import Call

P = ParamSpec("P")
T = TypeVar("T")
R = TypeVar("R")


# What each client is to its routes, by the shape of its ``execute``: so that this module, which
# the clients' routes are built with, does not import the clients (app/client/client.py).
class SendsLater(Protocol):
    """``AsyncContextStoreClient``: a route's method returns an awaitable of its result."""

    def execute(self, call: Call[R]) -> Coroutine[Any, Any, R]: ...


class SendsNow(Protocol):
    """``ContextStoreClient``: a route's method returns its result."""

    def execute(self, call: Call[R]) -> R: ...


class Endpoint(Generic[P, T]):
    def __init__(self, build: Callable[Concatenate[Any, P], Call[T]]) -> None:
        self.build = build
        # The name and docstring of the route, for help() and editors. typeshed types the wrapper
        # as a callable, which a descriptor is not (it returns one when bound).
        functools.update_wrapper(self, build)  # type: ignore[arg-type]

    @overload
    def __get__(self, instance: None, owner: type) -> "Endpoint[P, T]": ...

    @overload
    def __get__(self, instance: SendsLater, owner: type) -> Callable[P, Awaitable[T]]: ...

    @overload
    def __get__(self, instance: SendsNow, owner: type) -> Callable[P, T]: ...

    def __get__(self, instance: Any, owner: type) -> Any:
        if instance is None:
            return self

        @functools.wraps(self.build)
        def bound(*args: P.args, **kwargs: P.kwargs) -> Any:
            return instance.execute(self.build(instance, *args, **kwargs))

        return bound


def endpoint(build: Callable[Concatenate[Any, P], Call[T]]) -> Endpoint[P, T]:
    return Endpoint(build)
