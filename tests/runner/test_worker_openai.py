"""The OpenAI-compatible agent (runlane.agents.openai) in a real worker process against a
chat-completions server written here: a real HTTP server on loopback streaming SSE
chunks, answering 429 with Retry-After when told, sending `usage` at the end.

What is checked: a streamed reply is written as a few rows (its first token alone, the rest
coalesced), its cost is charged from `usage` (runs.cost, the charges ledger, weekly_spend),
a 429 is retried inside the attempt after its Retry-After, the thread's history (earlier
messages and this agent's replies) is sent, a Stop mid-stream cancels the run and closes
the connection, and the iteration cap bounds the requests. The API key and the message
text never reach a log line. The coalescing and Retry-After rules are also checked
alone, with a clock the test drives.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import psycopg
import pytest
import worker_helpers
from worker_helpers import MARKER, make_agent, run_row, run_state, submit, wait_until

from runlane.agents.openai import Coalescer, OpenAIAgent, cost_of, retry_after

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after

API_KEY = "sk-test-secret-key-0123456789"
OWNER = "owner-of-org-w"  # make_agent's organization's owner
TOKENS = [f"tok{i:03d} " for i in range(400)]  # 7 bytes each: 2,800 bytes in all
USAGE = {"prompt_tokens": 200, "completion_tokens": 400, "total_tokens": 600}


@dataclass
class Reply:
    """How the server answers one request."""

    status: int = 200
    retry_after: str | None = None
    tokens: list[str] = field(default_factory=lambda: ["Hel", "lo, ", "wor", "ld"])
    usage: dict[str, Any] | None = None
    hold: threading.Event | None = None  # after the first token, wait for it to be set
    endless: bool = False  # keep streaming until the client goes away


class Provider:
    """An OpenAI-compatible /v1/chat/completions on 127.0.0.1, answering from a script."""

    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.closed_by_client = threading.Event()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the stdlib's name
                length = int(self.headers.get("Content-Length", 0))
                provider.requests.append(
                    {
                        "at": time.monotonic(),
                        "path": self.path,
                        "authorization": self.headers.get("Authorization"),
                        "body": json.loads(self.rfile.read(length)),
                    }
                )
                reply = provider.script.pop(0) if provider.script else Reply()
                provider.answer(self, reply)

            def log_message(self, *args):  # keep test output quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def answer(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        if reply.status != 200:
            handler.send_response(reply.status)
            if reply.retry_after is not None:
                handler.send_header("Retry-After", reply.retry_after)
            handler.send_header("Content-Type", "application/json")
            handler.end_headers()
            handler.wfile.write(b'{"error": {"message": "slow down"}}')
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()

        def send(chunk: dict[str, Any]) -> None:
            handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            handler.wfile.flush()

        send({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
        for i, token in enumerate(reply.tokens):
            send({"choices": [{"index": 0, "delta": {"content": token}}]})
            if i == 0 and reply.hold is not None:
                reply.hold.wait(60)
        if reply.endless:
            deadline = time.monotonic() + 60
            try:
                while time.monotonic() < deadline:
                    send({"choices": [{"index": 0, "delta": {"content": "more "}}]})
                    time.sleep(0.02)
            except (BrokenPipeError, ConnectionResetError):
                self.closed_by_client.set()
            return
        if reply.usage is not None:
            send({"choices": [], "usage": reply.usage})
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def provider():
    p = Provider()
    yield p
    p.close()


def start_worker(workers, provider: Provider, **env: str):
    return workers(
        "--no-maintenance",
        "--agent",
        "runlane.agents.openai:agent",
        env={
            "RUNLANE_OPENAI_BASE_URL": provider.base_url,
            "RUNLANE_OPENAI_API_KEY": API_KEY,
            "RUNLANE_OPENAI_MODEL": "stub-model",
            **env,
        },
    )


def text_rows(conn: psycopg.Connection, run_id: int) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "select body from runlane.run_outputs where run_id = %s and kind = 'text' "
            "order by output_id",
            (run_id,),
        ).fetchall()
    ]


def test_a_reply_is_coalesced_costed_and_retried_after_a_429(conn, workers, provider):
    make_agent(conn, "agent-o")
    provider.script = [Reply(status=429, retry_after="1"), Reply(tokens=TOKENS, usage=USAGE)]
    worker = start_worker(
        workers, provider, RUNLANE_OPENAI_PRICE_INPUT="0.5", RUNLANE_OPENAI_PRICE_OUTPUT="1.5"
    )
    run_id = submit(conn, "agent-o", "thread-1", "say hello")
    wait_until(lambda: run_state(conn, run_id) == "succeeded", what="the model run finished")

    # The 429 was retried inside the one attempt, after the second its Retry-After asked.
    assert len(provider.requests) == 2
    assert provider.requests[1]["at"] - provider.requests[0]["at"] >= 0.9
    assert run_row(conn, run_id)["attempts"] == 1
    retry = worker.wait_for("agent.model_retry", where=lambda r: r["run.id"] == run_id)
    assert retry["http.status"] == 429 and retry["retry.wait_s"] == 1

    # Coalesced: the first token alone (it stamped first_response), then few rows, none
    # over the byte bound, together exactly the reply.
    rows = text_rows(conn, run_id)
    assert rows[0] == TOKENS[0]
    assert "".join(rows) == "".join(TOKENS)
    assert 2 <= len(rows) <= len(TOKENS) // 10
    assert all(len(r.encode()) < 2048 + len(TOKENS[0]) for r in rows)

    # Cost from usage: 200 x 0.5 / 1000 + 400 x 1.5 / 1000 = 0.7, charged once.
    assert run_row(conn, run_id)["cost"] == Decimal("0.7")
    assert conn.execute("select runlane.weekly_spend(%s)", (OWNER,)).fetchone()[0] == Decimal("0.7")
    assert conn.execute(
        "select amount from runlane.charges where run_id = %s", (run_id,)
    ).fetchall() == [(Decimal("0.7"),)]

    request = provider.requests[1]
    assert request["path"] == "/v1/chat/completions"
    assert request["authorization"] == f"Bearer {API_KEY}"
    body = request["body"]
    assert body["model"] == "stub-model" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][1]["content"] == f"say hello {MARKER}"

    worker.wait_for("run.finished", where=lambda r: r["run.id"] == run_id)
    first = [r for r in worker.events("run.first_response") if r["run.id"] == run_id]
    assert len(first) == 1
    assert not any(API_KEY in line for line in worker.raw_lines())


def test_the_threads_history_is_sent_with_the_agents_earlier_replies(conn, workers, provider):
    make_agent(conn, "agent-h")
    start_worker(workers, provider)
    first = submit(conn, "agent-h", "thread-1", "my name is Ada")
    wait_until(lambda: run_state(conn, first) == "succeeded", what="the first turn")
    submit(conn, "agent-h", "thread-2", "another thread")
    wait_until(lambda: len(provider.requests) == 2, what="the other thread's turn")
    second = submit(conn, "agent-h", "thread-1", "what is my name?")
    wait_until(lambda: run_state(conn, second) == "succeeded", what="the second turn")

    chat = provider.requests[2]["body"]["messages"]
    assert [(m["role"], m["content"]) for m in chat[1:]] == [
        ("user", f"my name is Ada {MARKER}"),
        ("assistant", "Hello, world"),
        ("user", f"what is my name? {MARKER}"),
    ]
    assert chat[0]["role"] == "system"


def test_a_stop_mid_stream_cancels_the_run_and_closes_the_connection(conn, workers, provider):
    make_agent(conn, "agent-s")
    provider.script = [Reply(tokens=["Once "], endless=True)]
    start_worker(workers, provider)
    run_id = submit(conn, "agent-s", "thread-1", "tell me a long story")
    wait_until(lambda: text_rows(conn, run_id), what="the first token")

    assert conn.execute("select runlane.cancel_run(%s)", (run_id,)).fetchone()[0] == "running"
    last = conn.execute(
        "select coalesce(max(output_id), 0) from runlane.run_outputs where run_id = %s", (run_id,)
    ).fetchone()[0]
    wait_until(lambda: run_state(conn, run_id) == "canceled", what="the run canceled")
    assert provider.closed_by_client.wait(60), "the stream's connection was not closed"
    # Nothing is written after the Stop.
    assert (
        conn.execute(
            "select count(*) from runlane.run_outputs where run_id = %s and output_id > %s",
            (run_id, last),
        ).fetchone()[0]
        == 0
    )
    assert len(provider.requests) == 1


def test_the_iteration_cap_bounds_the_requests_of_a_run(conn, workers, provider):
    make_agent(conn, "agent-c")
    conn.execute(
        "update runlane.platform_settings set agent_iteration_cap = 2 where org_id = 'org-w'"
    )
    holds = [threading.Event(), threading.Event()]
    provider.script = [Reply(tokens=["one"], hold=holds[0]), Reply(tokens=["two"], hold=holds[1])]
    start_worker(workers, provider)
    run_id = submit(conn, "agent-c", "thread-1", "first")
    for n, hold in enumerate(holds, start=1):
        wait_until(lambda n=n: len(provider.requests) == n, what=f"request {n}")
        # Sent while the reply streams: held, then taken as steering after the reply.
        submit(conn, "agent-c", "thread-1", f"more {n}", publish=False)
        hold.set()
    wait_until(lambda: run_state(conn, run_id) == "failed", what="the capped run failed")

    assert run_row(conn, run_id)["reason"] == "iteration_cap"
    assert len(provider.requests) == 2
    assert text_rows(conn, run_id) == ["one", "two"]
    # The second request answered the steering, after the first reply.
    chat = provider.requests[1]["body"]["messages"]
    assert [(m["role"], m["content"]) for m in chat[1:]] == [
        ("user", f"first {MARKER}"),
        ("assistant", "one"),
        ("user", f"more 1 {MARKER}"),
    ]


# --- the rules alone ------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_coalescer_writes_the_first_token_alone_then_by_time_or_size():
    written: list[str] = []

    async def emit(text: str) -> None:
        written.append(text)

    async def scenario() -> None:
        clock = Clock()
        c = Coalescer(emit, interval=0.25, max_bytes=10, clock=clock)  # exact in binary
        await c.add("a")
        assert written == ["a"]  # at once, alone
        await c.add("b")
        await c.add("c")
        assert written == ["a"] and c.due_in() == 0.25
        clock.now += 0.125
        await c.add("d")
        assert written == ["a"] and c.due_in() == 0.125
        clock.now += 0.125
        await c.add("e")  # the interval since the last write: written
        assert written == ["a", "bcde"] and c.due_in() is None
        await c.add("0123456789")  # 10 bytes pending: written before the interval
        assert written == ["a", "bcde", "0123456789"]
        await c.add("f")
        clock.now += 1
        assert c.due_in() == 0
        await c.flush()
        await c.add("tail")
        assert c.take() == "tail" and written[-1] == "f"

    asyncio.run(scenario())


def test_retry_after_reads_seconds_and_dates_and_cost_reads_usage():
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert retry_after("2") == 2 and retry_after(" 0.5 ") == 0.5
    assert retry_after(format_datetime(now + timedelta(seconds=7), usegmt=True), now) == 7
    assert retry_after(format_datetime(now - timedelta(seconds=7), usegmt=True), now) == 0
    assert retry_after(None) is None and retry_after("soon") is None
    assert cost_of(USAGE, 0.5, 1.5) == pytest.approx(0.7)
    assert cost_of(None, 0.5, 1.5) == 0


def test_the_wait_before_a_retry_is_bounded():
    agent = OpenAIAgent(base_url="http://127.0.0.1:9/v1", retries=2, retry_max_wait=5)
    assert agent._wait(0, 429, "3") == 3
    assert agent._wait(0, 503, None) == 0.5 and agent._wait(1, 503, None) == 1
    with pytest.raises(Exception, match="Retry-After 60 s"):
        agent._wait(0, 429, "60")  # longer than the attempt waits: the run's retry takes over
    with pytest.raises(Exception, match="after 3 tries"):
        agent._wait(2, 429, "1")
