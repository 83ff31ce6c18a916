"""Two agents for the handler tests: each writes which code ran the run and the handler
its context names (`chat ran chat`), then finishes."""

from __future__ import annotations

from runlane.agents import done


class NamedAgent:
    def __init__(self, name: str):
        self.name = name

    async def step(self, ctx):
        return done(outputs=[("text", f"{self.name} ran {ctx.handler}")])


chat = NamedAgent("chat")
code = NamedAgent("code")
