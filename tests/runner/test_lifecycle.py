"""The run lifecycle against real connections: reapers that run at once never reap a run
twice, a heartbeat and a reaper racing for one run leave exactly one winner, and under
the expand generation (0002, compatibility trigger present) new-worker requeues keep
their explicit wake time while a legacy requeue is stamped with the legacy backoff."""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg
from worker_helpers import wait_until_blocked

from runlane.migrate import migrate

FIXTURES = Path(__file__).parent.parent / "sql" / "fixtures"

REAP = "select run_id, state, reason from runlane.reap_stale(p_limit => %(limit)s::int)"
HEARTBEAT = (
    "select runlane.heartbeat(p_run_id => %(run_id)s::bigint, "
    "p_fence => %(fence)s::bigint, p_lease => interval '5 minutes')"
)
RUN = "select {} from runlane.runs where run_id = %s"


def expired_background_runs(conn: psycopg.Connection, count: int) -> list[int]:
    """`count` background runs, each of its own agent, claimed and with a lease that expired."""
    run_ids = []
    with conn.transaction():
        for i in range(count):
            agent = conn.execute(
                "select runlane_test.agent(%s, 'org-reap', %s)", (f"agent-{i}", f"computer-{i}")
            ).fetchone()[0]
            run_id = conn.execute("select runlane_test.queued_run(%s)", (agent,)).fetchone()[0]
            conn.execute("select runlane_test.claimed_on_computer(%s)", (run_id,))
            conn.execute("select runlane_test.lease_expired(%s)", (run_id,))
            run_ids.append(run_id)
    return run_ids


def test_concurrent_reapers_never_reap_the_same_run(conn, db_dsn):
    run_ids = expired_background_runs(conn, 20)
    with psycopg.connect(db_dsn) as first, psycopg.connect(db_dsn) as second:
        first_rows = first.execute(REAP, {"limit": 8}).fetchall()  # its transaction stays open
        second_rows = second.execute(REAP, {"limit": 500}).fetchall()  # skips the locked 8
        second.commit()
        first.commit()
    first_ids = {r[0] for r in first_rows}
    second_ids = {r[0] for r in second_rows}
    assert len(first_ids) == 8
    assert first_ids.isdisjoint(second_ids)
    assert first_ids | second_ids == set(run_ids)
    assert {(r[1], r[2]) for r in first_rows + second_rows} == {("failed", "stale")}
    assert conn.execute(REAP, {"limit": 500}).fetchall() == []
    finished = conn.execute(
        "select run_id, count(*) from runlane.run_events "
        "where event = 'run.finished' group by run_id"
    ).fetchall()
    assert dict(finished) == {run_id: 1 for run_id in run_ids}
    assert conn.execute("select count(*) from runlane.computer_leases").fetchone()[0] == 0


def test_a_heartbeat_committed_first_keeps_its_run(conn, db_dsn):
    (run_id,) = expired_background_runs(conn, 1)
    with psycopg.connect(db_dsn) as owner, psycopg.connect(db_dsn) as reaper:
        assert owner.execute(HEARTBEAT, {"run_id": run_id, "fence": 1}).fetchone()[0] is True
        # The owner's transaction holds the row: the reaper skips it, never waits on it.
        assert reaper.execute(REAP, {"limit": 10}).fetchall() == []
        reaper.commit()
        owner.commit()
        # Committed, the new lease is live: nothing to reap.
        assert reaper.execute(REAP, {"limit": 10}).fetchall() == []
        reaper.commit()
    assert (
        conn.execute("select state from runlane.runs where run_id = %s", (run_id,)).fetchone()[0]
        == "running"
    )


def test_a_heartbeat_behind_a_reaper_answers_false(conn, db_dsn):
    (run_id,) = expired_background_runs(conn, 1)
    answers: list[bool] = []
    with psycopg.connect(db_dsn) as reaper, psycopg.connect(db_dsn, autocommit=True) as owner:
        assert reaper.execute(REAP, {"limit": 10}).fetchall() == [(run_id, "failed", "stale")]

        def heartbeat() -> None:
            answers.append(owner.execute(HEARTBEAT, {"run_id": run_id, "fence": 1}).fetchone()[0])

        worker = threading.Thread(target=heartbeat)
        worker.start()
        wait_until_blocked(conn, owner.info.backend_pid)
        reaper.commit()
        worker.join(timeout=30)
    assert answers == [False]
    assert conn.execute(RUN.format("state, reason, lease_expires_at"), (run_id,)).fetchone() == (
        "failed",
        "stale",
        None,
    )


