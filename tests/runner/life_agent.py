"""A test agent for the api-only agent life (test_api_only_agent_life.py): it answers
its input (the run's messages, else its prompt) with one visible `echo: <input>` output
and finishes, unless the input asks for "slow work": then it writes a numbered chunk
every LIFE_AGENT_DELAY seconds (default 0.5) and never finishes by itself, so only a
Stop (or the iteration cap) ends it. Loaded by worker subprocesses through PYTHONPATH
(`--agent life_agent:agent`)."""

from __future__ import annotations

import asyncio
import os

from runlane.agents import done, proceed


class LifeAgent:
    async def step(self, ctx):
        messages = await ctx.messages()
        text = "\n".join(m.body for m in messages) if messages else (ctx.prompt or "")
        if "slow work" not in text:
            return done(outputs=[("text", f"echo: {text}")])
        await asyncio.sleep(float(os.environ.get("LIFE_AGENT_DELAY", "0.5")))
        n = int((ctx.checkpoint or {}).get("n", 0))
        return proceed(outputs=[("text", f"<{n}>")], checkpoint={"n": n + 1})


agent = LifeAgent()
