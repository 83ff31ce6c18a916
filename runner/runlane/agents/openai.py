"""An agent for any OpenAI-compatible `/chat/completions` endpoint, streaming (httpx).

Configured by the environment:

    RUNLANE_OPENAI_BASE_URL  base URL including the version, default https://api.openai.com/v1
    RUNLANE_OPENAI_API_KEY   bearer token (optional for local servers)
    RUNLANE_OPENAI_MODEL     model for every run; when unset, the run's own model

The run's prompt is the system message and its messages (source and steering) are the
user turns. Each streamed delta becomes a visible `text` output as it arrives; the first
one sets the run's first response. After a reply the agent takes steering: new messages
get another reply, else the run succeeds. Replies are checkpointed, so a resumed run
does not answer the same turn twice. A stream has no duration limit, only an idle
timeout between chunks.
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx

from . import CONTINUE, RunContext, StepResult, done


class ModelError(Exception):
    """The endpoint refused or broke the request (HTTP status or malformed stream)."""


class OpenAIAgent:
    def __init__(self, base_url: str | None = None, api_key: str | None = None,
                 model: str | None = None, idle_timeout: float = 120.0):
        self.base_url = (base_url or os.environ.get("RUNLANE_OPENAI_BASE_URL")
                         or "https://api.openai.com/v1").rstrip("/")
        self.api_key = api_key or os.environ.get("RUNLANE_OPENAI_API_KEY")
        self.model = model or os.environ.get("RUNLANE_OPENAI_MODEL")
        self.timeout = httpx.Timeout(30.0, read=idle_timeout)
        self._client: httpx.AsyncClient | None = None

    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout)
        return self._client

    async def step(self, ctx: RunContext) -> StepResult:
        turns: list[dict[str, Any]] = list((ctx.checkpoint or {}).get("turns", []))
        messages = await ctx.messages()
        answered = {t["upto"] for t in turns}
        if messages and messages[-1].message_id in answered:
            # Everything is answered (a resume after the last reply was checkpointed).
            return CONTINUE if await ctx.take_steering() else done()
        chat: list[dict[str, str]] = []
        if ctx.prompt:
            chat.append({"role": "system", "content": ctx.prompt})
        replies = {t["upto"]: t["reply"] for t in turns}
        for m in messages:
            chat.append({"role": "user", "content": m.body})
            if m.message_id in replies:
                chat.append({"role": "assistant", "content": replies[m.message_id]})
        if not messages:
            chat.append({"role": "user", "content": ctx.prompt or ""})
        if ctx.late_notice:
            chat.append({"role": "system", "content": "This scheduled run starts late: "
                         + json.dumps(ctx.late_notice)})
        reply = await self._stream(ctx, chat)
        turns.append({"upto": messages[-1].message_id if messages else 0, "reply": reply})
        await ctx.save_checkpoint({"turns": turns})
        return CONTINUE if await ctx.take_steering() else done()

    async def _stream(self, ctx: RunContext, chat: list[dict[str, str]]) -> str:
        headers = {"Accept": "text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        body = {"model": self.model or ctx.model, "messages": chat, "stream": True}
        parts: list[str] = []
        async with self.client().stream("POST", f"{self.base_url}/chat/completions",
                                        json=body, headers=headers) as response:
            if response.status_code >= 400:
                raise ModelError(f"chat completions returned HTTP {response.status_code}")
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                try:
                    chunk = json.loads(data)
                except ValueError as exc:
                    raise ModelError("malformed stream chunk") from exc
                for choice in chunk.get("choices") or []:
                    delta = (choice.get("delta") or {}).get("content")
                    if delta:
                        parts.append(delta)
                        await ctx.emit("text", delta)
        return "".join(parts)


agent = OpenAIAgent()
