"""Crashes and shutdowns with real worker processes: kill -9 mid-run (background reaped,
interactive resumed from its checkpoint), late writes of a killed worker refused, and
SIGTERM releasing a long run to another worker."""

from __future__ import annotations

import signal

import psycopg
import pytest
import worker_helpers
from worker_helpers import (
    background_run,
    make_agent,
    run_row,
    run_state,
    submit,
    visible_outputs,
    wait_until,
)

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after

SLOW = {"RUNLANE_ECHO_DELAY": "1.5", "RUNLANE_ECHO_CHUNKS": "4"}
MAINTAIN = ("--tick-interval", "0.3", "--leader-retry", "0.3")


def checkpoint_matches_outputs(conn, run_id: int) -> bool:
    """The run saved a checkpoint covering every chunk it streamed (a safe moment to kill)."""
    row = run_row(conn, run_id)
    outputs = visible_outputs(conn, run_id)
    if not row["checkpoint"] or not outputs:
        return False
    return row["checkpoint"]["state"]["emitted"] == sum(len(body) for _, body in outputs)


def test_kill_9_mid_background_run_is_reaped_stale_and_the_agent_can_run_again(conn, workers):
    make_agent(conn, "agent-k")
    doomed = workers("--lease", "2", "--no-maintenance", lanes=("background",), env=SLOW)
    run_id = background_run(conn, "agent-k")
    doomed.wait_for("run.first_response", where=lambda r: r["run.id"] == run_id)
    fence = run_row(conn, run_id)["fence"]
    doomed.signal(signal.SIGKILL)
    doomed.wait_exit()

    survivor = workers("--lease", "2", *MAINTAIN, lanes=("background",))
    wait_until(lambda: run_state(conn, run_id) == "failed", what="stale run reaped")
    assert run_row(conn, run_id)["reason"] == "stale"

    # The killed worker's late writes are refused by its fence.
    with pytest.raises(psycopg.Error) as refused:
        conn.execute("select runlane.append_output(%s, %s, 'text', 'late')", (run_id, fence))
    assert refused.value.sqlstate == "RL001"
    assert conn.execute("select runlane.heartbeat(%s, %s)", (run_id, fence)).fetchone()[0] is False

    # No zombie lock-out: the same agent runs again to completion.
    again = background_run(conn, "agent-k")
    wait_until(lambda: run_state(conn, again) == "succeeded", what="the agent ran again")
    survivor.wait_for("run.finished", where=lambda r: r["run.id"] == again)


def test_kill_9_mid_interactive_run_resumes_from_its_checkpoint_elsewhere(conn, workers):
    make_agent(conn, "agent-i")
    doomed = workers("--lease", "2", "--no-maintenance", env=SLOW)
    run_id = submit(conn, "agent-i", "thread-1", "a long answer that is streamed in chunks")
    body = conn.execute(
        "select body from runlane.messages where run_id = %s", (run_id,)
    ).fetchone()[0]
    wait_until(lambda: checkpoint_matches_outputs(conn, run_id), what="a checkpointed chunk")
    first_response_at = run_row(conn, run_id)["first_response_at"]
    doomed.signal(signal.SIGKILL)
    doomed.wait_exit()

    survivor = workers("--lease", "2", *MAINTAIN)
    wait_until(lambda: run_state(conn, run_id) == "succeeded", what="run resumed and finished")
    outputs = visible_outputs(conn, run_id)
    attempts = [attempt for attempt, _ in outputs]
    assert attempts[0] == 1 and attempts[-1] == 2, outputs
    # Resumed, not restarted: every chunk exactly once, in order.
    assert "".join(text for _, text in outputs) == body
    row = run_row(conn, run_id)
    assert row["first_response_at"] == first_response_at
    assert row["attempts"] == 2
    started = survivor.wait_for("run.execution_started", where=lambda r: r["run.id"] == run_id)
    assert started["run.attempt"] == 2


def test_sigterm_releases_a_long_run_to_another_worker_at_once(conn, workers):
    make_agent(conn, "agent-g")
    leaving = workers("--lease", "30", "--no-maintenance", "--shutdown-grace", "0.2", env=SLOW)
    run_id = submit(conn, "agent-g", "thread-1", "an answer that outlives its worker")
    body = conn.execute(
        "select body from runlane.messages where run_id = %s", (run_id,)
    ).fetchone()[0]
    wait_until(lambda: checkpoint_matches_outputs(conn, run_id), what="a checkpointed chunk")
    first_response_at = run_row(conn, run_id)["first_response_at"]
    # The other worker only scans every 10 minutes: it can only learn of the run through
    # the notification of its release (the 30 s lease is far from expiring).
    taking_over = workers("--lease", "30", "--no-maintenance", "--scan-interval", "600")
    taking_over.wait_for("dispatch.ready")

    leaving.signal(signal.SIGTERM)
    assert leaving.wait_exit() == 0
    released = leaving.wait_for("run.released", where=lambda r: r["run.id"] == run_id)
    assert released["run.reason"] == "shutdown"

    wait_until(lambda: run_state(conn, run_id) == "succeeded", what="resumed elsewhere")
    taking_over.wait_for("run.execution_started", where=lambda r: r["run.id"] == run_id)
    outputs = visible_outputs(conn, run_id)
    assert "".join(text for _, text in outputs) == body
    assert run_row(conn, run_id)["first_response_at"] == first_response_at
    assert leaving.wait_for("worker.stopped")
