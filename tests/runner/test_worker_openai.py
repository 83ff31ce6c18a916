"""The OpenAI-compatible agent (runlane.agents.openai) in a real worker process against
the fake chat-completions server of fake_openai.py (real HTTP on loopback, SSE chunks).

What is checked: a streamed reply is written as a few rows (its first token alone, the rest
coalesced), its cost is charged from `usage` (runs.cost, the charges ledger, weekly_spend),
a 429 is retried inside the attempt after its Retry-After, the thread's history (earlier
messages and this agent's replies) is sent, a Stop mid-stream cancels the run and closes
the connection, and the iteration cap bounds the requests. A provider's failures: a 4xx
(401, 400, 404) fails the run after one request with the provider's message as its error;
408, 429 and 5xx are retried up to `attempts` requests, a Retry-After over retry_max_wait
is not cut short; a stall before the first token or between tokens, a malformed chunk and
a stream cut off before finish_reason/[DONE] fail the run at once, keeping what was
written; a slow stream is no stall. Options come from the environment and
`--agent-option`. The API key, the message text and the provider's message never reach a
log line. The coalescing and Retry-After rules are also checked alone, with a clock the
test drives.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from email.utils import format_datetime

import psycopg
import pytest
import worker_helpers
from fake_openai import FakeOpenAI, Reply
from worker_helpers import MARKER, make_agent, run_row, run_state, submit, wait_until

from runlane.agents.openai import (
    Coalescer,
    ModelError,
    OpenAIAgent,
    cost_of,
    provider_message,
    retry_after,
)

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after

API_KEY = "sk-test-secret-key-0123456789"
OWNER = "owner-of-org-w"  # make_agent's organization's owner
TOKENS = [f"tok{i:03d} " for i in range(400)]  # 7 bytes each: 2,800 bytes in all
USAGE = {"prompt_tokens": 200, "completion_tokens": 400, "total_tokens": 600}


@pytest.fixture
def provider():
    p = FakeOpenAI()
    yield p
    p.close()


def start_worker(workers, provider: FakeOpenAI, *options: str, **env: str):
    """A worker running the agent against `provider`; `options` are its --agent-option."""
    return workers(
        "--no-maintenance",
        "--agent",
        "runlane.agents.openai:agent",
        *[arg for option in options for arg in ("--agent-option", option)],
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
    agent = OpenAIAgent(base_url="http://127.0.0.1:9/v1", attempts=3, retry_max_wait=5)
    assert agent._wait(1, 429, "HTTP 429", 3) == 3
    assert agent._wait(1, 503, "HTTP 503", None) == 1 and agent._wait(2, 503, "", None) == 2
    with pytest.raises(ModelError, match="Retry-After 60 s") as refused:
        agent._wait(1, 429, "HTTP 429", 60)  # longer than it waits: never cut short
    assert refused.value.failure == "retry_after_too_long"
    with pytest.raises(ModelError, match="after 3 requests"):
        agent._wait(3, 429, "HTTP 429", 1)


def test_options_come_from_the_environment_then_the_command_line(monkeypatch):
    monkeypatch.setenv("RUNLANE_OPENAI_FIRST_TOKEN_TIMEOUT", "12.5")
    monkeypatch.setenv("RUNLANE_OPENAI_ATTEMPTS", "2")
    agent = OpenAIAgent()
    assert (agent.connect_timeout, agent.first_token_timeout, agent.token_timeout) == (10, 12.5, 30)
    assert agent.attempts == 2 and agent.retry_max_wait == 20
    agent.configure(first_token_timeout="5", attempts="1", include_usage="off")
    assert (agent.first_token_timeout, agent.attempts, agent.include_usage) == (5, 1, False)
    with pytest.raises(ValueError, match="never given on a command line"):
        agent.configure(api_key="sk-x")
    with pytest.raises(ValueError, match="unknown option 'retries'"):
        agent.configure(retries="2")
    with pytest.raises(ValueError, match="attempts"):
        agent.configure(attempts="0")
    monkeypatch.setenv("RUNLANE_OPENAI_TOKEN_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="RUNLANE_OPENAI_TOKEN_TIMEOUT"):
        OpenAIAgent()


def test_a_retired_variable_stops_the_agent_and_names_its_successor(monkeypatch):
    monkeypatch.setenv("RUNLANE_OPENAI_RETRIES", "4")
    with pytest.raises(ValueError, match="RUNLANE_OPENAI_RETRIES .* RUNLANE_OPENAI_ATTEMPTS"):
        OpenAIAgent()


def test_the_providers_message_is_read_from_its_error_answer():
    body = b'{"error": {"message": "Incorrect API key", "type": "invalid_request_error"}}'
    assert provider_message(body) == "Incorrect API key (invalid_request_error)"
    assert provider_message(b'{"error": "model overloaded"}') == "model overloaded"
    assert provider_message(b"<html>Bad\n gateway</html>") == "<html>Bad gateway</html>"
    assert len(provider_message(b"x" * 5000)) == 600


def test_a_worker_refuses_an_option_its_agent_does_not_take(db_dsn):
    args = [sys.executable, "-m", "runlane", "worker", "--dsn", db_dsn, "--lane", "interactive"]
    for agent, option, said in [
        ("runlane.agents.openai:agent", "first_token_timout=5", "unknown option"),
        ("runlane.agents.openai:agent", "api_key=sk-x", "never given on a command line"),
        ("runlane.agents.openai:agent", "attempts", "NAME=VALUE"),
        ("runlane.agents.echo:agent", "attempts=2", "take no options"),
    ]:
        result = subprocess.run(
            [*args, "--agent", agent, "--agent-option", option],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 2 and said in result.stderr, result.stderr


# --- a provider's failures, in a real worker --------------------------------------------


def failed_run(conn, run_id: int) -> dict:
    wait_until(lambda: run_state(conn, run_id) == "failed", what=f"run {run_id} failed")
    return run_row(conn, run_id)


def test_a_4xx_fails_the_run_at_once_with_the_providers_message(conn, workers, provider):
    make_agent(conn, "agent-4")
    worker = start_worker(workers, provider)
    for status, words in [
        (401, "Incorrect API key provided"),
        (400, "This model's maximum context length is 8192 tokens"),
        (404, "The model stub-model does not exist"),
    ]:
        before = len(provider.requests)
        provider.script = [Reply(status=status, error=f"{words} {MARKER}")]
        run_id = submit(conn, "agent-4", f"thread-{status}", "hello")
        row = failed_run(conn, run_id)
        # One request; the run is not retried (attempts 1 of its max_attempts 3).
        assert len(provider.requests) == before + 1
        assert (row["attempts"], row["max_attempts"], row["reason"]) == (1, 3, "error")
        assert row["last_error"].startswith(f"ModelError: HTTP {status} from chat completions: ")
        assert f"{words} {MARKER}" in row["last_error"]  # the provider's words, kept
        failed = worker.wait_for("agent.model_failed", where=lambda r, i=run_id: r["run.id"] == i)
        assert failed["http.status"] == status and failed["model.failure"] == "http_status"
    assert not worker.events("agent.model_retry")
    # The logs never hold the provider's message (the fixture checks every line for MARKER).


def test_408_429_and_5xx_are_retried_a_bounded_number_of_times(conn, workers, provider):
    make_agent(conn, "agent-5")
    start_worker(workers, provider)

    provider.script = [Reply(status=408, retry_after="0"), Reply()]
    ok = submit(conn, "agent-5", "thread-1", "hello")
    wait_until(lambda: run_state(conn, ok) == "succeeded", what="the 408 retried")
    assert len(provider.requests) == 2

    # A provider answering 500: three requests (waits 1 s, 2 s), then the run fails.
    provider.script = [Reply(status=500, error=f"boom {MARKER}") for _ in range(5)]
    started = time.monotonic()
    run_id = submit(conn, "agent-5", "thread-2", "hello")
    row = failed_run(conn, run_id)
    took = time.monotonic() - started
    assert len(provider.requests) == 2 + 3 and row["attempts"] == 1
    assert "HTTP 500" in row["last_error"] and "gave up after 3 requests" in row["last_error"]
    assert f"boom {MARKER}" in row["last_error"]
    at = [r["at"] for r in provider.requests[2:]]
    assert at[1] - at[0] >= 0.9 and at[2] - at[1] >= 1.9
    assert took < 30

    # Retry-After longer than retry_max_wait (20 s): never cut short, the run fails now.
    provider.script = [Reply(status=429, retry_after="120")]
    run_id = submit(conn, "agent-5", "thread-3", "hello")
    row = failed_run(conn, run_id)
    assert len(provider.requests) == 6 and row["attempts"] == 1
    assert "Retry-After 120 s is longer than the 20 s waited" in row["last_error"]


def test_stalls_bad_json_and_a_cut_off_stream_fail_the_run(conn, workers, provider):
    make_agent(conn, "agent-t")
    # The timeouts from the command line (first token) and the environment (between).
    worker = start_worker(
        workers, provider, "first_token_timeout=1.5", RUNLANE_OPENAI_TOKEN_TIMEOUT="1.5"
    )

    # Slow is not stalled: 0.5 s between tokens under a 1.5 s token timeout succeeds.
    provider.script = [Reply(delay=0.5, gap=0.5, tokens=["a", "b", "c", "d"])]
    run_id = submit(conn, "agent-t", "thread-0", "hello")
    wait_until(lambda: run_state(conn, run_id) == "succeeded", what="the slow reply")
    assert "".join(text_rows(conn, run_id)) == "abcd"

    cases = [
        (Reply(delay=30), "first_token_timeout", "first-token timeout (1.5 s)", ""),
        (Reply(stall_first=True), "first_token_timeout", "first-token timeout (1.5 s)", ""),
        (Reply(tokens=["a", "b", "c"], stall_after=2), "token_timeout", "silent", "ab"),
        (Reply(tokens=["a", "b"], bad_json=True), "malformed", "not the expected JSON", "ab"),
        (Reply(tokens=["a", "b"], truncate=True), "truncated", "cut off", "ab"),
    ]
    for n, (reply, failure, said, kept) in enumerate(cases, start=1):
        before = len(provider.requests)
        provider.script = [reply]
        started = time.monotonic()
        run_id = submit(conn, "agent-t", f"thread-{n}", "hello")
        row = failed_run(conn, run_id)
        assert time.monotonic() - started < 20, failure
        assert len(provider.requests) == before + 1, failure  # not tried again
        assert row["attempts"] == 1 and row["reason"] == "error", failure
        assert row["last_error"].startswith("ModelError: ") and said in row["last_error"]
        assert "".join(text_rows(conn, run_id)) == kept, failure  # what came is kept
        logged = worker.wait_for("agent.model_failed", where=lambda r, i=run_id: r["run.id"] == i)
        assert logged["model.failure"] == failure
    assert provider.closed_by_client.is_set()  # a stalled stream's connection is closed


@pytest.fixture
def unanswered_port():
    """A port whose listener never accepts and whose backlog is full: a connection to it
    is neither refused nor opened (the kernel drops the handshake)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.1", port))
        fillers.append(filler)
    yield port
    for sock in (*fillers, listener):
        sock.close()


