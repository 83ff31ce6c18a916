"""A test agent for rehearsals: one visible output per attempt, then success, or — at
RUNLANE_FLAKY_FAIL_RATE — a failed attempt that the runner retries with its backoff."""

from __future__ import annotations

import asyncio
import os
import random

from runlane.agents import done


class Flaky:
    def __init__(self) -> None:
        self.rng = random.Random(os.environ.get("RUNLANE_FLAKY_SEED"))
        self.fail_rate = float(os.environ.get("RUNLANE_FLAKY_FAIL_RATE", "0"))
        self.work = float(os.environ.get("RUNLANE_FLAKY_WORK", "0"))

    async def step(self, ctx):
        await asyncio.sleep(self.work)
        await ctx.emit("text", f"direct attempt {ctx.attempt}")
        if self.rng.random() < self.fail_rate:
            raise RuntimeError("attempt failed")
        return done()


agent = Flaky()
