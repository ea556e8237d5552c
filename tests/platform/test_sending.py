"""The sending pass's timeout with sends of other shapes than uvicorn's: one that waits inside
a cancel scope of its own (an outer layer's anyio lock), one that never finishes. The pass
steps each send by hand before it sets a timer (``app/core/sending.py``); these hold it to
what ``await send(message)`` under a timeout does."""

import asyncio
import logging

import anyio
import pytest
from starlette.types import Message, Receive, Scope, Send

from app.core.sending import SendingMiddleware

BODY = b'{"ok":true}'


async def _app(_scope: Scope, _receive: Receive, send: Send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": BODY})


def _sending(timeout: float) -> SendingMiddleware:
    return SendingMiddleware(
        _app, timeout=timeout, redact=True, gzip_minimum_bytes=1024, gzip_level=1
    )


def _scope() -> Scope:
    return {"type": "http", "method": "GET", "path": "/", "headers": []}


async def _receive() -> Message:
    return {"type": "http.disconnect"}


def test_a_send_that_waits_inside_a_cancel_scope_of_its_own_completes():
    async def scenario() -> tuple[list[Message], bool]:
        lock = anyio.Lock()
        sent: list[Message] = []

        async def send(message: Message) -> None:
            # anyio's lock yields inside a shielded cancel scope even when free: the send
            # stops within a scope of its own at its first step.
            async with lock:
                sent.append(message)

        await _sending(timeout=5)(_scope(), _receive, send)
        return sent, lock.locked()

    sent, locked = asyncio.run(scenario())
    assert [message["type"] for message in sent] == ["http.response.start", "http.response.body"]
    assert sent[1]["body"] == BODY
    assert not locked


def test_a_send_that_never_finishes_is_abandoned_after_the_timeout(caplog):
    async def scenario() -> None:
        async def send(_message: Message) -> None:
            await asyncio.Event().wait()

        with anyio.fail_after(5):  # the pass's own timeout (0.05 s) must end it first
            await _sending(timeout=0.05)(_scope(), _receive, send)

    with caplog.at_level(logging.WARNING, logger="app.core.sending"):
        asyncio.run(scenario())
    assert "response abandoned" in caplog.text


@pytest.mark.parametrize("rounds", [1, 3])
def test_a_cancelled_request_stays_cancelled(rounds):
    """A cancellation from outside (a shutdown) while a send waits is the caller's, never
    taken for the client stalling."""

    async def scenario() -> int:
        async def send(_message: Message) -> None:
            await asyncio.Event().wait()

        task = asyncio.create_task(_sending(timeout=30)(_scope(), _receive, send))
        for _ in range(rounds):
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return task.cancelling()

    assert asyncio.run(scenario()) == 1
