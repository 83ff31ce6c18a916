"""A worker whose connections all die at once (what a failover or a restart does to it)
reconnects its listener, its claim connection and its lane pool before work needs them:
the first claim after the loss does not fail on the dead claim connection first, and the
lane pool holds a live connection again without a run's write having to fail on a dead
one (runner/runlane/worker: listener.py reports the loss and the reconnect, db.py renews
the pools, dispatcher.py drops its claim connection)."""

from __future__ import annotations

import signal

import psycopg
import worker_helpers
from worker_helpers import make_agent, run_state, submit, wait_until

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after


def _backends(conn: psycopg.Connection, worker_id: str) -> list[int]:
    """The worker's own sessions (listener, claim connection, lane pool; not maintenance)."""
    return [
        r[0]
        for r in conn.execute(
            "select pid from pg_stat_activity where application_name = %s",
            (f"runlane-worker:{worker_id}",),
        ).fetchall()
    ]


def test_a_lost_connection_is_replaced_before_the_next_claim_and_write(conn, workers):
    agent = make_agent(conn, "agent-reconnect")
    # No periodic scan and no maintenance: every pass below comes from a notification or
    # from the listener's reconnect, and only this worker's own sessions are counted.
    worker = workers("--scan-interval", "600", "--no-maintenance")
    worker.wait_for("listener.listening")
    worker.wait_for("dispatch.ready")
    first = submit(conn, agent, "thread-a", "before")
    wait_until(lambda: run_state(conn, first) == "succeeded", what="the first run")
    before = _backends(conn, worker.worker_id)
    assert len(before) >= 3, "listener, claim connection and a pool connection are open"

    conn.execute(
        "select pg_terminate_backend(pid) from pg_stat_activity where application_name = %s",
        (f"runlane-worker:{worker.worker_id}",),
    )
    worker.wait_for("listener.reconnected")
    # The reconnect woke the lane (a pass on a fresh claim connection) and renewed the
    # pool: three live sessions again, none of them one of the terminated ones, before
    # any run was submitted.
    wait_until(
        lambda: len(set(_backends(conn, worker.worker_id)) - set(before)) >= 3,
        timeout=20,
        what="listener, claim connection and pool connection reopened",
    )

    second = submit(conn, agent, "thread-b", "after")
    wait_until(lambda: run_state(conn, second) == "succeeded", what="the run after the loss")
    assert worker.events("dispatch.claim_resent") == [], (
        "no claim was sent on the dead claim connection first"
    )
    assert worker.proc.poll() is None, "the same worker process carried on"
    worker.signal(signal.SIGTERM)
    assert worker.wait_exit() == 0
