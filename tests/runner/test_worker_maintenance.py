"""Maintenance with real worker processes: exactly one leader among three workers and a
takeover when it is killed; the queue-delay warning and its recovery."""

from __future__ import annotations

import signal
import time

import worker_helpers
from worker_helpers import make_agent, run_state, submit, wait_until

from runlane.maintenance import MAINTENANCE_LOCK

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after

LEADER_HOLDERS = """
select a.application_name
from pg_locks as l
join pg_stat_activity as a on a.pid = l.pid
where l.locktype = 'advisory' and l.granted and l.database = (
    select oid from pg_database where datname = current_database())
  and l.classid = 0 and l.objid = %s and l.objsubid = 1
"""


def holders(conn) -> list[str]:
    return [name for (name,) in conn.execute(LEADER_HOLDERS, (MAINTENANCE_LOCK,))]


def test_exactly_one_maintenance_leader_and_a_takeover_when_it_dies(conn, workers):
    fleet = [workers("--leader-retry", "0.2",
                     "--tick-interval", "0.2") for _ in range(3)]
    for worker in fleet:
        worker.wait_for("dispatch.ready")
    wait_until(lambda: len(holders(conn)) == 1, what="a leader")
    # Followers keep retrying (every 0.2 s); through many of their attempts there is
    # still exactly one leader.
    for _ in range(20):
        assert len(holders(conn)) == 1
        time.sleep(0.1)
    leaders = [w for w in fleet if w.events("maintenance.leader_acquired")]
    assert len(leaders) == 1
    leader = leaders[0]
    assert holders(conn) == [f"runlane-worker:{leader.worker_id}:maintenance"]

    leader.signal(signal.SIGKILL)
    leader.wait_exit()
    rest = [w for w in fleet if w is not leader]
    wait_until(lambda: any(w.events("maintenance.leader_acquired") for w in rest),
               what="a follower takes over")
    wait_until(lambda: len(holders(conn)) == 1, what="exactly one new leader")
    successors = [w for w in rest if w.events("maintenance.leader_acquired")]
    assert len(successors) == 1
    assert holders(conn) == [f"runlane-worker:{successors[0].worker_id}:maintenance"]


def test_queue_delay_warns_while_interactive_runs_wait_and_recovers_once(conn, workers):
    make_agent(conn, "agent-q")
    # This worker serves only the background lane: the chat run below waits in the queue.
    watcher = workers("--tick-interval", "0.2", "--queue-delay-interval", "0.2",
                      "--queue-delay-threshold", "0.5", lanes=("background",))
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
