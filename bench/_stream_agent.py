"""A chat agent for `python -m bench stream`: its one step streams a reply of 4-byte
tokens, one every RUNLANE_BENCH_STREAM_GAP seconds (0.05) for RUNLANE_BENCH_STREAM_SECONDS
(10), through the OpenAI agent's own path (runlane.agents.openai.Coalescer over ctx.emit at
its default flush settings: each token to ctx.emit, which the worker batches per
--output-window; the last piece rides on the finish), then finishes succeeded.

A token's body is its index, zero-padded to 4 digits: the reply stays 4 bytes a token. Its
emit time is when the model would have sent it (the step's start + index x gap, wall
clock); at the end each run's are appended to RUNLANE_BENCH_STREAM_DIR/<pid>.emit as one
line "run_id t0 gap tokens", so latency = receipt - (t0 + index x gap).

    runlane worker --agent bench._stream_agent:agent   (run from the repository root)
"""

from __future__ import annotations

import asyncio
import os
import time

from runlane.agents import RunContext, StepResult, done
from runlane.agents.openai import OPTIONS, Coalescer

_DIR = os.environ.get("RUNLANE_BENCH_STREAM_DIR", "")
_SECONDS = float(os.environ.get("RUNLANE_BENCH_STREAM_SECONDS", "10"))
_GAP = float(os.environ.get("RUNLANE_BENCH_STREAM_GAP", "0.05"))


async def agent(ctx: RunContext) -> StepResult:
    tokens = round(_SECONDS / _GAP)
    coalescer = Coalescer(
        lambda text: ctx.emit("text", text),
        OPTIONS["flush_interval"][2],
        OPTIONS["flush_bytes"][2],
    )
    t0, start = time.time(), time.monotonic()
    i = 0
    while i < tokens:
        next_at = start + i * _GAP
        due = coalescer.due_in()
        now = time.monotonic()
        if due is not None and now + due < next_at:  # pending text is due first
            await asyncio.sleep(due)
            await coalescer.flush()
            continue
        if next_at > now:
            await asyncio.sleep(next_at - now)
        await coalescer.add(f"{i:04d}")
        i += 1
    if _DIR:
        with open(os.path.join(_DIR, f"{os.getpid()}.emit"), "a") as f:
            f.write(f"{ctx.run_id} {t0} {_GAP} {tokens}\n")
    tail = coalescer.take()
    return done(outputs=[("text", tail)] if tail else [])
