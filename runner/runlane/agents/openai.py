"""An agent for any OpenAI-compatible `/chat/completions` endpoint, streaming (httpx).

    runlane worker --agent runlane.agents.openai:agent --lane interactive \
        --agent-option first_token_timeout=30

Options: each is an environment variable (RUNLANE_OPENAI_FIRST_TOKEN_TIMEOUT=30), the
worker's `--agent-option NAME=VALUE`, which wins (never the API key: a command line is
visible to every local user), or the constructor's keyword argument of the same name:

    option (RUNLANE_OPENAI_ + upper case)  default
    base_url             https://api.openai.com/v1
    api_key              none: the bearer token (never logged; environment only)
    model                the run's own model
    connect_timeout      10 s to open the connection
    first_token_timeout  60 s from sending the request to the first token
    token_timeout        30 s of silence between chunks once a token came
    attempts             3: requests for one reply, at most (1 to 10)
    retry_max_wait       20 s: the longest Retry-After waited for
    price_input          0 per 1,000 input (prompt) tokens
    price_output         0 per 1,000 output (completion) tokens
    flush_interval       0.02 s between writes of a reply
    flush_bytes          2048 pending bytes that force a write sooner
    history              20 earlier runs of the thread sent along (0: none)
    include_usage        1 (0: no stream_options, for servers that refuse it)

What the model gets: the run's prompt as the system message, then the thread's history
(ctx.history: each earlier run's user messages and this agent's visible reply as an
`assistant` turn), then the run's own messages (source and steering) with the replies
this run already gave, and for a late scheduled run a system note.

What it stores: the reply as the run's `text` outputs; the cost as charges; after a
reply followed by steering, a checkpoint {"turns": [{"upto": message_id, "reply":
text}]}, so a resumed run does not answer the same turn twice; a failed reply's error
as the run's error (`ModelError: …`, with the provider's own message). Its text, the
provider's message and the key are never logged: `agent.model_retry` carries the run,
the HTTP status (0: no connection), the request's number and the wait;
`agent.model_failed` the run, the status and a failure code (http_status,
attempts_spent, retry_after_too_long, first_token_timeout, token_timeout, malformed,
truncated, broken).

Streaming: the first visible token goes to ctx.emit at once, alone (the worker writes
an attempt's first visible output at once: its commit stamps the run's first response,
so first-response time stays the model's); later tokens are coalesced into one output
at most every flush_interval seconds or as soon as flush_bytes are pending, whichever
comes first, and the worker commits the outputs of every reply it streams together,
once per `--output-window` (0.02 s). A token reaches readers within about
flush_interval + output_window; a reply of N tokens is a handful of rows, not N. The
reply's last piece rides on the step's result (one commit with the finish or the
checkpoint).

Cost: the request asks for `usage` (stream_options.include_usage); when the provider
sends it, prompt_tokens x price_input / 1000 + completion_tokens x price_output / 1000
is charged through ctx.charge (runlane.charge: recorded at once, counted in the owner's
weekly budget even if the run later fails). A stream that ends without `usage`
(interrupted, stopped, or a provider that never sends it) charges nothing: runlane
records what the provider reports, it does not estimate.

Failures. A reply is tried again, up to `attempts` requests, only before its stream
opens: a connection that cannot be opened within connect_timeout or drops before the
status line, or HTTP 408, 429 or 5xx. The wait is what the provider's `Retry-After`
asks (seconds or an HTTP date), else 1 s, 2 s, 4 s, …; a Retry-After over
retry_max_wait is never cut short: the reply fails at once. Every other failure ends
the reply at once: another 4xx (a bad key, an unknown model, a request too long: the
same request fails the same way), no first token within first_token_timeout, no chunk
within token_timeout after it, a chunk that is not JSON, and a stream that ends with
neither a `finish_reason` nor `[DONE]` (a cut-off reply never passes for complete). A
failed reply finishes the run `failed` (reason `error`) with what it wrote kept and its
pending text written: the run's own retries (max_attempts) would repeat the requests
and the waits the agent already made, so they stay for a lost worker or an exception
the agent does not expect. Worst cases with the defaults: a stalled provider fails the
run after 60 s, a provider answering 5xx after 3 requests and 3 s, a 401 after 1 request.

Stop and caps: a Stop (runlane.cancel_run) cancels the step's task; the HTTP stream is
closed at once (the provider sees the connection go) and nothing more is written. Each
step sends one reply's requests and the runner never calls a step past the run's
iteration cap. After a reply the agent takes steering: new messages get another reply
(the next step), else the run succeeds.
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
    """A reply failed: the endpoint refused it, broke its stream or went silent. The
    message (the provider's own included) is the run's error, never a log line's;
    `failure` is a code for the log, `tail` the reply's text not yet written."""

    def __init__(self, message: str, failure: str, status: int = 0):
        super().__init__(message)
        self.failure = failure
        self.status = status
        self.tail = ""


def _flag(raw: str) -> bool:
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{raw!r} is not 1/0, true/false, yes/no or on/off")


# name: (environment variable, parse, default, accepted); the variable is written out
# whole so the docs' checks find it in the code.
OPTIONS: dict[str, tuple[str, Callable[[str], Any], Any, Callable[[Any], bool]]] = {
    "base_url": ("RUNLANE_OPENAI_BASE_URL", str, "https://api.openai.com/v1", bool),
    "api_key": ("RUNLANE_OPENAI_API_KEY", str, None, lambda v: True),
    "model": ("RUNLANE_OPENAI_MODEL", str, None, lambda v: True),
    "connect_timeout": ("RUNLANE_OPENAI_CONNECT_TIMEOUT", float, 10.0, lambda v: 0 < v <= 600),
    "first_token_timeout": (
        "RUNLANE_OPENAI_FIRST_TOKEN_TIMEOUT",
        float,
        60.0,
        lambda v: 0 < v <= 3600,
    ),
    "token_timeout": ("RUNLANE_OPENAI_TOKEN_TIMEOUT", float, 30.0, lambda v: 0 < v <= 3600),
    "attempts": ("RUNLANE_OPENAI_ATTEMPTS", int, 3, lambda v: 1 <= v <= 10),
    "retry_max_wait": ("RUNLANE_OPENAI_RETRY_MAX_WAIT", float, 20.0, lambda v: 0 <= v <= 600),
    "price_input": ("RUNLANE_OPENAI_PRICE_INPUT", float, 0.0, lambda v: 0 <= v < float("inf")),
    "price_output": ("RUNLANE_OPENAI_PRICE_OUTPUT", float, 0.0, lambda v: 0 <= v < float("inf")),
    "flush_interval": ("RUNLANE_OPENAI_FLUSH_INTERVAL", float, 0.02, lambda v: 0 <= v <= 60),
    "flush_bytes": ("RUNLANE_OPENAI_FLUSH_BYTES", int, 2048, lambda v: v >= 1),
    "history": ("RUNLANE_OPENAI_HISTORY", int, 20, lambda v: 0 <= v <= 1000),
    "include_usage": ("RUNLANE_OPENAI_INCLUDE_USAGE", _flag, True, lambda v: True),
}
# Not from a command line: it would be visible to every user of the machine.
SECRET_OPTIONS = frozenset({"api_key"})
# Variables this agent no longer reads: set, they stop the worker with what replaces them
# rather than being ignored (a deployment would otherwise run with other limits unseen).
RETIRED_VARIABLES = {
    "RUNLANE_OPENAI_RETRIES": "RUNLANE_OPENAI_ATTEMPTS (requests per reply: retries + 1)",
}


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
_ALIVE = ("alive", None)  # a line that is no token: the stream is not silent
# The most of an error answer read for its message; the most of the message kept.
_ERROR_BODY_BYTES = 16384
_ERROR_MESSAGE_CHARS = 600


def provider_message(body: bytes) -> str:
    """The provider's own words from an error answer: `error.message` (with its `code` or
    `type`) of an OpenAI-style JSON body, else `message`, else the body's text."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, str):
            text = error
        elif isinstance(error, dict) and error.get("message"):
            text = str(error["message"])
            code = error.get("code") or error.get("type")
            if code:
                text += f" ({code})"
    text = " ".join(text.split())
    if len(text) > _ERROR_MESSAGE_CHARS:
        text = text[: _ERROR_MESSAGE_CHARS - 1] + "…"
    return text


class OpenAIAgent:
    # the OPTIONS, set from them in __init__ and configure
    base_url: str
    api_key: str | None
    model: str | None
    connect_timeout: float
    first_token_timeout: float
    token_timeout: float
    attempts: int
    retry_max_wait: float
    price_input: float
    price_output: float
    flush_interval: float
    flush_bytes: int
    history: int
    include_usage: bool

    def __init__(self, **options: Any):
        unknown = set(options) - set(OPTIONS)
        if unknown:
            raise TypeError(f"OpenAIAgent has no option {', '.join(sorted(unknown))}")
        for variable, successor in RETIRED_VARIABLES.items():
            if os.environ.get(variable, "").strip():
                raise ValueError(f"{variable} is no longer read: set {successor}")
        for name, (variable, parse, default, _) in OPTIONS.items():
            value = options.get(name)
            if value is None:
                raw = os.environ.get(variable, "").strip()
                try:
                    value = parse(raw) if raw else default
                except ValueError:
                    raise ValueError(f"{variable}={raw!r} is not a valid {name}") from None
            setattr(self, name, value)
        self._check()
        self._client: httpx.AsyncClient | None = None

    def configure(self, **options: str) -> None:
        """Options from a command line (`runlane worker --agent-option NAME=VALUE`), as
        text; they win over the environment. The API key is refused here."""
        for name, raw in options.items():
            if name in SECRET_OPTIONS:
                raise ValueError(f"{name} is never given on a command line: set {OPTIONS[name][0]}")
            if name not in OPTIONS:
                raise ValueError(
                    f"unknown option {name!r}; the options are "
                    + ", ".join(n for n in OPTIONS if n not in SECRET_OPTIONS)
                )
            try:
                setattr(self, name, OPTIONS[name][1](raw.strip()))
            except ValueError:
                raise ValueError(f"{name}={raw!r} is not a valid value") from None
        self._check()
        self._client = None  # the next request builds one with these timeouts

    def _check(self) -> None:
        for name, (variable, _, _, accepted) in OPTIONS.items():
            value = getattr(self, name)
            if value is not None and not accepted(value):
                raise ValueError(f"OpenAIAgent {name} ({variable}) is out of range: {value!r}")
        self.base_url = self.base_url.rstrip("/")

    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            # Reads are bounded by the first-token and token timeouts (see _consume).
            timeout = httpx.Timeout(10.0, connect=self.connect_timeout, read=None)
            self._client = httpx.AsyncClient(timeout=timeout)
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
        try:
            reply, tail = await self._complete(ctx, chat)
        except ModelError as exc:
            log.get().warning(
                "agent.model_failed",
                **{"run.id": ctx.run_id, "http.status": exc.status, "model.failure": exc.failure},
            )
            outputs = [("text", exc.tail)] if exc.tail else []
            return done("failed", f"ModelError: {exc}", outputs=outputs)
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
        """Streams one reply: (the whole reply, its last piece not yet written); raises
        ModelError once the reply has failed for good."""
        headers = {"Accept": "text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        body: dict[str, Any] = {"model": self.model or ctx.model, "messages": chat, "stream": True}
        if self.include_usage:
            body["stream_options"] = {"include_usage": True}
        client = self.client()
        for attempt in range(1, self.attempts + 1):
            request = client.build_request(
                "POST", f"{self.base_url}/chat/completions", json=body, headers=headers
            )
            deadline = time.monotonic() + self.first_token_timeout
            try:
                response = await asyncio.wait_for(
                    client.send(request, stream=True), self.first_token_timeout
                )
            except TimeoutError:
                raise ModelError(
                    f"no answer within the first-token timeout ({self.first_token_timeout:g} s)",
                    "first_token_timeout",
                ) from None
            except (
                httpx.ConnectError,
                httpx.ConnectTimeout,
                httpx.ReadError,
                httpx.RemoteProtocolError,
            ) as exc:
                status, message, asked = 0, f"no connection ({type(exc).__name__})", None
            else:
                try:
                    status = response.status_code
                    if status < 400:
                        return await self._consume(ctx, response, deadline)
                    message = await self._error_text(response, deadline)
                    asked = retry_after(response.headers.get("Retry-After"))
                finally:
                    await response.aclose()
                message = f"HTTP {status} from chat completions: {message}"
                if not (status in (408, 429) or status >= 500):
                    raise ModelError(message, "http_status", status)
            wait = self._wait(attempt, status, message, asked)
            log.get().info(
                "agent.model_retry",
                **{
                    "run.id": ctx.run_id,
                    "http.status": status,
                    "retry.attempt": attempt,
                    "retry.wait_s": round(wait, 3),
                },
            )
            await asyncio.sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _wait(self, attempt: int, status: int, message: str, asked: float | None) -> float:
        """Seconds to wait after failed request number `attempt` (from 1), or raise when
        none is left or the provider asks for longer than retry_max_wait."""
        if attempt >= self.attempts:
            raise ModelError(
                f"{message} (gave up after {attempt} requests)", "attempts_spent", status
            )
        if asked is not None and asked > self.retry_max_wait:
            raise ModelError(
                f"{message} (Retry-After {asked:.0f} s is longer than the "
                f"{self.retry_max_wait:g} s waited)",
                "retry_after_too_long",
                status,
            )
        return asked if asked is not None else min(2.0 ** (attempt - 1), self.retry_max_wait)

    @staticmethod
    async def _error_text(response: httpx.Response, deadline: float) -> str:
        """The provider's message from an error answer, read for at most the time left."""
        body = bytearray()
        with contextlib.suppress(httpx.HTTPError, TimeoutError):
            async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) >= _ERROR_BODY_BYTES:
                        break
        return provider_message(bytes(body[:_ERROR_BODY_BYTES])) or "(no message)"

    async def _consume(
        self, ctx: RunContext, response: httpx.Response, deadline: float
    ) -> tuple[str, str]:
        """Reads the SSE stream: deltas through the coalescer, `usage` charged; silence
        past `deadline` (the first token's) or token_timeout (after it) fails the reply."""
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
                silent = deadline - time.monotonic()
                due = coalescer.due_in()
                wait = silent if due is None else min(due, silent)
                ready, _ = await asyncio.wait({getter}, timeout=max(0.0, wait))
                if not ready:
                    if due is not None and due <= silent:  # pending text is due: write it
                        await coalescer.flush()
                        continue
                    if parts:
                        raise ModelError(
                            f"the stream went silent for the token timeout "
                            f"({self.token_timeout:g} s) after {len(parts)} chunks",
                            "token_timeout",
                        )
                    raise ModelError(
                        f"no token within the first-token timeout ({self.first_token_timeout:g} s)",
                        "first_token_timeout",
                    )
                event, getter = getter.result(), None
                if event is _END:
                    break
                if isinstance(event, BaseException):
                    raise event
                kind, value = event
                if kind == "usage":
                    usage = value
                elif kind == "delta":
                    parts.append(value)
                    await coalescer.add(value)
                if parts:
                    deadline = time.monotonic() + self.token_timeout
        except ModelError as exc:
            exc.tail = coalescer.take()
            raise
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
        """Puts the stream's deltas, usage and signs of life on `events`, then _END; a
        stream that ends with neither a finish_reason nor [DONE] puts a ModelError."""
        finished = False
        try:
            async for line in response.aiter_lines():
                events.put_nowait(_ALIVE)
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    finished = True
                    break
                try:
                    chunk = json.loads(data)
                    if not isinstance(chunk, dict):
                        raise ValueError("a chunk is a JSON object")
                    if chunk.get("usage"):
                        events.put_nowait(("usage", chunk["usage"]))
                    for choice in chunk.get("choices") or []:
                        if choice.get("finish_reason"):
                            finished = True
                        delta = (choice.get("delta") or {}).get("content")
                        if delta:
                            events.put_nowait(("delta", delta))
                except (ValueError, AttributeError, TypeError):
                    raise ModelError(
                        "a stream chunk is not the expected JSON", "malformed"
                    ) from None
            if not finished:
                raise ModelError(
                    "the stream ended without a finish_reason or [DONE]: the reply is cut off",
                    "truncated",
                )
        except asyncio.CancelledError:
            raise
        except ModelError as exc:
            events.put_nowait(exc)
            return
        except httpx.HTTPError as exc:  # the connection broke mid-stream
            events.put_nowait(ModelError(f"the stream broke ({type(exc).__name__})", "broken"))
            return
        events.put_nowait(_END)


agent = OpenAIAgent()