@pytest.mark.parametrize("how", ["refused", "connect_timeout"])
def test_a_connection_that_cannot_be_opened_is_tried_attempts_times(
    conn, workers, unanswered_port, how
):
    make_agent(conn, "agent-n")
    if how == "refused":
        closed = FakeOpenAI()
        base_url = closed.base_url
        closed.close()  # nothing listens on its port now
    else:
        base_url = f"http://127.0.0.1:{unanswered_port}/v1"
    worker = workers(
        "--no-maintenance",
        "--agent",
        "runlane.agents.openai:agent",
        "--agent-option",
        "attempts=2",
        "--agent-option",
        "connect_timeout=0.5",
        env={"RUNLANE_OPENAI_BASE_URL": base_url, "RUNLANE_OPENAI_MODEL": "stub-model"},
    )
    run_id = submit(conn, "agent-n", "thread-1", "hello")
    row = failed_run(conn, run_id)
    assert row["attempts"] == 1 and "no connection" in row["last_error"]
    assert "gave up after 2 requests" in row["last_error"]
    if how == "connect_timeout":
        assert "ConnectTimeout" in row["last_error"]
    retry = worker.wait_for("agent.model_retry")
    assert retry["http.status"] == 0 and retry["retry.wait_s"] == 1
    assert len(worker.events("agent.model_retry")) == 1
