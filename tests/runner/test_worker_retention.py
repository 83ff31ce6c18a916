"""Retention with a real worker: `--retention 8d` makes the maintenance leader purge the
runs that finished longer ago (with their rows) while recent runs stay; without the flag
nothing is deleted; a window under 8 days is refused at startup."""

from __future__ import annotations

import subprocess
import sys
import threading

import psycopg
import worker_helpers
from worker_helpers import make_agent, run_state, submit, wait_until

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after

ROWS_OF_RUN = "select runlane_test.rows_of_run(%s)"


def aged(conn, run_id: int, days: int) -> None:
    """Moves a finished run's finish (and its journal) back by `days`."""
    conn.execute(
        "update runlane.runs set finished_at = finished_at - make_interval(days => %s) "
        "where run_id = %s and finished_at is not null",
        (days, run_id),
    )


def test_the_leader_purges_runs_finished_before_the_window_and_keeps_the_rest(conn, workers):
    make_agent(conn, "agent-keep")
    worker = workers(
        "--retention",
        "8d",
        "--tick-interval",
        "0.2",
        "--leader-retry",
        "0.2",
        lanes=("interactive", "background"),
    )
    worker.wait_for("dispatch.ready")
    old = submit(conn, "agent-keep", "thread-old", "first")
    recent = submit(conn, "agent-keep", "thread-recent", "second")
    for run_id in (old, recent):
        wait_until(lambda r=run_id: run_state(conn, r) == "succeeded", what=f"run {run_id}")
    # A charged run that finished 9 days ago, and one 7 days ago (inside the window).
    charged_old = conn.execute(
        "select runlane_test.aged_run('agent-keep', interval '9 days', 5, 'thread-charged-old')"
    ).fetchone()[0]
    charged_week = conn.execute(
        "select runlane_test.aged_run('agent-keep', interval '7 days', 3, 'thread-charged-week')"
    ).fetchone()[0]
    kept_rows = {r: conn.execute(ROWS_OF_RUN, (r,)).fetchone()[0] for r in (recent, charged_week)}
    assert conn.execute(ROWS_OF_RUN, (old,)).fetchone()[0] > 1  # its message, outputs, journal
    # A worker process gone for 30 days: its registry row goes; the live worker's stays.
    conn.execute(
        "insert into runlane.workers (worker_id, generation, lanes, heartbeat_at) "
        "values ('worker-gone', 2, '{interactive}', now() - interval '30 days')"
    )
    aged(conn, old, 9)

    wait_until(
        lambda: (
            conn.execute(ROWS_OF_RUN, (old,)).fetchone()[0] == 0
            and conn.execute(ROWS_OF_RUN, (charged_old,)).fetchone()[0] == 0
        ),
        what="the old runs purged",
    )
    purged = worker.wait_for("maintenance.purged")
    assert purged["maintenance.purged_runs"] >= 1
    wait_until(
        lambda: (
            conn.execute(
                "select count(*) from runlane.workers where worker_id = 'worker-gone'"
            ).fetchone()[0]
            == 0
        ),
        what="the gone worker's registry row purged",
    )
    assert conn.execute("select count(*) from runlane.workers").fetchone()[0] >= 1
    assert {r: conn.execute(ROWS_OF_RUN, (r,)).fetchone()[0] for r in kept_rows} == kept_rows
    # The purged charge (5) left the buckets; the one of 7 days ago (3) is still counted.
    assert conn.execute("select sum(amount) from runlane.charge_buckets").fetchone()[0] == 3


def test_without_retention_nothing_is_deleted(conn, workers):
    make_agent(conn, "agent-all")
    worker = workers(
        "--tick-interval", "0.2", "--leader-retry", "0.2", lanes=("interactive", "background")
    )
    worker.wait_for("dispatch.ready")
    old = conn.execute("select runlane_test.aged_run('agent-all', interval '400 days')").fetchone()[
        0
    ]
    worker.wait_for("maintenance.leader_acquired")
    # Passes run every 0.2 s while a later run is executed: the year-old run stays, whole.
    probe = submit(conn, "agent-all", "thread-probe", "later")
    wait_until(lambda: run_state(conn, probe) == "succeeded", what="a later run")
    assert conn.execute(ROWS_OF_RUN, (old,)).fetchone()[0] == 5
    assert worker.events("maintenance.purged") == []


def test_a_window_under_8_days_is_refused_at_startup(db_dsn):
    for window, what in (
        ("7d", "shorter than 8 days"),
        ("P1W", "shorter than 8 days"),
        ("soon", "not a duration"),
    ):
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "runlane",
                "worker",
                "--lane",
                "interactive",
                "--retention",
                window,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={"RUNLANE_DSN": db_dsn, "PATH": "/usr/bin:/bin"},
        )
        assert result.returncode == 2, result.stderr
        assert what in result.stderr
        assert "Traceback" not in result.stderr


