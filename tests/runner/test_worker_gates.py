"""Gates when a run starts (the rule "the run starts if" the agent is switched on, not
locked, and within its weekly budget), with a real worker:
a background run whose agent was locked, switched off, lost its model or whose owner
spent the weekly budget after it was queued is never started. The claim ends it skipped
and the worker logs `run.skipped` with `run.reason`, and runs the other work of its page."""

from __future__ import annotations

import worker_helpers
from worker_helpers import background_run, make_agent, run_row, run_state, wait_until

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after

FAST = ("--lease", "3", "--no-maintenance", "--scan-interval", "0.5")


def test_the_worker_logs_each_run_a_closed_gate_skipped_and_runs_the_rest(conn, workers):
    for agent in ("gate-locked", "gate-off", "gate-model", "gate-spent", "gate-open"):
        make_agent(conn, agent, org_id="org-gates" if agent != "gate-spent" else "org-spent")
    # The spent owner's earlier run charged the organization's whole weekly budget.
    conn.execute(
        "update runlane.platform_settings set agent_weekly_budget = 5 where org_id = 'org-spent'"
    )
    earlier = background_run(conn, "gate-spent", publish=False)
    conn.execute("select runlane_test.claimed(%s)", (earlier,))
    conn.execute(
        "select runlane._record_charge(r, 5) from runlane.runs as r where r.run_id = %s", (earlier,)
    )
    conn.execute(
        "update runlane.runs set state = 'succeeded', finished_at = now() where run_id = %s",
        (earlier,),
    )

    queued = {
        agent: background_run(conn, agent, publish=False)
        for agent in ("gate-locked", "gate-off", "gate-model", "gate-spent", "gate-open")
    }
    # The gates close after the runs were queued (run_now and create_run saw them open).
    conn.execute("update runlane.agents set admin_locked = true where agent_id = 'gate-locked'")
    conn.execute("update runlane.agents set enabled = false where agent_id = 'gate-off'")
    conn.execute("update runlane.agents set model = null where agent_id = 'gate-model'")

    worker = workers(*FAST, lanes=("background",))
    wait_until(
        lambda: run_state(conn, queued["gate-open"]) == "succeeded",
        what="the open agent's run succeeded",
    )
    expected = {
        "gate-locked": "agent_locked",
        "gate-off": "agent_off",
        "gate-model": "no_model",
        "gate-spent": "budget_exhausted",
    }
    for agent, reason in expected.items():
        run_id = queued[agent]
        line = worker.wait_for("run.skipped", where=lambda r, run_id=run_id: r["run.id"] == run_id)
        assert line["run.reason"] == reason, line
        assert line["run.trigger"] == "manual" and line["run.lane"] == "background", line
        row = run_row(conn, run_id)
        assert (row["state"], row["reason"], row["attempts"]) == ("skipped", reason, 0), row
    started = {r["run.id"] for r in worker.events("run.execution_started")}
    assert started == {queued["gate-open"]}, started
    # One line per skipped run, however many passes the worker made meanwhile.
    assert len(worker.events("run.skipped")) == len(expected)
