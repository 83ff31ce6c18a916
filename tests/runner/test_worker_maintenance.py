"""Maintenance with real worker processes: exactly one leader among three workers and a
takeover when it is killed or paused (SIGSTOP) past its lease; the queue-delay warning and
its recovery; the NOTIFY queue warning."""

from __future__ import annotations

import signal
import time

import worker_helpers
from worker_helpers import make_agent, run_state, submit, wait_until

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after

LEADER = """
select leader from runlane.leader where role = 'maintenance' and expires_at > clock_timestamp()
"""


def leader(conn) -> str | None:
    """The leader id whose lease runs now (None while it is free or lapsed)."""
    row = conn.execute(LEADER).fetchone()
    return row[0] if row else None


def leader_of(conn, fleet):
    """The worker process whose lease runs now (leader ids start with its application name)."""
    current = leader(conn)
    found = [
        w
        for w in fleet
        if current is not None and current.startswith(f"runlane-worker:{w.worker_id}/")
    ]
    return found[0] if len(found) == 1 else None


def expired_run(conn, name: str) -> int:
    """A background run claimed on a computer whose lease has expired (reap_stale's work)."""
    with conn.transaction():
        agent = conn.execute(
            "select runlane_test.agent(%s, 'org-m', %s)", (name, f"computer-{name}")
        ).fetchone()[0]
        run_id = conn.execute("select runlane_test.queued_run(%s)", (agent,)).fetchone()[0]
        conn.execute("select runlane_test.claimed_on_computer(%s)", (run_id,))
        conn.execute("select runlane_test.lease_expired(%s)", (run_id,))
    return run_id


def test_exactly_one_maintenance_leader_and_a_takeover_when_it_dies(conn, workers):
    fleet = [
        workers("--leader-retry", "0.2", "--tick-interval", "0.2", "--leader-ttl", "3")
        for _ in range(3)
    ]
    for worker in fleet:
        worker.wait_for("dispatch.ready")
    wait_until(lambda: leader_of(conn, fleet), what="a leader")
    # Followers keep trying (every 0.2 s) and the leader renews every pass; through many
    # of their attempts the lease stays with the same worker.
    first = leader_of(conn, fleet)
    for _ in range(20):
        assert leader_of(conn, fleet) is first
        time.sleep(0.1)
    leaders = [w for w in fleet if w.events("maintenance.leader_acquired")]
    assert leaders == [first]

    first.signal(signal.SIGKILL)
    first.wait_exit()
    rest = [w for w in fleet if w is not first]
    wait_until(
        lambda: any(w.events("maintenance.leader_acquired") for w in rest),
        what="a follower takes over",
    )
    successors = [w for w in rest if w.events("maintenance.leader_acquired")]
    assert len(successors) == 1
    assert leader_of(conn, fleet) is successors[0]


def test_a_paused_leader_is_replaced_and_does_not_lead_when_it_resumes(conn, workers):
    """SIGSTOP keeps the leader's process and sessions alive (the advisory lock of old
    was never released): its lease lapses instead, the other worker logs once that the
    holder went silent (maintenance.leader_silent, naming it), takes over and reaps while
    the first is still stopped; resumed, the first finds its lease lost and follows."""
    fleet = [
        workers("--leader-retry", "0.2", "--tick-interval", "0.2", "--leader-ttl", "2")
        for _ in range(2)
    ]
    wait_until(lambda: leader_of(conn, fleet), what="a leader")
    paused = leader_of(conn, fleet)
    other = next(w for w in fleet if w is not paused)
    # Its log line is written at the end of the loop iteration that won the lease: wait
    # for it, so no line from before the pause is written after it.
    paused.wait_for("maintenance.leader_acquired")

    holder = leader(conn)
    paused_at = len(other.events())
    paused.signal(signal.SIGSTOP)
    try:
        run_id = expired_run(conn, "agent-paused")
        wait_until(lambda: run_state(conn, run_id) != "running", what="the expired run reaped")
        assert paused.proc.poll() is None  # still there, still stopped
        assert leader_of(conn, fleet) is other
        assert other.events("maintenance.leader_acquired")
        other.wait_for("run.reaped", where=lambda r: r["run.id"] == run_id)
        resumed_at = len(paused.events())
    finally:
        paused.signal(signal.SIGCONT)

    # The follower said once, before taking over, that the holder had gone silent: it
    # retried many times meanwhile (every 0.2 s), one line for the whole silence.
    after_pause = other.events()[paused_at:]
    silent = [r for r in after_pause if r["message"] == "maintenance.leader_silent"]
    assert len(silent) == 1, silent
    assert silent[0]["maintenance.holder"] == holder
    assert silent[0]["maintenance.since_renewal_s"] >= 1.0  # half of the 2 s lease
    assert silent[0]["maintenance.holder_ttl_s"] == 2.0
    messages = [r["message"] for r in after_pause]
    assert messages.index("maintenance.leader_silent") < messages.index(
        "maintenance.leader_acquired"
    )

    lost = paused.wait_for("maintenance.leader_lost")
    assert lost["maintenance.since_renewal_s"] >= 2.0  # the pause outlived the lease
    # Through many of its attempts after the pause, the resumed worker stays a follower:
    # the lease stays with the other, and the resumed one neither wins it nor reaps.
    for _ in range(20):
        assert leader_of(conn, fleet) is other
        time.sleep(0.1)
    later = [r["message"] for r in paused.events()[resumed_at:]]
    assert "maintenance.leader_acquired" not in later
    assert "run.reaped" not in [r["message"] for r in paused.events()]
    # The lease renewals of the two never overlapped: one acquisition each, in order.
    assert len(paused.events("maintenance.leader_acquired")) == 1
    assert len(other.events("maintenance.leader_acquired")) == 1


