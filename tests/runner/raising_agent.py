"""An agent whose step raises with the user's own words in the exception's message, as a
real agent quoting a reply it could not use would; it logs one standard-library line
first. The message it raises is built from the run's messages: the source has no marker."""

from __future__ import annotations

import logging

logger = logging.getLogger("raising_agent")


async def step(ctx):
    logger.info("raising_agent.step %d", ctx.iteration)
    text = " ".join(m.body for m in await ctx.messages())
    raise ValueError(text)


agent = step
