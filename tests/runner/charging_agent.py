"""A test agent that spends: every attempt charges each of RUNLANE_CHARGING_AMOUNTS
(comma-separated, default 5.0,5.0,5.0) without awaiting, then does RUNLANE_CHARGING_THEN:
`raise` (default: the attempt fails), `hang` (waits for ever: a worker to kill
mid-step) or `succeed`."""

from __future__ import annotations

import asyncio
import os

from runlane.agents import done


class Charging:
    def __init__(self) -> None:
        self.amounts = [
            float(a) for a in os.environ.get("RUNLANE_CHARGING_AMOUNTS", "5.0,5.0,5.0").split(",")
        ]
        self.then = os.environ.get("RUNLANE_CHARGING_THEN", "raise")

    async def step(self, ctx):
        for amount in self.amounts:
            ctx.charge(amount)
        if self.then == "hang":
            await asyncio.Event().wait()
        if self.then == "succeed":
            return done()
        raise RuntimeError("the tool failed after spending")


agent = Charging()
