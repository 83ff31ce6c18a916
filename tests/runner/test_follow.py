"""`runlane follow` and `runlane.stream(events=True)` against real workers: the README's
end-of-stream rule, the superseded partial output of an attempt that started over, and
follow's exit code per outcome (0 only when the run succeeded)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from contextlib import aclosing

import worker_helpers
from stream_agent import chunk
from worker_helpers import DEADLINE, HERE, make_agent, run_state, submit, wait_until

import runlane
from runlane.stream import FOLLOW_EXIT

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after

MARK = "[attempt 1 did not finish; its partial output above is superseded]"


def follow(db_dsn: str, run_id: int) -> subprocess.Popen:
    """`runlane follow RUN_ID` as a real process (started before the worker, so it follows live)."""
    return subprocess.Popen(
        [sys.executable, "-m", "runlane", "follow", str(run_id), "--dsn", db_dsn],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(HERE)},
    )


def finished(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=DEADLINE)
    return proc.returncode, out, err


def test_follow_marks_a_failed_attempts_partial_output_superseded_and_exits_0(
    conn, db_dsn, workers
):
    make_agent(conn, "agent-f")
    run_id = submit(conn, "agent-f", "thread-1", "answer me")
    proc = follow(db_dsn, run_id)
    workers("--agent", "attempt_agent:agent", env={"ATTEMPT_AGENT_FAILS": "1"})
    code, out, err = finished(proc)
    assert run_state(conn, run_id) == "succeeded"
    assert code == 0, err
    assert out == (
        "[a1 part 0][a1 part 1][a1 part 2]\n" + MARK + "\n"
        "[a2 part 0][a2 part 1][a2 part 2][a2 reply]\n"
    )
    assert f"[run {run_id} succeeded]" in err

    # Resumed after the superseded part: a line names how far the superseded outputs went.
    through = conn.execute("select runlane.superseded_through(%s)", (run_id,)).fetchone()[0]
    resumed = subprocess.run(
        [
            sys.executable,
            "-m",
            "runlane",
            "follow",
            str(run_id),
            "--after",
            str(through),
            "--dsn",
            db_dsn,
        ],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == (
        f"[outputs up to {through} were superseded by an attempt that started over]\n"
        "[a2 part 0][a2 part 1][a2 part 2][a2 reply]\n"
    )


def test_stream_events_say_what_was_superseded_and_how_the_run_ended(conn, db_dsn, workers):
    make_agent(conn, "agent-e")
    run_id = submit(conn, "agent-e", "thread-1", "answer me")
    workers("--agent", "attempt_agent:agent", env={"ATTEMPT_AGENT_FAILS": "1"})

    async def read() -> list[dict]:
        async with aclosing(runlane.stream(db_dsn, run_id, events=True, poll=0.2)) as items:
            return [item async for item in items]

    items = asyncio.run(read())
    rows = conn.execute(
        "select output_id, attempt, body from runlane.outputs_since(%s)", (run_id,)
    ).fetchall()
    last_of_attempt_1 = max(oid for oid, attempt, _ in rows if attempt == 1)
    expected = [("output", oid) for oid, attempt, _ in rows if attempt == 1]
    expected += [("superseded", last_of_attempt_1)]
    expected += [("output", oid) for oid, attempt, _ in rows if attempt == 2]
    expected += [("end", None)]
    assert [(i["event"], i.get("output_id", i.get("through"))) for i in items] == expected
    assert items[len([r for r in rows if r[1] == 1])]["attempts"] == [1]
    end = items[-1]
    assert (end["state"], end["attempt"], end["last_output_id"], end["superseded_through"]) == (
        "succeeded",
        2,
        rows[-1][0],
        last_of_attempt_1,
    )
    assert (
        conn.execute("select runlane.superseded_through(%s)", (run_id,)).fetchone()[0]
        == last_of_attempt_1
    )
    # without events: exactly the outputs, as before
    plain = asyncio.run(_plain(db_dsn, run_id))
    assert [o["output_id"] for o in plain] == [r[0] for r in rows]


async def _plain(db_dsn: str, run_id: int) -> list[dict]:
    async with aclosing(runlane.stream(db_dsn, run_id, poll=0.2)) as items:
        return [item async for item in items]


def test_a_run_resumed_from_its_checkpoint_supersedes_nothing(conn, db_dsn, workers):
    """A worker killed mid-stream: the next attempt resumes from the checkpoint, so
    follow shows every chunk once and no superseded marker."""
    make_agent(conn, "agent-r")
    conn.execute(
        "update runlane.platform_settings set agent_iteration_cap = 100000 where org_id = 'org-w'"
    )
    run_id = submit(conn, "agent-r", "thread-1", "stream to me")
    env = {"STREAM_AGENT_CHUNKS": "60", "STREAM_AGENT_DELAY": "0.02"}
    proc = follow(db_dsn, run_id)
    doomed = workers("--agent", "stream_agent:agent", "--lease", "2", "--no-maintenance", env=env)
    wait_until(
        lambda: conn.execute(
            "select count(*) >= 10 from runlane.run_outputs where run_id = %s", (run_id,)
        ).fetchone()[0],
        what="ten chunks",
    )
    doomed.signal(signal.SIGKILL)
    doomed.wait_exit()
    workers(
        "--agent",
        "stream_agent:agent",
        "--lease",
        "2",
        "--tick-interval",
        "0.3",
        "--leader-retry",
        "0.3",
        env=env,
    )
    code, out, err = finished(proc)
    assert run_state(conn, run_id) == "succeeded"
    assert (
        conn.execute("select attempts from runlane.runs where run_id = %s", (run_id,)).fetchone()[0]
        == 2
    )
    assert code == 0, err
    assert out == "".join(chunk(n) for n in range(60)) + "\n"
    assert "superseded" not in out


def test_follow_exits_3_when_the_run_failed(conn, db_dsn, workers):
    make_agent(conn, "agent-x")
    run_id = submit(conn, "agent-x", "thread-1", "answer me", publish=False)
    conn.execute("update runlane.runs set max_attempts = 1 where run_id = %s", (run_id,))
    conn.execute("select runlane.publish_run(%s)", (run_id,))
    proc = follow(db_dsn, run_id)
    workers("--agent", "attempt_agent:agent", env={"ATTEMPT_AGENT_FAILS": "9"})
    code, out, err = finished(proc)
    assert run_state(conn, run_id) == "failed"
    assert code == FOLLOW_EXIT["failed"] == 3, err
    assert out == "[a1 part 0][a1 part 1][a1 part 2]\n"  # nothing replaced it: not superseded
    assert f"[run {run_id} failed (attempts_exhausted)]" in err


def test_follow_exits_4_when_the_run_was_canceled(conn, db_dsn):
    make_agent(conn, "agent-c")
    run_id = submit(conn, "agent-c", "thread-1", "never mind", publish=False)
    proc = follow(db_dsn, run_id)
    conn.execute("select runlane.cancel_run(%s)", (run_id,))
    code, _out, err = finished(proc)
    assert code == FOLLOW_EXIT["canceled"] == 4, err


def test_follow_exits_5_when_the_run_was_skipped(conn, db_dsn, workers):
    make_agent(conn, "agent-s")
    conn.execute("update runlane.agents set enabled = false where agent_id = 'agent-s'")
    run_id = conn.execute(
        "select runlane_test.queued_run('agent-s', 'background', 'manual')"
    ).fetchone()[0]
    conn.execute("select runlane.publish_run(%s)", (run_id,))
    proc = follow(db_dsn, run_id)
    workers("--agent", "attempt_agent:agent", lanes=("background",))
    code, _out, err = finished(proc)
    assert run_state(conn, run_id) == "skipped"
    assert code == FOLLOW_EXIT["skipped"] == 5, err


def test_follow_exits_6_for_an_unknown_run(db_dsn):
    code, _out, err = finished(follow(db_dsn, 987654))
    assert code == FOLLOW_EXIT["unknown"] == 6
    assert err.startswith("RL008")
