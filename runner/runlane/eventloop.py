"""The event loop of runlane's long-running processes (`runlane worker`, embedded mode).

uvloop where it is installed (a dependency on Linux and macOS): its loop spends fewer
microseconds per wake-up, and the path from a notification to its claim is a chain of
wake-ups (listener, lane loop, claim connection). RUNLANE_EVENT_LOOP=asyncio chooses
the standard loop, to compare or to debug.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run(main) on the chosen loop."""
    if os.environ.get("RUNLANE_EVENT_LOOP", "uvloop") != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                return runner.run(main)
    return asyncio.run(main)


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """Until `event` is set (True) or `timeout` seconds pass (False).

    Not asyncio.wait_for: on Python 3.11 a task cancelled in the same loop pass that
    sets the event returns normally from wait_for, the cancellation lost, and a loop
    built on it never stops (a dashboard's shutdown hung that way).
    asyncio.timeout counts cancellations and lets an outside one through.
    """
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return event.is_set()
    return True
