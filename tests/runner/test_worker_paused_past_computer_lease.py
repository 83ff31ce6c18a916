"""With a real worker: a worker paused (SIGSTOP) past its lease while
its computer-bound run streams comes back after another run took the computer over. Every
write it makes from then on is refused: the stale run adds no output after the take-over
and does not finish, and the worker logs the loss and stops working on it."""

from __future__ import annotations

import signal

import worker_helpers
from worker_helpers import background_run, make_agent, run_row, wait_until

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after

OUTPUTS = "select count(*) from runlane.run_outputs where run_id = %s"


def test_a_worker_paused_past_its_lease_writes_nothing_once_its_computer_was_taken(conn, workers):
    for agent in ("agent-paused", "agent-next"):
        make_agent(conn, agent)
    conn.execute(
        "update runlane.agents set computer_id = 'computer-p' "
        "where agent_id in ('agent-paused', 'agent-next')"
    )
    # A step every 50 ms against a heartbeat every lease/3: when the worker resumes, a
    # step's write is (almost always) due before the heartbeat that would report the loss.
    paused = workers(
        "--agent",
        "stream_agent:agent",
        "--lease",
        "2",
        "--no-maintenance",
        lanes=("background",),
        env={"STREAM_AGENT_CHUNKS": "100000", "STREAM_AGENT_DELAY": "0.05"},
    )
    run_id = background_run(conn, "agent-paused")
    wait_until(lambda: conn.execute(OUTPUTS, (run_id,)).fetchone()[0] >= 3, what="the run streams")
    fence = run_row(conn, run_id)["fence"]

    paused.signal(signal.SIGSTOP)
    try:
        wait_until(
            lambda: conn.execute(
                "select lease_expires_at < now() and exists (select 1 from runlane.computer_leases "
                "where computer_id = 'computer-p' and expires_at < now()) "
                "from runlane.runs where run_id = %s",
                (run_id,),
            ).fetchone()[0],
            what="the paused run's leases expired",
        )
        # Another run takes the computer over (claimed by another worker: this test).
        next_run = background_run(conn, "agent-next", publish=False)
        taken = conn.execute(
            "select run_id from runlane.claim_runs('worker-next', array['background'], 1)"
        ).fetchall()
        assert taken == [(next_run,)]
        written = conn.execute(OUTPUTS, (run_id,)).fetchone()[0]
    finally:
        paused.signal(signal.SIGCONT)

    lost = paused.wait_for("run.lease_lost", where=lambda r: r.get("run.id") == run_id)
    assert lost["lease.why"] in ("fenced_out", "heartbeat_refused")
    # Whatever the resumed worker sent after the take-over was refused.
    assert conn.execute(OUTPUTS, (run_id,)).fetchone()[0] == written
    row = run_row(conn, run_id)
    assert (row["state"], row["fence"]) == ("running", fence), "left to reap_stale, not finished"
    assert row["finished_at"] is None
    assert (
        conn.execute(
            "select run_id from runlane.computer_leases where computer_id = 'computer-p'"
        ).fetchone()[0]
        == next_run
    )
    # The worker stopped working on it: no write is even attempted any more.
    assert paused.proc.poll() is None
