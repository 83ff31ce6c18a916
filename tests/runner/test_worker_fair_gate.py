"""runlane.worker.fair_gate: a lane's connections are handed out in turns, round robin
across organizations, FIFO within one; nothing caps a lone organization."""

from __future__ import annotations

import asyncio

import pytest

from runlane.worker.fair_gate import FairGate


async def _settle() -> None:
    """Lets every ready task run until it waits."""
    for _ in range(5):
        await asyncio.sleep(0)


async def _served_order(gate: FairGate, waiters: list[tuple[str, tuple[str, ...]]]) -> list[str]:
    """Holds every turn, queues `waiters` (label, keys) in this order, then frees the
    turns: the labels in the order their turns came."""
    served: list[str] = []
    release = asyncio.Event()

    async def hold() -> None:
        async with gate.turn():
            await release.wait()

    async def wait(label: str, keys: tuple[str, ...]) -> None:
        async with gate.turn(keys):
            served.append(label)
            await asyncio.sleep(0)  # the turn is held across a loop iteration

    holders = [asyncio.create_task(hold()) for _ in range(gate.limit)]
    await _settle()
    tasks = []
    for label, keys in waiters:
        tasks.append(asyncio.create_task(wait(label, keys)))
        await _settle()
    assert gate.queued() == len(waiters)
    release.set()
    await asyncio.wait_for(asyncio.gather(*holders, *tasks), 10)
    assert gate.held == 0 and not gate.waiting
    return served


def test_organizations_take_turns_however_many_waiters_each_has():
    waiters = [(f"a{i}", ("org-a",)) for i in range(1, 5)]
    waiters += [("b1", ("org-b",)), ("b2", ("org-b",)), ("c1", ("org-c",))]
    served = asyncio.run(_served_order(FairGate(1), waiters))
    assert served == ["a1", "b1", "c1", "a2", "b2", "a3", "a4"]


def test_a_lone_organization_takes_every_turn_in_order():
    waiters = [(f"a{i}", ("org-a",)) for i in range(1, 8)]
    served = asyncio.run(_served_order(FairGate(3), waiters))
    assert served == [label for label, _ in waiters]


def test_a_statement_for_several_organizations_waits_in_the_shortest_queue():
    waiters = [(f"a{i}", ("org-a",)) for i in range(1, 5)]
    waiters += [("ab", ("org-a", "org-b")), ("b1", ("org-b",))]
    served = asyncio.run(_served_order(FairGate(1), waiters))
    # "ab" queued as org-b's first: served right after org-a's first, before org-a's rest.
    assert served == ["a1", "ab", "a2", "b1", "a3", "a4"]


def test_a_waiter_cancelled_before_its_turn_leaves_no_trace():
    async def scenario() -> None:
        gate = FairGate(1)
        release = asyncio.Event()

        async def hold() -> None:
            async with gate.turn(("org-a",)):
                await release.wait()

        async def use(keys: tuple[str, ...]) -> None:
            async with gate.turn(keys):
                pass

        holder = asyncio.create_task(hold())
        await _settle()
        waiter = asyncio.create_task(use(("org-b",)))
        await _settle()
        assert gate.queued() == 1
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert not gate.waiting
        release.set()
        await holder
        assert gate.held == 0
        await asyncio.wait_for(use(("org-b",)), 10)  # a free turn is taken at once

    asyncio.run(scenario())


def test_a_turn_granted_to_a_cancelled_waiter_passes_on():
    async def scenario() -> None:
        gate = FairGate(1)
        release = asyncio.Event()
        served: list[str] = []

        async def hold() -> None:
            async with gate.turn(("org-a",)):
                await release.wait()

        async def use(label: str, keys: tuple[str, ...]) -> None:
            async with gate.turn(keys):
                served.append(label)

        holder = asyncio.create_task(hold())
        await _settle()
        first = asyncio.create_task(use("b", ("org-b",)))
        await _settle()
        second = asyncio.create_task(use("c", ("org-c",)))
        await _settle()
        release.set()
        await asyncio.sleep(0)  # the holder ends: the turn is granted to "b", not yet run
        first.cancel()
        # (a turn lost with "b" would leave "c" waiting for ever)
        await asyncio.wait_for(asyncio.gather(holder, first, second, return_exceptions=True), 10)
        assert served == ["c"]
        assert gate.held == 0 and not gate.waiting

    asyncio.run(scenario())
