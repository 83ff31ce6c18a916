"""A test agent that writes GATHER_AGENT_OUTPUTS outputs at once (asyncio.gather of
ctx.emit) and then finishes: numbered writes sent concurrently by one run. Loaded by
worker subprocesses through PYTHONPATH (`--agent gather_agent:agent`)."""

from __future__ import annotations

import asyncio
import os

from runlane.agents import done


class GatherAgent:
    async def step(self, ctx):
        count = int(os.environ.get("GATHER_AGENT_OUTPUTS", "30"))
        await asyncio.gather(*(ctx.emit("text", f"[{i}]") for i in range(count)))
        return done()


agent = GatherAgent()
