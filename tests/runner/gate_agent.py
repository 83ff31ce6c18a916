"""A test agent whose runs all wait until the test opens the gate: each run's one step
polls for the file GATE_AGENT_FILE (every 0.05 s) and finishes once it exists, so a test
can count the runs a worker holds at once. Loaded by worker subprocesses through
PYTHONPATH (`--agent gate_agent:agent`)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from runlane.agents import done


class GateAgent:
    async def step(self, ctx):
        gate = Path(os.environ["GATE_AGENT_FILE"])
        while not gate.exists():
            await asyncio.sleep(0.05)
        return done(outputs=[("text", "through the gate")])


agent = GateAgent()