def expand_generation(dsn: str) -> psycopg.Connection:
    """A database at 0002 (compatibility trigger present) with HEAD functions and fixtures."""
    conn = psycopg.connect(dsn, autocommit=True)
    migrate(conn, to=2)
    conn.execute("create schema if not exists runlane_test")
    for name in ("00_core.sql", "20_lifecycle.sql"):
        conn.execute((FIXTURES / name).read_text())
    assert (
        conn.execute(
            "select count(*) from pg_trigger where tgname = 'runs_legacy_compat'"
        ).fetchone()[0]
        == 1
    )
    conn.execute("select runlane_test.agent('agent-new', 'org-x', 'computer-new')")
    conn.execute("select runlane_test.agent('agent-legacy', 'org-x', 'computer-legacy')")
    return conn


def test_explicit_wake_time_wins_over_the_compatibility_trigger(empty_db_dsn):
    with expand_generation(empty_db_dsn) as conn:
        wake = conn.execute("select now() + interval '2 hours'").fetchone()[0]
        run_id = conn.execute(
            "select runlane_test.queued_run('agent-new', 'background', 'manual', %s)", (wake,)
        ).fetchone()[0]
        conn.execute("update runlane.runs set max_attempts = 10 where run_id = %s", (run_id,))
        fence = conn.execute("select runlane_test.claimed_on_computer(%s)", (run_id,)).fetchone()[0]
        # Released with the wake time it already had: kept exactly, no legacy backoff stamped.
        assert (
            conn.execute(
                "select runlane.release_run(%s, %s, %s, 'computer_busy')", (run_id, fence, wake)
            ).fetchone()[0]
            is True
        )
        assert conn.execute(
            RUN.format("state, wake_at, reason, lease_owner"), (run_id,)
        ).fetchone() == ("queued", wake, "computer_busy", None)
        # Released with no wake time: null, not a backoff.
        fence = conn.execute("select runlane_test.claimed_on_computer(%s)", (run_id,)).fetchone()[0]
        conn.execute("select runlane.release_run(%s, %s)", (run_id, fence))
        assert conn.execute(RUN.format("wake_at"), (run_id,)).fetchone()[0] is None
        # retry_run's wake time is its own delay, not the legacy exp(attempts) backoff.
        fence = conn.execute("select runlane_test.claimed_on_computer(%s)", (run_id,)).fetchone()[0]
        assert (
            conn.execute(
                "select runlane.retry_run(%s, %s, 'boom', interval '1 hour')", (run_id, fence)
            ).fetchone()[0]
            == "queued"
        )
        assert (
            conn.execute(
                "select wake_at - now() > interval '59 minutes' from runlane.runs "
                "where run_id = %s",
                (run_id,),
            ).fetchone()[0]
            is True
        )


def test_a_legacy_requeue_is_still_stamped_and_a_legacy_zombie_is_reaped(empty_db_dsn):
    with expand_generation(empty_db_dsn) as conn:
        run_id = conn.execute("select runlane_test.queued_run('agent-legacy')").fetchone()[0]
        # An older worker claims and requeues with plain updates: the trigger stamps the backoff.
        conn.execute(
            "update runlane.runs set state = 'running', attempts = attempts + 1 where run_id = %s",
            (run_id,),
        )
        assert conn.execute(
            "select lease_owner, fence from runlane.runs where run_id = %s", (run_id,)
        ).fetchone() == ("legacy", 1)
        conn.execute("update runlane.runs set state = 'queued' where run_id = %s", (run_id,))
        assert (
            conn.execute(
                "select wake_at > now() from runlane.runs where run_id = %s", (run_id,)
            ).fetchone()[0]
            is True
        )
        # The backoff passes; it claims again and dies: the reaper closes it (a new-generation
        # write: no backoff is stamped on the failed run).
        conn.execute(
            "update runlane.runs set wake_at = now() - interval '1 second' where run_id = %s",
            (run_id,),
        )
        conn.execute(
            "update runlane.runs set state = 'running', attempts = attempts + 1 where run_id = %s",
            (run_id,),
        )
        assert conn.execute(RUN.format("lease_owner, fence"), (run_id,)).fetchone() == ("legacy", 2)
        # Its 60 s lease is not renewed: two minutes later the reaper finds it.
        assert conn.execute(
            "select run_id, state, reason from runlane.reap_stale(now() + interval '2 minutes')"
        ).fetchall() == [(run_id, "failed", "stale")]
        assert conn.execute(
            RUN.format("state, lease_owner, finished_at is not null"), (run_id,)
        ).fetchone() == ("failed", None, True)
        assert conn.execute("select count(*) from runlane.computer_leases").fetchone()[0] == 0