def test_a_purge_skips_a_run_another_transaction_holds_and_never_waits(conn, db_dsn):
    """A finisher (or anything else) holding an old finished run's row: the purge skips it
    at once (were it to wait, lock_timeout would end it with 55P03 after 5 s) and deletes
    the rest; the held run is purged by a later call, once the holder committed."""
    conn.execute("select runlane_test.agent('agent-held', 'org-held')")
    held, free = (
        conn.execute(
            "select runlane_test.aged_run('agent-held', interval '20 days', 1, %s)", (thread,)
        ).fetchone()[0]
        for thread in ("thread-held", "thread-free")
    )
    with psycopg.connect(db_dsn) as holder:
        holder.execute("select 1 from runlane.runs where run_id = %s for update", (held,))
        assert conn.execute("select runlane.purge_finished('8 days')").fetchone()[0] == 1
        assert conn.execute(ROWS_OF_RUN, (free,)).fetchone()[0] == 0
        assert conn.execute(ROWS_OF_RUN, (held,)).fetchone()[0] == 5
        holder.rollback()
    assert conn.execute("select runlane.purge_finished('8 days')").fetchone()[0] == 1
    assert conn.execute(ROWS_OF_RUN, (held,)).fetchone()[0] == 0


def test_the_leader_purges_emptied_threads_and_receipts_of_workers_long_gone(conn, workers):
    make_agent(conn, "agent-rows")
    worker = workers(
        "--retention",
        "8d",
        "--tick-interval",
        "0.2",
        "--leader-retry",
        "0.2",
        lanes=("interactive", "background"),
    )
    worker.wait_for("dispatch.ready")
    live = submit(conn, "agent-rows", "thread-live", "hello")
    wait_until(lambda: run_state(conn, live) == "succeeded", what="the live thread's run")
    # A thread whose only run finished long ago (its lock row stays once the run is
    # purged), and the receipts of a worker gone for a month.
    conn.execute("select runlane_test.aged_run('agent-rows', interval '9 days', 0, 'thread-old')")
    conn.execute("select runlane._thread_lock('agent-rows', 'thread-old')")
    conn.execute("""
        insert into runlane.workers (worker_id, generation, lanes, heartbeat_at, stopped_at)
        values ('worker-gone', 2, array['interactive'], now() - interval '30 days',
                now() - interval '30 days');
        insert into runlane.claim_receipts (worker_id, lanes, claim_key, claimed_at)
        values ('worker-gone', array['interactive'], gen_random_uuid(),
                now() - interval '30 days')""")
    threads = "select thread_id from runlane.threads where agent_id = 'agent-rows' order by 1"
    assert [r[0] for r in conn.execute(threads)] == ["thread-live", "thread-old"]

    wait_until(
        lambda: [r[0] for r in conn.execute(threads)] == ["thread-live"],
        what="the emptied thread's lock row purged",
    )
    wait_until(
        lambda: (
            conn.execute(
                "select count(*) from runlane.claim_receipts where worker_id = 'worker-gone'"
            ).fetchone()[0]
            == 0
        ),
        what="the gone worker's receipt purged",
    )
    purged = worker.wait_for(
        "maintenance.purged", where=lambda r: r.get("maintenance.purged_threads", 0) > 0
    )
    assert purged["maintenance.purged_threads"] == 1
    # The live worker's own receipts stay, and it still claims and runs.
    assert (
        conn.execute(
            "select count(*) from runlane.claim_receipts where worker_id <> 'worker-gone'"
        ).fetchone()[0]
        >= 1
    )
    again = submit(conn, "agent-rows", "thread-old", "back again")
    wait_until(lambda: run_state(conn, again) == "succeeded", what="a purged thread's new run")


def test_a_thread_lock_that_waited_for_the_purge_of_its_row_creates_it_again(conn, db_dsn):
    """purge_empty_threads locks an empty thread's row and deletes it; a submit_message
    that meanwhile waited for that row finds it gone: it must create the row again and
    hold it, not go on without the thread's lock."""
    make_agent(conn, "agent-lock")
    conn.execute("select runlane._thread_lock('agent-lock', 'thread-1')")  # an empty thread
    with psycopg.connect(db_dsn) as purger:
        purger.execute(
            "select 1 from runlane.threads where agent_id = 'agent-lock' "
            "and thread_id = 'thread-1' for update"
        )  # the purge's lock step
        result: dict = {}

        def submit_waiting() -> None:
            with psycopg.connect(db_dsn, autocommit=True) as c:
                c.execute("set application_name = 'lock-waiter'")
                result["row"] = c.execute(
                    "select * from runlane.submit_message('agent-lock', 'thread-1', 'hello')"
                ).fetchone()

        waiter = threading.Thread(target=submit_waiting)
        waiter.start()
        wait_until(
            lambda: (
                conn.execute(
                    "select count(*) from pg_stat_activity where application_name = 'lock-waiter' "
                    "and wait_event_type = 'Lock'"
                ).fetchone()[0]
                == 1
            ),
            what="the submit waits",
        )
        purger.execute(
            "delete from runlane.threads where agent_id = 'agent-lock' and thread_id = 'thread-1'"
        )
        purger.commit()
        waiter.join(timeout=30)
    assert result["row"][2] == "created"
    assert (
        conn.execute(
            "select count(*) from runlane.threads where agent_id = 'agent-lock' "
            "and thread_id = 'thread-1'"
        ).fetchone()[0]
        == 1
    )
