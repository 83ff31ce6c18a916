"""The echo agent: deterministic, for the demo and the tests.

It streams its input back as visible `text` in a few chunks, one chunk per step, and
saves a checkpoint after each chunk, so a run resumed on another worker continues where
the last one stopped instead of repeating itself. Its input is the run's messages (the
source message and any steering), else the run's prompt. Steering that arrives while it
runs is taken and echoed too. Tunable through attributes or the environment:

    RUNLANE_ECHO_CHUNKS  chunks per input (default 3)
    RUNLANE_ECHO_DELAY   seconds to wait before each chunk (default 0)
    RUNLANE_ECHO_COST    cost charged per chunk (default 0)
"""

from __future__ import annotations

import asyncio
import math
import os

from . import CONTINUE, RunContext, StepResult, done


class EchoAgent:
    def __init__(self, chunks: int | None = None, delay: float | None = None,
                 cost: float | None = None):
        self.chunks = max(1, chunks or int(os.environ.get("RUNLANE_ECHO_CHUNKS", "3")))
        self.delay = delay if delay is not None else float(
            os.environ.get("RUNLANE_ECHO_DELAY", "0"))
        self.cost = cost if cost is not None else float(os.environ.get("RUNLANE_ECHO_COST", "0"))

    async def _text(self, ctx: RunContext) -> tuple[str, int]:
        messages = await ctx.messages()
        if not messages:
            return ctx.prompt or "", 0
        first = len(messages[0].body)
        return "\n".join(m.body for m in messages), first

    async def step(self, ctx: RunContext) -> StepResult:
        state = ctx.checkpoint or {"emitted": 0}
        emitted = int(state.get("emitted", 0))
        if emitted == 0 and ctx.iteration == 0:
            await ctx.emit("progress", "echo: working")
        text, first = await self._text(ctx)
        size = max(1, math.ceil((first or len(text)) / self.chunks))
        if self.delay:
            await asyncio.sleep(self.delay)
        if emitted < len(text):
            await ctx.emit("text", text[emitted:emitted + size])
            emitted = min(len(text), emitted + size)
            ctx.charge(self.cost)
        await ctx.save_checkpoint({"emitted": emitted})
        if emitted < len(text):
            return CONTINUE
        if await ctx.take_steering():
            return CONTINUE  # the next step sees the steering in ctx.messages()
        return done()


agent = EchoAgent()
