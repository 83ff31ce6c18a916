"""Write numbers with a real worker process: when the database refuses one of a run's
writes for its number (22023 on column write_seq: the attempt's numbering and the
database's no longer agree), the worker gives the run up to its lease: the agent stops,
nothing more is written for the attempt (no canceled finish is tried, its number would be
refused as well), `run.lease_lost` says why, and the run resumes from its checkpoint in a
new attempt, numbered from 1, once its lease ran out. (A write refused for anything else
gives its number back to the next write: tests/runner/test_worker_charges.py.)"""

from __future__ import annotations

import worker_helpers
from worker_helpers import make_agent, submit, wait_until

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after

MAINTAIN = ("--tick-interval", "0.3", "--leader-retry", "0.3")
STREAM = {"STREAM_AGENT_CHUNKS": "1000", "STREAM_AGENT_DELAY": "0.2"}


def outputs(conn, run_id: int, attempt: int) -> int:
    return conn.execute(
        "select count(*) from runlane.run_outputs where run_id = %s and attempt = %s",
        (run_id, attempt),
    ).fetchone()[0]


def test_a_write_refused_for_its_number_gives_the_run_up_to_its_lease(conn, workers):
    make_agent(conn, "agent-numbers")
    worker = workers("--agent", "stream_agent:agent", "--lease", "2", *MAINTAIN, env=STREAM)
    run_id = submit(conn, "agent-numbers", "thread-1", "hello")
    wait_until(lambda: outputs(conn, run_id, 1) >= 2, what="the first attempt streams")

    # The database forgets the attempt's applied numbers: its next write skips ahead.
    conn.execute("update runlane.runs set write_seq = 0 where run_id = %s", (run_id,))
    lost = worker.wait_for("run.lease_lost", where=lambda r: r["run.id"] == run_id)
    assert lost["lease.why"] == "write_numbering"
    assert lost["run.attempt"] == 1
    written = outputs(conn, run_id, 1)

    # Its lease runs out (no heartbeat), the leader requeues it, and the next attempt
    # numbers its writes from 1 again and streams on.
    wait_until(lambda: outputs(conn, run_id, 2) >= 2, what="a new attempt streams")
    assert outputs(conn, run_id, 1) == written, "nothing more written by the first attempt"
    run_events = [r["message"] for r in worker.events() if r.get("run.id") == run_id]
    assert "run.stopped" not in run_events and "run.stop_failed" not in run_events
    assert "run.supervisor_failed" not in run_events
