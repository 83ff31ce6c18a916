"""Spend charged by a real worker's agent is recorded when it is made: an agent that
charges and then fails on every attempt has all of it counted in its owner's week (and
"Run now" then answers RL005), a charge survives the worker being killed mid-step, and a
refused amount fails the step while the good charges around it stay."""

from __future__ import annotations

import signal
from decimal import Decimal

import psycopg
import pytest
import worker_helpers
from worker_helpers import make_agent, run_row, run_state, wait_until

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after

OWNER = "owner-of-org-w"  # make_agent's organization's owner


def weekly_spend(conn: psycopg.Connection) -> Decimal:
    return conn.execute("select runlane.weekly_spend(%s)", (OWNER,)).fetchone()[0]


def run_now(conn: psycopg.Connection, agent_id: str) -> int:
    run_id = conn.execute("select (runlane.run_now(%s)).run_id", (agent_id,)).fetchone()[0]
    conn.execute("select runlane.publish_run(%s)", (run_id,))
    return run_id


def test_an_agent_that_charges_then_fails_spends_its_budget_and_run_now_is_refused(conn, workers):
    make_agent(conn, "agent-spender")
    conn.execute(
        "update runlane.platform_settings set agent_weekly_budget = 30 where org_id = 'org-w'"
    )
    run_id = conn.execute("select (runlane.run_now('agent-spender')).run_id").fetchone()[0]
    conn.execute("update runlane.runs set max_attempts = 2 where run_id = %s", (run_id,))
    conn.execute("select runlane.publish_run(%s)", (run_id,))

    worker = workers(
        "--agent",
        "charging_agent:agent",
        "--no-maintenance",
        "--scan-interval",
        "0.5",
        lanes=("background",),
    )
    wait_until(lambda: run_state(conn, run_id) == "failed", what="attempts spent")
    worker.wait_for("run.attempt_failed", where=lambda r: r.get("run.state") == "failed")

    row = run_row(conn, run_id)
    assert (row["attempts"], row["reason"]) == (2, "attempts_exhausted")
    # Two attempts of 3 x 5.0 each, every one of them failed: all of it was spent.
    assert weekly_spend(conn) == 30
    assert row["cost"] == 30
    charges = conn.execute(
        "select attempt, amount from runlane.charges where run_id = %s order by charge_id",
        (run_id,),
    ).fetchall()
    assert charges == [(1, 5), (1, 5), (1, 5), (2, 5), (2, 5), (2, 5)]

    with pytest.raises(psycopg.Error) as refused:
        run_now(conn, "agent-spender")
    assert refused.value.sqlstate == "RL005"


def test_a_charge_is_recorded_before_the_step_ends_and_survives_a_killed_worker(conn, workers):
    make_agent(conn, "agent-hang")
    run_id = run_now(conn, "agent-hang")
    worker = workers(
        "--agent",
        "charging_agent:agent",
        "--no-maintenance",
        lanes=("background",),
        env={"RUNLANE_CHARGING_THEN": "hang", "RUNLANE_CHARGING_AMOUNTS": "1.25,1.25"},
    )
    wait_until(
        lambda: weekly_spend(conn) == Decimal("2.5"),
        what="the step's charges recorded while it still runs",
    )
    assert run_state(conn, run_id) == "running"
    worker.signal(signal.SIGKILL)
    worker.wait_exit()

    # Reaped as stale (its lease ran out): what it charged stays charged.
    conn.execute(
        "update runlane.runs set lease_expires_at = now() - interval '1 minute' where run_id = %s",
        (run_id,),
    )
    conn.execute("select * from runlane.reap_stale(now())")
    assert run_state(conn, run_id) == "failed"
    assert weekly_spend(conn) == Decimal("2.5")
    assert run_row(conn, run_id)["cost"] == Decimal("2.5")


def test_a_refused_amount_fails_the_step_and_the_good_charges_stay(conn, workers):
    make_agent(conn, "agent-nan")
    run_id = conn.execute("select (runlane.run_now('agent-nan')).run_id").fetchone()[0]
    conn.execute("update runlane.runs set max_attempts = 1 where run_id = %s", (run_id,))
    conn.execute("select runlane.publish_run(%s)", (run_id,))
    workers(
        "--agent",
        "charging_agent:agent",
        "--no-maintenance",
        lanes=("background",),
        env={"RUNLANE_CHARGING_THEN": "succeed", "RUNLANE_CHARGING_AMOUNTS": "1,nan,-3,2"},
    )
    wait_until(lambda: run_state(conn, run_id) == "failed", what="the refused charge failed it")
    row = run_row(conn, run_id)
    assert row["last_error"].startswith("InvalidParameterValue: amount NaN is not a number")
    assert conn.execute(
        "select amount from runlane.charges where run_id = %s order by charge_id", (run_id,)
    ).fetchall() == [(1,), (2,)]
    assert row["cost"] == 3
    assert weekly_spend(conn) == 3


def test_a_retried_run_whose_attempt_spent_the_budget_ends_canceled_not_skipped(conn, workers):
    """Its retry is gated at the claim (budget_exhausted); it ran and spent, so it ends
    canceled, logged run.finished with its outcome, never run.skipped."""
    make_agent(conn, "agent-broke")
    conn.execute(
        "update runlane.platform_settings set agent_weekly_budget = 15 where org_id = 'org-w'"
    )
    run_id = run_now(conn, "agent-broke")
    worker = workers(
        "--agent",
        "charging_agent:agent",
        "--no-maintenance",
        "--scan-interval",
        "0.5",
        lanes=("background",),
    )
    wait_until(
        lambda: run_state(conn, run_id) not in ("queued", "running"),
        what="the retry gated at its claim",
    )
    row = run_row(conn, run_id)
    assert (row["state"], row["reason"], row["attempts"]) == ("canceled", "budget_exhausted", 1)
    assert row["cost"] == 15
    finished = worker.wait_for("run.finished", where=lambda r: r.get("run.id") == run_id)
    assert finished["run.outcome"] == "canceled"
    assert finished["run.reason"] == "budget_exhausted"
    assert "run.execution_wall_ms" in finished
    assert not [r for r in worker.events("run.skipped") if r.get("run.id") == run_id]
