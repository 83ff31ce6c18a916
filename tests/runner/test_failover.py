"""Failover to a streaming standby, short: a primary and a synchronous standby started
from the machine's PostgreSQL binaries (soak/replication.py), 2 real `runlane worker`
processes and the chaos soak's load on one multi-host DSN (target_session_attrs=
read-write), the primary SIGKILLed in the middle of a burst of chat messages and the
standby promoted with `pg_ctl promote` (soak/failover.py). From the promoted database:
every acknowledged submit_message ended in exactly one succeeded run, fences went 1, 2, 3…
with never two live owners and no attempt started twice in the workers' logs, no org
over its cap, no computer with two owners (soak/chaos.py's checks); the same worker
processes carried on and finished runs after the failover. The time from the kill to
the first run finished on the new primary is printed, never asserted."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `soak` sits beside `tests`, outside the installed package
    sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
import pytest  # noqa: E402
from worker_helpers import first_chat_run  # noqa: E402

from soak.failover import SYNC_CHECKS, Failover, FailoverConfig  # noqa: E402
from soak.replication import ReplicatedPair  # noqa: E402

pytestmark = pytest.mark.failover


def test_failover_to_a_synchronous_standby_loses_nothing_and_runs_nothing_twice():
    config = FailoverConfig(
        runs=400,
        workers=2,
        duration=8.0,
        seed=17,
        first_at=0.4,
        failovers=1,
        sync=True,
        promote_after=1.5,
        drain_timeout=90.0,
        stream_readers=2,
    )
    soak = Failover(config)
    report = soak.run()
    figures = soak.figures
    print(report.text())
    print(figures.text())

    assert report.violations == [], report.text() + "\n" + figures.text()
    assert set(report.violations_by_check) == set(SYNC_CHECKS), "every check ran"
    assert report.faults == {"failover": 1}, "the primary was killed once and promoted"
    assert report.runs >= 400, "the load created the runs it was asked for"
    assert figures.acknowledged > 0
    assert figures.acknowledged_succeeded == figures.acknowledged, (
        "every acknowledged message ended in a succeeded run"
    )
    assert figures.failovers[0]["running_at_kill"] > 0, "runs were in flight at the kill"
    assert all(n > 0 for n in figures.finished_after_last_failover.values()), (
        "every original worker finished runs on the promoted primary"
    )
    assert set(figures.worker_generations.values()) == {1}, "no worker was restarted"
    assert not any(k.endswith(("/queued", "/running")) for k in report.by_lane_state), (
        "nothing is left queued or running"
    )


def test_a_claim_lost_with_an_asynchronous_standby_is_never_handed_out_again():
    """An asynchronous standby may lack a claim the old primary acknowledged: the worker
    holding it goes on, and the promoted primary hands the run out again. The new claim
    must carry a higher fence (the promoted server's timeline is folded into the fences it
    hands out), so the lost claim's writes are refused (RL001): fences never go backwards
    and no two attempts share one. Before, the promoted primary handed out the lost fence
    itself (fence + 1 of what it had), and both attempts' writes were accepted."""
    with ReplicatedPair(sync=False) as pair:
        with psycopg.connect(pair.primary.dsn_for("postgres"), autocommit=True) as conn:
            conn.execute("create database lost")
        with psycopg.connect(pair.primary.dsn_for("lost")) as conn:
            run_id = first_chat_run(conn, "l")
        pair.wait_caught_up()
        pair.hold_replication()  # from here the standby receives nothing
        with psycopg.connect(pair.primary.dsn_for("lost"), autocommit=True) as conn:
            lost = conn.execute(
                "select run_id, fence from runlane.claim_runs("
                "'worker-old', array['interactive'], 1)"
            ).fetchone()
        assert lost[0] == run_id  # acknowledged by the old primary only
        pair.kill_primary()
        pair.promote()
        with psycopg.connect(pair.dsn_for("lost"), autocommit=True) as conn:
            assert conn.execute(
                "select fence, state from runlane.runs where run_id = %s", (run_id,)
            ).fetchone() == (lost[1] - 1, "queued"), "the promoted primary never saw the claim"
            again = conn.execute(
                "select run_id, fence from runlane.claim_runs("
                "'worker-new', array['interactive'], 1)"
            ).fetchone()
            assert again[0] == run_id
            assert again[1] > lost[1], "the new claim's fence is above the lost one"
            with pytest.raises(psycopg.Error) as refused:
                conn.execute(
                    "select runlane.append_output(%s, %s, 'text', 'old attempt')", (run_id, lost[1])
                )
            assert refused.value.sqlstate == "RL001"
            conn.execute(
                "select runlane.append_output(%s, %s, 'text', 'new attempt')", (run_id, again[1])
            )
            assert conn.execute(
                "select array_agg(body) from runlane.run_outputs where run_id = %s", (run_id,)
            ).fetchone()[0] == ["new attempt"]
