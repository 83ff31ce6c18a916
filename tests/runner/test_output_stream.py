"""Output streams end to end: runlane.stream and `runlane follow` against real worker
processes. A consumer that disconnects at random points (mid-page, and while waiting
for a notification) and resumes with its last output id reassembles exactly what the
run wrote, in order, with no gap and no repeat, also across a kill -9 of the worker and
the run's resumption on another one. The notification carries ids only."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
import uuid
from contextlib import aclosing

import psycopg
import pytest
import worker_helpers
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from stream_agent import chunk
from worker_helpers import make_agent, run_state, submit

import runlane

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after

MAINTAIN = ("--tick-interval", "0.3", "--leader-retry", "0.3")
VISIBLE = """
select output_id, attempt, body from runlane.run_outputs
where run_id = %s and kind in ('text', 'final', 'message_tool', 'card') order by output_id
"""


def streamed_run(conn: psycopg.Connection, agent_id: str) -> int:
    make_agent(conn, agent_id)
    conn.execute(
        "update runlane.platform_settings set agent_iteration_cap = 100000 where org_id = 'org-w'"
    )
    return submit(conn, agent_id, "thread-1", "stream to me")


async def consume(dsn: str, run_id: int, rng: random.Random, on_output=None):
    """Read the run's stream to its end, leaving it after a random number of outputs or a
    random time (possibly while it waits for a notification) and resuming each time with
    the last output id seen. Returns (outputs seen, sessions, sessions left early)."""
    seen: list[tuple[int, int, str]] = []
    sessions = left = 0
    while True:
        sessions += 1
        budget = rng.randint(1, 150)
        finished = False
        try:
            async with asyncio.timeout(rng.uniform(0.05, 1.0)):
                async with aclosing(
                    runlane.stream(dsn, run_id, after=seen[-1][0] if seen else 0, poll=0.2)
                ) as outputs:
                    async for output in outputs:
                        seen.append((output["output_id"], output["attempt"], output["body"]))
                        if on_output:
                            on_output(len(seen))
                        budget -= 1
                        if budget == 0:
                            break
                    else:
                        finished = True
        except TimeoutError:
            pass
        if finished:
            return seen, sessions, left
        left += 1


def check_reassembly(conn, run_id: int, seen, chunks: int) -> None:
    ids = [output_id for output_id, _, _ in seen]
    assert len(ids) == len(set(ids)), "an output was yielded twice"
    assert ids == sorted(ids), "outputs were yielded out of order"
    assert [tuple(row) for row in conn.execute(VISIBLE, (run_id,)).fetchall()] == seen, (
        "the stream differs from the run's visible outputs (a gap)"
    )
    assert "".join(body for _, _, body in seen) == "".join(chunk(n) for n in range(chunks))


def test_a_consumer_that_keeps_reconnecting_reassembles_1000_streamed_outputs(
    conn, db_dsn, workers
):
    run_id = streamed_run(conn, "agent-stream")
    workers(
        "--agent",
        "stream_agent:agent",
        env={"STREAM_AGENT_CHUNKS": "1000", "STREAM_AGENT_DELAY": "0.002"},
    )
    seen, sessions, left = asyncio.run(consume(db_dsn, run_id, random.Random(8)))
    assert run_state(conn, run_id) == "succeeded"
    check_reassembly(conn, run_id, seen, 1000)
    assert left >= 5, f"the consumer left only {left} times in {sessions} sessions"


def test_a_reconnecting_consumer_follows_a_run_across_a_worker_crash_and_resume(
    conn, db_dsn, workers
):
    run_id = streamed_run(conn, "agent-crash")
    env = {"STREAM_AGENT_CHUNKS": "400", "STREAM_AGENT_DELAY": "0.01"}
    doomed = workers("--agent", "stream_agent:agent", "--lease", "2", "--no-maintenance", env=env)
    crashed = []

    def crash_at(count: int) -> None:
        if count == 100 and not crashed:
            doomed.signal(signal.SIGKILL)
            doomed.wait_exit()
            crashed.append(
                workers("--agent", "stream_agent:agent", "--lease", "2", *MAINTAIN, env=env)
            )

    seen, _sessions, left = asyncio.run(consume(db_dsn, run_id, random.Random(3), crash_at))
    assert crashed and run_state(conn, run_id) == "succeeded"
    check_reassembly(conn, run_id, seen, 400)
    attempts = [attempt for _, attempt, _ in seen]
    assert attempts[0] == 1 and attempts[-1] == 2, "the run was not resumed by a new attempt"
    assert left >= 3


def test_each_output_notifies_its_stream_token_never_its_ids_or_text(conn, db_dsn):
    conn.execute("select runlane_test.agent('agent-n')")
    run_id = conn.execute(
        "select runlane_test.queued_run('agent-n', 'interactive', 'interactive')"
    ).fetchone()[0]
    fence = conn.execute("select runlane_test.claimed(%s)", (run_id,)).fetchone()[0]
    with psycopg.connect(db_dsn, autocommit=True) as listener:
        listener.execute("LISTEN runlane_outputs")
        output_ids = []
        for kind in ("text", "progress"):
            conn.execute(
                "select runlane.append_output(%s, %s, %s, 'secret words')", (run_id, fence, kind)
            )
            output_ids.append(
                conn.execute(
                    "select max(output_id) from runlane.run_outputs where run_id = %s", (run_id,)
                ).fetchone()[0]
            )
        notes = list(listener.notifies(timeout=5, stop_after=2))
    (token,) = conn.execute("select runlane.stream_token(%s)", (run_id,)).fetchone()
    assert len(set(output_ids)) == 2
    assert [json.loads(n.payload) for n in notes] == [{"stream": token}, {"stream": token}]
    assert all("secret" not in n.payload for n in notes)  # the token alone: no id, no text


@pytest.fixture
def api_only_dsn(db_dsn, conn):
    """A login role holding runlane_api and nothing else."""
    role = f"stream_reader_{uuid.uuid4().hex[:8]}"
    conn.execute(f'create role "{role}" login in role runlane_api')
    conn.execute("select runlane.scope_api_login(%s, null)", (role,))
    conn.execute(f'grant connect on database "{conninfo_to_dict(db_dsn)["dbname"]}" to "{role}"')
    yield make_conninfo(db_dsn, user=role)
    conn.execute(f'revoke connect on database "{conninfo_to_dict(db_dsn)["dbname"]}" from "{role}"')
    conn.execute(f'drop role "{role}"')


def test_stream_and_follow_need_only_the_api_role_and_resume_after_an_id(
    conn, workers, api_only_dsn
):
    run_id = streamed_run(conn, "agent-follow")
    workers(
        "--agent",
        "stream_agent:agent",
        env={"STREAM_AGENT_CHUNKS": "30", "STREAM_AGENT_DELAY": "0.01"},
    )
    with pytest.raises(psycopg.errors.InsufficientPrivilege), psycopg.connect(api_only_dsn) as api:
        api.execute("select count(*) from runlane.run_outputs")
    out = subprocess.run(
        [sys.executable, "-m", "runlane", "follow", str(run_id), "--dsn", api_only_dsn],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "".join(chunk(n) for n in range(30)) + "\n"
    assert run_state(conn, run_id) == "succeeded"

    tenth = conn.execute(VISIBLE, (run_id,)).fetchall()[9][0]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "runlane",
            "follow",
            str(run_id),
            "--after",
            str(tenth),
            "--dsn",
            api_only_dsn,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.stdout == "".join(chunk(n) for n in range(10, 30)) + "\n"

    unknown = subprocess.run(
        [sys.executable, "-m", "runlane", "follow", "999999", "--dsn", api_only_dsn],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert unknown.returncode == 6 and "RL008" in unknown.stderr  # follow's code for RL008
