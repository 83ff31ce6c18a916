"""A test agent for output streams: it writes STREAM_AGENT_CHUNKS numbered text chunks,
one per step, each in one transaction with the checkpoint that counts it (so a run
resumed after a crash continues with the next chunk, every chunk exactly once), waiting
STREAM_AGENT_DELAY seconds before each. Loaded by worker subprocesses through PYTHONPATH
(`--agent stream_agent:agent`)."""

from __future__ import annotations

import asyncio
import os

from runlane.agents import done, proceed


def chunk(n: int) -> str:
    return f"<{n:05d}>"


class StreamAgent:
    async def step(self, ctx):
        total = int(os.environ.get("STREAM_AGENT_CHUNKS", "1000"))
        delay = float(os.environ.get("STREAM_AGENT_DELAY", "0"))
        n = int((ctx.checkpoint or {}).get("n", 0))
        if delay:
            await asyncio.sleep(delay)
        if n + 1 >= total:
            return done(outputs=[("text", chunk(n))])
        return proceed(outputs=[("text", chunk(n))], checkpoint={"n": n + 1})


agent = StreamAgent()
