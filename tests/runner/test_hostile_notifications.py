"""Forged notification payloads are untrusted hints: counted, ignored, and harmless.

Any login that may NOTIFY can send anything on runlane's channels. A worker's listener
that raised on `{"lane":[]}` stranded the real notifications delivered behind it (they
waited for the next scan), and `{"run_id":1e400}` on runlane_outputs killed every
`runlane.stream` and `runlane follow`. Here the workers scan once an hour and the stream
polls once an hour, so only a notification can wake them: what the forged payloads do to
the real ones behind them is what decides each test.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import threading

import httpx
import psycopg
import worker_helpers
from worker_helpers import DEADLINE, HERE, claimed_chat_run, make_agent, run_state, wait_until

from runlane import hints
from runlane.stream import stream

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after

SECRET = "forged-payload-content"
FORGED_RUNS = [
    '{"lane":[]}',
    '{"lane":{"a":1}}',
    '{"lane":"nowhere"}',
    '{"lane":1e400}',
    "[1, 2, 3]",
    '"just a string"',
    f"not json at all {SECRET}",
    '{"lane":"interactive"' + " " * 2000 + "}",
]
FORGED_OUTPUTS = [
    '{"run_id":1e400}',
    '{"run_id":"12"}',
    '{"run_id":true}',
    '{"run_id":[1]}',
    '{"run_id":99999999999999999999999999}',
    '{"run_id":' + "9" * 5000 + "}",
    f"{{{SECRET}",
    "null",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_forged_run_notifications_are_ignored_and_strand_nothing_behind_them(conn, workers):
    make_agent(conn, "agent-forged")
    port = _free_port()
    worker = workers("--no-maintenance", "--scan-interval", "3600", "--metrics-port", str(port))
    worker.wait_for("dispatch.ready")
    worker.wait_for("listener.listening")
    # One transaction: the forged payloads are delivered first, the real one behind them.
    with conn.transaction():
        for payload in FORGED_RUNS:
            conn.execute("select pg_notify('runlane_runs', %s)", (payload,))
        _m, run_id, _d = conn.execute(
            "select * from runlane.submit_message('agent-forged', 'thread-1', 'hello')"
        ).fetchone()
        conn.execute("select runlane.publish_run(%s)", (run_id,))
    wait_until(
        lambda: run_state(conn, run_id) == "succeeded",
        what="the real run behind the forged payloads ran (the scan is an hour away)",
    )

    forged = len(FORGED_RUNS)  # each one counted, none of them raised
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    match = re.search(
        r'^runlane_notifications_ignored_total\{channel="runlane_runs"\} (\S+)$', text, re.M
    )
    assert match and float(match[1]) == forged, text
    lines = worker.events("notify.payload_ignored")
    assert len(lines) == 1, "one log line per minute, not one per payload"
    assert lines[0]["notify.channel"] == "runlane_runs"
    assert all(SECRET not in line for line in worker.raw_lines()), "no payload content is logged"


def test_a_forged_output_notification_does_not_kill_a_stream(conn, db_dsn):
    make_agent(conn, "agent-stream")
    run_id, fence = claimed_chat_run(conn, "agent-stream", text="stream me")
    conn.execute("select runlane.append_output(%s, %s, 'text', 'first ')", (run_id, fence))

    async def follow() -> list[str]:
        bodies = []
        async for output in stream(db_dsn, run_id, poll=3600):
            bodies.append(output["body"])
            if len(bodies) == 1:
                # Now waiting for a notification: the forged ones arrive first, then the
                # real one of an output committed with the finish.
                with psycopg.connect(db_dsn, autocommit=True) as other, other.transaction():
                    for payload in FORGED_OUTPUTS:
                        other.execute("select pg_notify('runlane_outputs', %s)", (payload,))
                    other.execute(
                        "select runlane.append_output(%s, %s, 'text', 'last')", (run_id, fence)
                    )
                    other.execute("select runlane.finish_run(%s, %s, 'succeeded')", (run_id, fence))
        return bodies

    before = hints.IGNORED[hints.OUTPUTS]
    bodies = asyncio.run(asyncio.wait_for(follow(), timeout=120))
    assert bodies == ["first ", "last"]
    assert run_state(conn, run_id) == "succeeded"
    # Those the stream read before the real one (one transaction: delivered in order).
    assert hints.IGNORED[hints.OUTPUTS] - before == len(FORGED_OUTPUTS)


class _Pipe(threading.Thread):
    """Everything a pipe gave so far, read as it comes (no line needed)."""

    def __init__(self, pipe):
        super().__init__(daemon=True)
        self.fd, self.data = pipe.fileno(), b""

    def run(self) -> None:
        while chunk := os.read(self.fd, 4096):
            self.data += chunk

    @property
    def text(self) -> str:
        return self.data.decode()


def test_runlane_follow_logs_a_forged_payload_on_stderr_never_in_the_runs_text(conn, db_dsn):
    """stdout of `runlane follow` is the run's text and nothing else (a script pipes it);
    the line about an ignored payload goes to stderr, with the final state."""
    make_agent(conn, "agent-follow")
    run_id, fence = claimed_chat_run(conn, "agent-follow", text="follow me")
    conn.execute("select runlane.append_output(%s, %s, 'text', 'first ')", (run_id, fence))
    proc = subprocess.Popen(
        [sys.executable, "-m", "runlane", "follow", str(run_id), "--dsn", db_dsn],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        },
    )
    out, err = _Pipe(proc.stdout), _Pipe(proc.stderr)
    out.start()
    err.start()
    try:
        wait_until(lambda: out.text.startswith("first "), what="follow printed the first output")
        # The follower listens (it printed a page, after its LISTEN): a forger's payloads.
        with psycopg.connect(db_dsn, autocommit=True) as forger, forger.transaction():
            for payload in FORGED_OUTPUTS:
                forger.execute("select pg_notify('runlane_outputs', %s)", (payload,))
        wait_until(
            lambda: "notify.payload_ignored" in out.text + err.text,
            what="the follower read the forged payloads",
        )
        conn.execute("select runlane.append_output(%s, %s, 'text', 'last')", (run_id, fence))
        conn.execute("select runlane.finish_run(%s, %s, 'succeeded')", (run_id, fence))
        assert proc.wait(timeout=DEADLINE) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out.join(timeout=DEADLINE)
    err.join(timeout=DEADLINE)
    assert out.text == "first last\n"
    lines = err.text.splitlines()
    ignored = [json.loads(line) for line in lines if "notify.payload_ignored" in line]
    assert len(ignored) == 1 and ignored[0]["notify.channel"] == "runlane_outputs"
    assert f"[run {run_id} succeeded]" in lines
    assert SECRET not in err.text


def test_hint_parsers_never_raise_and_read_only_real_payloads():
    assert hints.lane_of('{"run_id": 7, "lane": "interactive"}') == "interactive"
    assert hints.lane_of(b'{"run_id": 7, "lane": "background"}') == "background"
    assert hints.stream_of(json.dumps({"stream": "0f" * 16})) == "0f" * 16
    for payload in FORGED_RUNS:
        assert hints.lane_of(payload) is None, payload
    assert hints.lane_of(b"\xff\xfe") is None
    for payload in FORGED_OUTPUTS:
        assert hints.stream_of(payload) is None, payload
