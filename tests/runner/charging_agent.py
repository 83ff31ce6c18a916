"""A test agent that spends and then fails: every attempt charges RUNLANE_CHARGING_TIMES
x RUNLANE_CHARGING_AMOUNT (3 x 5.0), then raises, or with RUNLANE_CHARGING_HANG=1 waits
for ever after its charges (a worker to kill mid-step)."""

from __future__ import annotations

import asyncio
import os


class Charging:
    def __init__(self) -> None:
        self.amount = float(os.environ.get("RUNLANE_CHARGING_AMOUNT", "5.0"))
        self.times = int(os.environ.get("RUNLANE_CHARGING_TIMES", "3"))
        self.hang = os.environ.get("RUNLANE_CHARGING_HANG") == "1"

    async def step(self, ctx):
        for _ in range(self.times):
            ctx.charge(self.amount)
        if self.hang:
            await asyncio.Event().wait()
        raise RuntimeError("the tool failed after spending")


agent = Charging()
