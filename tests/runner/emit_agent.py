"""A test agent that streams with ctx.emit, as a model's tokens arrive: EMIT_AGENT_TOKENS
text outputs "(n)" (n from 0), EMIT_AGENT_GAP seconds apart, EMIT_AGENT_FIRST_PAUSE
seconds after the first, then finishes with no outputs of its own. EMIT_AGENT_KIND
names the outputs' kind (text). Loaded by worker
subprocesses through PYTHONPATH (`--agent emit_agent:agent`)."""

from __future__ import annotations

import asyncio
import os

from runlane.agents import done


def token(n: int) -> str:
    return f"({n})"


class EmitAgent:
    async def step(self, ctx):
        count = int(os.environ.get("EMIT_AGENT_TOKENS", "20"))
        gap = float(os.environ.get("EMIT_AGENT_GAP", "0.01"))
        first_pause = float(os.environ.get("EMIT_AGENT_FIRST_PAUSE", "0"))
        kind = os.environ.get("EMIT_AGENT_KIND", "text")
        for n in range(count):
            await ctx.emit(kind, token(n))
            await asyncio.sleep(first_pause if n == 0 else gap)
        return done()


agent = EmitAgent()
