"""An agent for any OpenAI-compatible `/chat/completions` endpoint, streaming (httpx).

    runlane worker --agent runlane.agents.openai:agent --lane interactive

Configured by the environment (or the constructor's arguments of the same names):

    RUNLANE_OPENAI_BASE_URL        base URL including the version (https://api.openai.com/v1)
    RUNLANE_OPENAI_API_KEY         bearer token (optional for local servers; never logged)
    RUNLANE_OPENAI_MODEL           model for every run; when unset, the run's own model
    RUNLANE_OPENAI_PRICE_INPUT     price per 1,000 input (prompt) tokens (default 0)
    RUNLANE_OPENAI_PRICE_OUTPUT    price per 1,000 output (completion) tokens (default 0)
    RUNLANE_OPENAI_FLUSH_INTERVAL  seconds between writes of a streamed reply (default 0.1)
    RUNLANE_OPENAI_FLUSH_BYTES     bytes that force a write sooner (default 2048)
    RUNLANE_OPENAI_RETRIES         429/5xx/connect failures retried per reply (default 4)
    RUNLANE_OPENAI_RETRY_MAX_WAIT  longest wait before one retry, in seconds (default 30)
    RUNLANE_OPENAI_HISTORY         earlier runs of the thread sent along (default 20; 0: none)
    RUNLANE_OPENAI_INCLUDE_USAGE   0: do not ask for `usage` (servers refusing stream_options)

What the model gets: the run's prompt as the system message, then the thread's history
(ctx.history: each earlier run's user messages and this agent's visible reply as an
`assistant` turn), then the run's own messages (source and steering) with the replies
this run already gave, and for a late scheduled run a system note.

Streaming: the first visible token is written at once, alone (its commit stamps the run's
first response, so first-response time stays the model's), later tokens are coalesced
into one output row at most every FLUSH_INTERVAL seconds or as soon as FLUSH_BYTES are
pending, whichever comes first; the reply's last piece rides on the step's result (one
commit with the finish or the checkpoint). A reply of N tokens is thus a handful of rows,
not N. Its text is never logged.

Cost: the request asks for `usage` (stream_options.include_usage); when the provider
sends it, prompt_tokens x PRICE_INPUT / 1000 + completion_tokens x PRICE_OUTPUT / 1000
is charged through ctx.charge (runlane.charge: recorded at once, counted in the owner's
weekly budget even if the attempt later fails). A stream that ends without `usage`
(interrupted, stopped, or a provider that never sends it) charges nothing: runlane
records what the provider reports, it does not estimate.

Retries inside the attempt: a 429 or 5xx answer, or a connection that cannot be opened,
is retried up to RETRIES times before any token of that reply is written, waiting what
the provider's `Retry-After` asks (seconds or an HTTP date), else 0.5 s, 1 s, 2 s, …
(capped at RETRY_MAX_WAIT). A Retry-After longer than RETRY_MAX_WAIT is not waited for:
the step fails at once and the run's own retry (with backoff, while attempts remain)
takes over, so an attempt never sleeps for minutes holding its lease. A stream that
breaks after its first token fails the step the same way (a retried reply starts over).

Stop and caps: a Stop (runlane.cancel_run) cancels the step's task; the HTTP stream is
closed at once (the provider sees the connection go) and nothing more is written. Each
step sends one request and the runner never calls a step past the run's iteration cap,
so a run makes at most `iteration_cap` requests. After a reply the agent takes steering:
new messages get another reply (the next step), else the run succeeds. Replies are
checkpointed, so a resumed run does not answer the same turn twice. A stream has no
duration limit, only an idle timeout between chunks (120 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import os
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import httpx

from .. import log
from . import CONTINUE, RunContext, StepResult, done, proceed


class ModelError(Exception):
    """The endpoint refused or broke the request (HTTP status or malformed stream)."""


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    return float(raw) if raw else default


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw else default


def retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds a `Retry-After` header asks for (delta-seconds or an HTTP date), or None
    when it is absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def cost_of(usage: dict[str, Any] | None, price_input: float, price_output: float) -> float:
    """The cost of one reply from the provider's `usage` (prices per 1,000 tokens)."""
    if not usage:
        return 0.0
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    return prompt * price_input / 1000 + completion * price_output / 1000


