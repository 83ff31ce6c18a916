"""A test agent whose first attempts fail on purpose, after streaming: each attempt writes
ATTEMPT_AGENT_PARTS text outputs "[aN part i]" one by one (each its own commit, no
checkpoint, so a retry starts over), then raises while its attempt is at most
ATTEMPT_AGENT_FAILS (default 1), else ends the run with "[aN reply]". Loaded by worker
subprocesses through PYTHONPATH (`--agent attempt_agent:agent`)."""

from __future__ import annotations

import os

from runlane.agents import done


class AttemptAgent:
    async def step(self, ctx):
        parts = int(os.environ.get("ATTEMPT_AGENT_PARTS", "3"))
        fails = int(os.environ.get("ATTEMPT_AGENT_FAILS", "1"))
        for i in range(parts):
            await ctx.emit("text", f"[a{ctx.attempt} part {i}]")
        if ctx.attempt <= fails:
            raise RuntimeError("attempt failed on purpose")
        return done(outputs=[("text", f"[a{ctx.attempt} reply]")])


agent = AttemptAgent()
