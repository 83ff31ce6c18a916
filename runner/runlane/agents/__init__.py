"""The agent interface: one step of the agentic loop at a time.

    class MyAgent:
        async def step(self, ctx: RunContext) -> StepResult:
            text = " ".join(m.body for m in await ctx.messages()) or ctx.prompt
            await ctx.emit("text", reply)          # visible: text, final, message_tool, card
            await ctx.emit("progress", "…")        # invisible: reasoning, progress, …
            await ctx.save_checkpoint({"n": 1})  # state after this step; resumes as ctx.checkpoint
            new = await ctx.take_steering()        # messages sent while the run was running
            earlier = await ctx.history()          # the thread's earlier turns (Turn rows)
            ctx.charge(0.002)                      # cost, recorded at once (runlane.charge)
            return CONTINUE if new else done()     # or done("failed", "some_reason")

The runner calls `step` until it returns `done(…)` or the run reaches its iteration cap
(then the run finishes `failed` with reason `iteration_cap`). A step's LAST writes can ride
on its result instead, in one transaction with the step's end (one commit, not three):
`done(outputs=[("text", reply)])` writes the reply and finishes the run atomically (the
first visible output still stamps first_response in that transaction);
`proceed(outputs=[("text", chunk)], checkpoint={"n": 2})` writes the chunk and the
checkpoint together and continues. `ctx.messages()` is read once per attempt and kept
(take_steering adds what it takes). `ctx.history(limit=20)` reads the thread's earlier
turns (runlane.thread_history: the last `limit` runs of the thread before this one, each
its user messages then its visible reply as one `assistant` turn). A step that raises is a
failed attempt (retried with backoff while attempts remain). `ctx.charge(cost)` records
spend the moment it is made, without blocking the step (the step's end waits for it): what
an attempt charged counts in its owner's weekly budget and in runs.cost even when the
attempt fails, is retried or is reaped, and a refused amount (negative, NaN, infinite)
fails the step. When the run's lease is lost
the step's task is cancelled and every later `ctx` write raises `LeaseLost`.
`runlane worker --agent module:attr` loads an object with `step`, a class (instantiated
without arguments) or a bare `async def step(ctx)`.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

VISIBLE_KINDS = frozenset({"text", "final", "message_tool", "card"})
HIDDEN_KINDS = frozenset({"reasoning", "placeholder", "progress", "metadata"})


class LeaseLost(Exception):
    """This worker no longer owns the run: stop, and write nothing more for it."""


class _Unchanged:
    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED: Any = _Unchanged()  # StepResult.checkpoint: the step saves no checkpoint


@dataclass(frozen=True)
class StepResult:
    done: bool
    outcome: str = "succeeded"
    error: str | None = None
    # Written by the runner in ONE transaction with the step's end (the finish, or the
    # checkpoint of a step that continues): (kind, body) pairs in order.
    outputs: tuple[tuple[str, str], ...] = ()
    checkpoint: Any = UNCHANGED


CONTINUE = StepResult(done=False)


def done(
    outcome: str = "succeeded", error: str | None = None, *, outputs: Iterable[tuple[str, str]] = ()
) -> StepResult:
    """End the run: outcome `succeeded`, `failed` or `canceled`; error a reason code or text.
    `outputs` are written in the same transaction as the finish."""
    return StepResult(done=True, outcome=outcome, error=error, outputs=tuple(outputs))


def proceed(*, outputs: Iterable[tuple[str, str]] = (), checkpoint: Any = UNCHANGED) -> StepResult:
    """Continue with another step, writing `outputs` and `checkpoint` (resumed as
    ctx.checkpoint after a crash) in one transaction first."""
    return StepResult(done=False, outputs=tuple(outputs), checkpoint=checkpoint)


@dataclass(frozen=True)
class Message:
    message_id: int
    body: str
    created_at: datetime


@dataclass(frozen=True)
class Turn:
    """One earlier turn of a run's thread: role `user` (a message) or `assistant` (a
    run's visible reply, its outputs joined)."""

    run_id: int
    role: str
    body: str
    created_at: datetime


class RunContext(Protocol):
    run_id: int
    attempt: int
    lane: str
    trigger: str
    agent_id: str
    handler: str
    org_id: str
    thread_id: str | None
    prompt: str
    model: str | None
    late_notice: dict[str, Any] | None
    checkpoint: Any
    iteration: int
    iteration_cap: int

    async def emit(self, kind: str, body: str) -> None: ...
    async def save_checkpoint(self, data: Any) -> None: ...
    async def take_steering(self) -> list[Message]: ...
    async def messages(self) -> list[Message]: ...
    async def history(self, limit: int = 20) -> list[Turn]: ...
    def charge(self, cost: float) -> None: ...


class Agent(Protocol):
    async def step(self, ctx: RunContext) -> StepResult: ...


class _FunctionAgent:
    def __init__(self, fn: Callable[[RunContext], Awaitable[StepResult]]):
        self._fn = fn

    async def step(self, ctx: RunContext) -> StepResult:
        return await self._fn(ctx)


def load_agent(spec: str) -> Agent:
    """`module:attr` (or `module`, meaning `module:agent`) → an object with `async step(ctx)`."""
    module_name, _, attr = spec.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in (attr or "agent").split("."):
        obj = getattr(obj, part)
    if inspect.isclass(obj):
        obj = obj()
    if hasattr(obj, "step"):
        return obj
    if inspect.iscoroutinefunction(obj):
        return _FunctionAgent(obj)
    raise TypeError(f"{spec} is not an agent: it needs an async step(ctx) method")
