"""A no-op agent for the benchmarks: its first step finishes the run at once, succeeded,
without reading messages or writing outputs (the runlane side of a no-op job).

With RUNLANE_BENCH_STARTS set to a file path, each step appends "run_id time.time()" to
it first (the wake-latency measurement: publish -> first step); unset, it writes nothing.

    runlane worker --agent bench._noop_agent:agent   (run from the repository root)
"""

from __future__ import annotations

import os
import time

from runlane.agents import RunContext, StepResult, done

_STARTS = os.environ.get("RUNLANE_BENCH_STARTS", "")


async def agent(ctx: RunContext) -> StepResult:
    if _STARTS:
        started = time.time()
        with open(_STARTS, "a") as f:
            f.write(f"{ctx.run_id} {started}\n")
    return done()
