"""The echo agent: deterministic, for the demo, the tests and the benchmarks.

It streams its input back as visible `text` in `chunks` chunks (however many messages
and of whatever lengths the input holds), one chunk per step. Each
chunk rides on the step's result, so the runner writes it in one transaction with the
step's end: with the checkpoint of a step that continues (a run resumed on another
worker continues where the last one stopped instead of repeating itself), with the
finish on the last step. A one-chunk reply is therefore the minimum a real reply needs:
read the messages, one visible output and the finish in one commit. Its input is the
run's messages (the source message and any steering that joined while it was queued),
else the run's prompt. A message sent while it runs is held by the database and answered
by the follow-up run its finish creates. Tunable through attributes or the environment:

    RUNLANE_ECHO_CHUNKS    chunks per input (default 3)
    RUNLANE_ECHO_DELAY     seconds to wait before each chunk (default 0)
    RUNLANE_ECHO_COST      cost charged per chunk (default 0)
    RUNLANE_ECHO_PROGRESS  1: emit an invisible progress output first (default 0)
"""

from __future__ import annotations

import asyncio
import math
import os

from . import RunContext, StepResult, done, proceed


class EchoAgent:
    def __init__(
        self,
        chunks: int | None = None,
        delay: float | None = None,
        cost: float | None = None,
        progress: bool | None = None,
    ):
        self.chunks = max(1, chunks or int(os.environ.get("RUNLANE_ECHO_CHUNKS", "3")))
        self.delay = (
            delay if delay is not None else float(os.environ.get("RUNLANE_ECHO_DELAY", "0"))
        )
        self.cost = cost if cost is not None else float(os.environ.get("RUNLANE_ECHO_COST", "0"))
        self.progress = (
            progress
            if progress is not None
            else (os.environ.get("RUNLANE_ECHO_PROGRESS", "0") not in ("", "0"))
        )

    async def _text(self, ctx: RunContext) -> str:
        messages = await ctx.messages()
        if not messages:
            return ctx.prompt or ""
        return "\n".join(m.body for m in messages)

    async def step(self, ctx: RunContext) -> StepResult:
        state = ctx.checkpoint or {"emitted": 0}
        emitted = int(state.get("emitted", 0))
        if self.progress and emitted == 0 and ctx.iteration == 0:
            await ctx.emit("progress", "echo: working")
        text = await self._text(ctx)
        # The chunk size follows the whole input, not its first message: a run answering
        # a thread of 250 messages of mixed lengths takes `chunks` steps like any other,
        # never more than the iteration cap allows.
        size = max(1, math.ceil(len(text) / self.chunks))
        if self.delay:
            await asyncio.sleep(self.delay)
        outputs = []
        if emitted < len(text):
            outputs.append(("text", text[emitted : emitted + size]))
            emitted = min(len(text), emitted + size)
            ctx.charge(self.cost)
        if emitted < len(text):
            return proceed(outputs=outputs, checkpoint={"emitted": emitted})
        return done(outputs=outputs)


agent = EchoAgent()