def test_a_stopping_leader_hands_its_lease_back(conn, workers):
    fleet = [
        workers("--leader-retry", "0.2", "--tick-interval", "0.2", "--leader-ttl", "60")
        for _ in range(2)
    ]
    wait_until(lambda: leader_of(conn, fleet), what="a leader")
    first = leader_of(conn, fleet)
    first.signal(signal.SIGTERM)
    assert first.wait_exit() == 0
    first.wait_for("maintenance.leader_resigned")
    # The lease (60 s) has not lapsed: the other worker took it because it was handed back.
    other = next(w for w in fleet if w is not first)
    wait_until(lambda: leader_of(conn, fleet) is other, what="the other worker leads")


def test_the_leader_logs_notify_queue_usage_from_its_threshold(conn, workers):
    """The real queue cannot be filled in a test (half of it is 4 GB in PostgreSQL 15):
    the reading is replaced, in this test's own database, by a fixed fraction."""
    usage = """
create or replace function runlane.notify_queue_usage() returns double precision
language sql stable set search_path = pg_catalog, pg_temp as $$ select %s::float8 $$
"""
    conn.execute(usage % "0.2")
    watcher = workers("--tick-interval", "0.2", "--leader-retry", "0.2", "--leader-ttl", "2")
    watcher.wait_for("maintenance.leader_acquired")
    run_id = expired_run(conn, "agent-notify")
    watcher.wait_for("run.reaped", where=lambda r: r["run.id"] == run_id)
    passes_done = len(watcher.raw_lines())
    assert watcher.events("notify.queue_usage") == []  # 0.2 is under the 0.25 threshold

    conn.execute(usage % "0.3")
    logged = watcher.wait_for("notify.queue_usage")
    assert logged["notify.queue_usage"] == 0.3
    assert logged["notify.queue_warn"] == 0.25
    assert logged["level"] == "warning"
    assert len(watcher.raw_lines()) > passes_done


def test_queue_delay_warns_while_interactive_runs_wait_and_recovers_once(conn, workers):
    make_agent(conn, "agent-q")
    # This worker serves only the background lane: the chat run below waits in the queue.
    watcher = workers(
        "--tick-interval",
        "0.2",
        "--queue-delay-interval",
        "0.2",
        "--queue-delay-threshold",
        "0.5",
        lanes=("background",),
    )
    run_id = submit(conn, "agent-q", "thread-1", "is anyone there")
    delayed = watcher.wait_for("run.queue_delayed")
    assert delayed["queue.delayed_runs"] == 1
    assert delayed["queue.oldest_wait_ms"] >= 500
    assert run_state(conn, run_id) == "queued"

    chat = workers("--no-maintenance")
    wait_until(lambda: run_state(conn, run_id) == "succeeded", what="the chat run ran")
    watcher.wait_for("run.queue_recovered")
    # Recovery is logged once, and no warning follows it while nothing waits.
    recovered_at = len(watcher.raw_lines())
    time.sleep(1.0)  # several more queue checks
    later = [r["message"] for r in watcher.events()[recovered_at:]]
    assert "run.queue_delayed" not in later
    assert len(watcher.events("run.queue_recovered")) == 1
    chat.signal(signal.SIGTERM)
    assert chat.wait_exit() == 0
