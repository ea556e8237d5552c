"""Turns for long work (app/core/limits.py), the class itself: the order in which waiters get
a free turn, and how many may wait. The routes that take turns are tested through HTTP with
the imports and exports that take them (tests/saves, tests/archive)."""

from collections.abc import Awaitable, Callable

import anyio
import pytest
from starlette.requests import ClientDisconnect

from app.core.errors import TooManyRequests
from app.core.limits import LOOK_AGAIN_SECONDS, WAITERS_PER_TURN, Turn, Turns, keeping_turns


def _run(scenario: Callable[[], Awaitable[None]]) -> None:
    anyio.run(scenario)


async def _queued(turns: Turns, tenant: str, group: anyio.abc.TaskGroup, taken: list[str]) -> None:
    """``tenant`` waiting for a turn in ``group``; each turn got is noted in ``taken``."""

    async def wait() -> None:
        turn = await turns.take(tenant)
        taken.append(tenant)
        turn.release()

    before = turns.waiting
    group.start_soon(wait)
    with anyio.fail_after(5):
        while turns.waiting == before:
            await anyio.sleep(0.001)


def test_a_freed_turn_goes_to_the_oldest_waiter_not_to_a_newcomer():
    """A waiter looks again only every LOOK_AGAIN_SECONDS, where a newcomer tries at once: the
    newcomer would take every turn freed just before it came, and a stream of them keep the
    waiter out until its 429."""

    async def scenario() -> None:
        turns = Turns("imports", per_tenant=1, per_server=1, wait_seconds=30)
        taken: list[str] = []
        held = await turns.take("first")
        async with anyio.create_task_group() as group:
            await _queued(turns, "waiter", group, taken)
            held.release()
            await _queued(turns, "newcomer", group, taken)
        assert taken == ["waiter", "newcomer"]

    _run(scenario)


def test_a_waiter_whose_tenant_is_at_its_limit_holds_up_no_other_tenant():
    async def scenario() -> None:
        turns = Turns("imports", per_tenant=1, per_server=2, wait_seconds=30)
        held = await turns.take("busy")
        taken: list[str] = []
        async with anyio.create_task_group() as group:
            await _queued(turns, "busy", group, taken)
            with anyio.fail_after(LOOK_AGAIN_SECONDS * 4):
                other = await turns.take("other")
            assert turns.held == {"busy": 1, "other": 1} and turns.waiting == 1
            other.release()
            held.release()
        assert taken == ["busy"]

    _run(scenario)


def test_free_turns_go_to_as_many_waiters_as_they_serve():
    """Two turns freed at once serve the first two waiters, whichever looks first: a waiter
    defers only to the waiters before it that the free turns would serve."""

    async def scenario() -> None:
        turns = Turns("imports", per_tenant=1, per_server=2, wait_seconds=30)
        held = [await turns.take("a"), await turns.take("b")]
        # A waiter that has not looked again yet (a request asleep between its looks).
        assert turns._queued("c") is not None
        taken: list[str] = []
        async with anyio.create_task_group() as group:
            await _queued(turns, "d", group, taken)
            for turn in held:
                turn.release()
            with anyio.fail_after(5):
                while not taken:
                    await anyio.sleep(LOOK_AGAIN_SECONDS / 5)
        assert taken == ["d"]

    _run(scenario)


def test_waiters_are_bounded_per_tenant_and_per_server():
    """Beyond WAITERS_PER_TURN waiters for each of its turns, a tenant's request is told at
    once to come back, however long it could wait: an import waits holding its body. A
    tenant's waiters beyond its first ``per_tenant`` also count against WAITERS_PER_TURN for
    each of the server's turns, so the busiest tenants cannot leave another no place."""

    async def scenario() -> None:
        turns = Turns("imports", per_tenant=1, per_server=2, wait_seconds=30)
        held: list[Turn] = [await turns.take("a"), await turns.take("b")]
        bound = WAITERS_PER_TURN  # a tenant's: per_tenant is 1
        taken: list[str] = []
        async with anyio.create_task_group() as group:
            for _ in range(bound):
                await _queued(turns, "a", group, taken)
            with anyio.fail_after(1), pytest.raises(TooManyRequests):
                await turns.take("a")
            for _ in range(bound):
                await _queued(turns, "b", group, taken)
            # a and b each wait beyond their first: 2 * (bound - 1) of the server's 2 * bound,
            # which leaves c its first and two more.
            for _ in range(3):
                await _queued(turns, "c", group, taken)
            with anyio.fail_after(1), pytest.raises(TooManyRequests):
                await turns.take("c")
            await _queued(turns, "d", group, taken)  # its first still has a place
            assert turns.waiting == 2 * bound + 4
            for turn in held:
                turn.release()
        assert sorted(taken) == sorted(["a"] * bound + ["b"] * bound + ["c"] * 3 + ["d"])
        assert turns.total == 0 and turns.waiting == 0

    _run(scenario)


def test_a_waiter_whose_client_has_gone_leaves_its_place():
    """A waiter asked at each look whether its client has gone (``Request.is_disconnected``)
    leaves its place once it has (``ClientDisconnect``), without waiting for a turn it would
    take for nobody; the turn freed next goes to the waiter that stayed."""

    async def scenario() -> None:
        turns = Turns("exports", per_tenant=1, per_server=1, wait_seconds=30)
        held = await turns.take("a")
        client_gone = False

        async def gone() -> bool:
            return client_gone

        left: list[str] = []
        taken: list[str] = []

        async def leaving() -> None:
            with pytest.raises(ClientDisconnect):
                await turns.take("a", gone)
            left.append("a")

        async with anyio.create_task_group() as group:
            group.start_soon(leaving)
            with anyio.fail_after(5):
                while turns.waiting == 0:
                    await anyio.sleep(0.001)
            await _queued(turns, "a", group, taken)
            client_gone = True
            with anyio.fail_after(10 * LOOK_AGAIN_SECONDS):
                while not left:
                    await anyio.sleep(0.001)
            assert turns.waiting == 1 and turns.total == 1
            held.release()
        assert taken == ["a"]
        assert turns.total == 0 and turns.waiting == 0

    _run(scenario)


def test_within_keeping_turns_a_tenant_takes_one_turn_of_each_kind_until_the_block_ends():
    """An in-process caller (an MCP call) and the requests it makes share one turn of each kind
    for its tenant: with one turn a tenant, a request asking for the caller's kind again is
    handed the caller's, not left to wait behind its own caller. Every turn the block took is
    given back when it ends, not when a request gives its own back."""

    async def scenario() -> None:
        imports = Turns("imports", per_tenant=1, per_server=2, wait_seconds=0)
        exports = Turns("exports", per_tenant=1, per_server=2, wait_seconds=0)
        with keeping_turns():
            await imports.take("a")
            with anyio.fail_after(1):
                again = await imports.take("a")
            again.release()
            (await exports.take("a")).release()
            (await imports.take("b")).release()
            assert imports.held == {"a": 1, "b": 1} and exports.held == {"a": 1}
        assert imports.total == 0 and exports.total == 0

    _run(scenario)
