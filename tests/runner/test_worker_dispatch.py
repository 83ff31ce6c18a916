"""`runlane worker` dispatch with real processes: notification vs scan, bounded passes
under a notification burst, and reconnecting after its connections are terminated."""

from __future__ import annotations

import signal

import worker_helpers
from worker_helpers import (
    background_run,
    make_agent,
    run_state,
    submit,
    visible_outputs,
    wait_until,
)

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after

FAST = ("--lease", "3", "--no-maintenance")


def test_a_published_run_starts_by_notification_not_by_the_scan(conn, workers):
    make_agent(conn, "agent-n")
    worker = workers(*FAST, "--scan-interval", "600")
    worker.wait_for("listener.listening")
    worker.wait_for("dispatch.ready")
    # The only scan left is 10 minutes away: a start now can only come from the notification.
    run_id = submit(conn, "agent-n", "thread-1", "hello there")
    wait_until(lambda: run_state(conn, run_id) == "succeeded", what="run succeeded")
    started = worker.wait_for("run.execution_started", where=lambda r: r["run.id"] == run_id)
    assert started["run.trigger"] == "interactive"
    assert "".join(body for _, body in visible_outputs(conn, run_id)).startswith("hello there")


def test_a_run_committed_without_notification_is_started_by_the_scan(conn, workers):
    make_agent(conn, "agent-s")
    listening_only = workers(*FAST, "--scan-interval", "600")
    listening_only.wait_for("dispatch.ready")
    run_id = submit(conn, "agent-s", "thread-1", "nobody told", publish=False)
    scanning = workers(*FAST, "--scan-interval", "0.5")
    scanning.wait_for("dispatch.ready")
    wait_until(lambda: run_state(conn, run_id) == "succeeded", what="run succeeded")
    # A second unpublished run, committed after both startup passes: only a scan finds it.
    later = submit(conn, "agent-s", "thread-2", "still nobody told", publish=False)
    wait_until(lambda: run_state(conn, later) == "succeeded", what="later run succeeded")
    claimed_by = {r["run.id"] for r in scanning.events("run.execution_started")}
    assert later in claimed_by
    assert later not in {r["run.id"] for r in listening_only.events("run.execution_started")}


def test_a_burst_of_notifications_causes_a_bounded_number_of_claims(conn, workers):
    worker = workers(*FAST, "--scan-interval", "600")
    worker.wait_for("dispatch.ready")
    with conn.transaction():
        conn.execute(
            "select pg_notify('runlane_runs', json_build_object("
            "'run_id', -g, 'lane', 'interactive')::text) from generate_series(1, 1000) g"
        )
    for batch in range(10):
        with conn.transaction():
            conn.execute(
                "select pg_notify('runlane_runs', json_build_object("
                "'run_id', -g - %s, 'lane', 'interactive')::text) "
                "from generate_series(1, 100) g",
                (1000 + batch * 100,),
            )
    # A published run after the burst proves every notification was read.
    make_agent(conn, "agent-b")
    run_id = submit(conn, "agent-b", "thread-1", "after the burst")
    wait_until(lambda: run_state(conn, run_id) == "succeeded", what="run succeeded")
    worker.signal(signal.SIGTERM)
    assert worker.wait_exit() == 0
    stopped = worker.wait_for("worker.stopped")
    assert stopped["dispatch.claim_queries"] < 100, stopped


def test_terminated_connections_reconnect_and_lose_nothing(conn, workers):
    make_agent(conn, "agent-t1")
    make_agent(conn, "agent-t2")
    worker = workers(
        *FAST,
        "--scan-interval",
        "1",
        lanes=("interactive", "background"),
        env={"RUNLANE_ECHO_DELAY": "0.3", "RUNLANE_ECHO_CHUNKS": "6"},
    )
    worker.wait_for("listener.listening")
    in_flight = submit(conn, "agent-t1", "thread-1", "a run in flight while connections die")
    worker.wait_for("run.first_response", where=lambda r: r["run.id"] == in_flight)
    killed = conn.execute(
        "select count(pg_terminate_backend(pid)) from pg_stat_activity "
        "where application_name like %s",
        (f"runlane-worker:{worker.worker_id}%",),
    ).fetchone()[0]
    assert killed >= 2  # the listener and at least one pool connection
    unpublished = background_run(conn, "agent-t2", publish=False)
    worker.wait_for("listener.reconnected")
    published = submit(conn, "agent-t1", "thread-2", "after the reconnect")
    for run_id in (in_flight, unpublished, published):
        wait_until(lambda r=run_id: run_state(conn, r) == "succeeded", what=f"run {run_id}")
    text = "".join(body for _, body in visible_outputs(conn, in_flight))
    assert text.startswith("a run in flight while connections die")