class Coalescer:
    """Turns a token stream into few visible outputs: the first token at once and alone,
    then what is pending once `interval` seconds passed since the last write or
    `max_bytes` are pending, whichever comes first. `take()` hands back what is left."""

    def __init__(
        self,
        emit: Callable[[str], Awaitable[None]],
        interval: float,
        max_bytes: int,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._emit = emit
        self.interval = interval
        self.max_bytes = max_bytes
        self._clock = clock
        self._pending: list[str] = []
        self._size = 0
        self._last = 0.0
        self.started = False  # a first token was written
        self.writes = 0

    async def add(self, text: str) -> None:
        if not text:
            return
        if not self.started:
            self.started = True
            await self._write(text)
            return
        self._pending.append(text)
        self._size += len(text.encode())
        if self._size >= self.max_bytes or self._clock() - self._last >= self.interval:
            await self.flush()

    def due_in(self) -> float | None:
        """Seconds until the pending text is due (None: nothing pending)."""
        if not self._pending:
            return None
        return max(0.0, self._last + self.interval - self._clock())

    async def flush(self) -> None:
        if self._pending:
            await self._write(self.take())

    def take(self) -> str:
        text = "".join(self._pending)
        self._pending.clear()
        self._size = 0
        return text

    async def _write(self, text: str) -> None:
        await self._emit(text)
        self.writes += 1
        self._last = self._clock()


_END = object()


class OpenAIAgent:
    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        idle_timeout: float = 120.0,
        *,
        price_input: float | None = None,
        price_output: float | None = None,
        flush_interval: float | None = None,
        flush_bytes: int | None = None,
        retries: int | None = None,
        retry_max_wait: float | None = None,
        history: int | None = None,
        include_usage: bool | None = None,
    ):
        env = os.environ.get
        self.base_url = (
            base_url or env("RUNLANE_OPENAI_BASE_URL") or "https://api.openai.com/v1"
        ).rstrip("/")
        self.api_key = api_key or env("RUNLANE_OPENAI_API_KEY")
        self.model = model or env("RUNLANE_OPENAI_MODEL")
        self.price_input = (
            price_input
            if price_input is not None
            else _env_float("RUNLANE_OPENAI_PRICE_INPUT", 0.0)
        )
        self.price_output = (
            price_output
            if price_output is not None
            else _env_float("RUNLANE_OPENAI_PRICE_OUTPUT", 0.0)
        )
        self.flush_interval = (
            flush_interval
            if flush_interval is not None
            else _env_float("RUNLANE_OPENAI_FLUSH_INTERVAL", 0.1)
        )
        self.flush_bytes = (
            flush_bytes if flush_bytes is not None else _env_int("RUNLANE_OPENAI_FLUSH_BYTES", 2048)
        )
        self.retries = retries if retries is not None else _env_int("RUNLANE_OPENAI_RETRIES", 4)
        self.retry_max_wait = (
            retry_max_wait
            if retry_max_wait is not None
            else _env_float("RUNLANE_OPENAI_RETRY_MAX_WAIT", 30.0)
        )
        self.history = history if history is not None else _env_int("RUNLANE_OPENAI_HISTORY", 20)
        self.include_usage = (
            include_usage
            if include_usage is not None
            else (env("RUNLANE_OPENAI_INCLUDE_USAGE", "1").strip() not in ("0", "false", "no"))
        )
        for name in ("price_input", "price_output", "flush_interval", "retry_max_wait"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"OpenAIAgent {name} must be a number >= 0")
        if self.flush_bytes < 1 or self.retries < 0 or not 0 <= self.history <= 1000:
            raise ValueError(
                "OpenAIAgent needs flush_bytes >= 1, retries >= 0 and history between 0 and 1000"
            )
        self.timeout = httpx.Timeout(30.0, read=idle_timeout)
        self._client: httpx.AsyncClient | None = None

    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout)
        return self._client

    # -- one step: one reply -------------------------------------------------------------
    async def step(self, ctx: RunContext) -> StepResult:
        turns: list[dict[str, Any]] = list((ctx.checkpoint or {}).get("turns", []))
        messages = await ctx.messages()
        answered = {t["upto"] for t in turns}
        if messages and messages[-1].message_id in answered:
            # Everything is answered (a resume after the last reply was checkpointed).
            return CONTINUE if await ctx.take_steering() else done()
        chat = await self._chat(ctx, messages, turns)
        reply, tail = await self._complete(ctx, chat)
        turns.append({"upto": messages[-1].message_id if messages else 0, "reply": reply})
        outputs = [("text", tail)] if tail else []
        if await ctx.take_steering():
            return proceed(outputs=outputs, checkpoint={"turns": turns})
        return done(outputs=outputs)

    async def _chat(
        self, ctx: RunContext, messages: list[Any], turns: list[dict[str, Any]]
    ) -> list[dict[str, str]]:
        chat: list[dict[str, str]] = []
        if ctx.prompt:
            chat.append({"role": "system", "content": ctx.prompt})
        if self.history and ctx.thread_id:
            chat.extend(
                {"role": t.role, "content": t.body} for t in await ctx.history(self.history)
            )
        replies = {t["upto"]: t["reply"] for t in turns}
        for m in messages:
            chat.append({"role": "user", "content": m.body})
            if m.message_id in replies:
                chat.append({"role": "assistant", "content": replies[m.message_id]})
        if not messages:
            chat.append({"role": "user", "content": ctx.prompt or ""})
        if ctx.late_notice:
            chat.append(
                {
                    "role": "system",
                    "content": "This scheduled run starts late: " + json.dumps(ctx.late_notice),
                }
            )
        return chat

    async def _complete(self, ctx: RunContext, chat: list[dict[str, str]]) -> tuple[str, str]:
        """Streams one reply: (the whole reply, its last piece not yet written)."""
        headers = {"Accept": "text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        body: dict[str, Any] = {"model": self.model or ctx.model, "messages": chat, "stream": True}
        if self.include_usage:
            body["stream_options"] = {"include_usage": True}
        url = f"{self.base_url}/chat/completions"
        for attempt in range(self.retries + 1):
            try:
                async with self.client().stream(
                    "POST", url, json=body, headers=headers
                ) as response:
                    status = response.status_code
                    if status == 429 or status >= 500:
                        wait = self._wait(attempt, status, response.headers.get("Retry-After"))
                    elif status >= 400:
                        raise ModelError(f"chat completions returned HTTP {status}")
                    else:
                        return await self._consume(ctx, response)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                status = 0
                wait = self._wait(attempt, 0, None, exc)
            log.get().info(
                "agent.model_retry",
                **{
                    "run.id": ctx.run_id,
                    "http.status": status,
                    "retry.attempt": attempt + 1,
                    "retry.wait_s": round(wait, 3),
                },
            )
            await asyncio.sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _wait(
        self, attempt: int, status: int, header: str | None, exc: Exception | None = None
    ) -> float:
        """Seconds to wait before retry `attempt + 1`, or raise when none is left or the
        provider asks for longer than retry_max_wait."""
        what = f"HTTP {status}" if status else "no connection"
        if attempt >= self.retries:
            raise ModelError(f"chat completions: {what} after {attempt + 1} tries") from exc
        asked = retry_after(header)
        if asked is not None and asked > self.retry_max_wait:
            raise ModelError(
                f"chat completions: {what} with Retry-After {asked:.0f} s, "
                f"more than the {self.retry_max_wait:g} s waited inside an "
                f"attempt"
            ) from exc
        return asked if asked is not None else min(0.5 * 2**attempt, self.retry_max_wait)

    async def _consume(self, ctx: RunContext, response: httpx.Response) -> tuple[str, str]:
        """Reads the SSE stream: deltas through the coalescer, `usage` charged."""
        parts: list[str] = []
        usage: dict[str, Any] | None = None
        coalescer = Coalescer(
            lambda text: ctx.emit("text", text), self.flush_interval, self.flush_bytes
        )
        events: asyncio.Queue[Any] = asyncio.Queue()
        reader = asyncio.ensure_future(self._read(response, events))
        getter: asyncio.Future | None = None
        try:
            while True:
                if getter is None:
                    getter = asyncio.ensure_future(events.get())
                ready, _ = await asyncio.wait({getter}, timeout=coalescer.due_in())
                if not ready:  # pending text is due and no token came: write it now
                    await coalescer.flush()
                    continue
                event, getter = getter.result(), None
                if event is _END:
                    break
                if isinstance(event, BaseException):
                    raise event
                kind, value = event
                if kind == "usage":
                    usage = value
                else:
                    parts.append(value)
                    await coalescer.add(value)
        finally:
            for task in (reader, getter):
                if task is not None and not task.done():
                    task.cancel()
            with contextlib.suppress(BaseException):
                await reader
        cost = cost_of(usage, self.price_input, self.price_output)
        if cost > 0:
            ctx.charge(cost)
        return "".join(parts), coalescer.take()

    @staticmethod
    async def _read(response: httpx.Response, events: asyncio.Queue[Any]) -> None:
        try:
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    chunk = json.loads(data)
                except ValueError:
                    raise ModelError("malformed stream chunk") from None
                if chunk.get("usage"):
                    events.put_nowait(("usage", chunk["usage"]))
                for choice in chunk.get("choices") or []:
                    delta = (choice.get("delta") or {}).get("content")
                    if delta:
                        events.put_nowait(("delta", delta))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # handed to the step, which raises it
            events.put_nowait(exc)
            return
        events.put_nowait(_END)


agent = OpenAIAgent()
