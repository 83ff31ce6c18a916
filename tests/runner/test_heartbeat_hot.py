"""A heartbeat is a HOT update, and the reaper still finds expired leases (migration 0015).

A heartbeat moves a running run's lease_expires_at and heartbeat_at. While an index held
lease_expires_at, every heartbeat wrote the run's new version into all 9 indexes a running
chat run is in; with no index on either column PostgreSQL updates the row on its page.
The reaper, that index's one reader, now reads the running runs (runs_worker_running_idx)
and sorts them: never the finished history.
"""

from __future__ import annotations

import psycopg

TABLE_COUNTS = """
select n_tup_upd, n_tup_hot_upd, seq_scan
from pg_stat_xact_user_tables
where relid = 'runlane.runs'::regclass
"""


def test_no_index_of_runs_holds_the_columns_a_heartbeat_moves(conn):
    indexes = conn.execute(
        """
        select c.relname
        from pg_index as i
        join pg_class as c on c.oid = i.indexrelid
        where i.indrelid = 'runlane.runs'::regclass
          and pg_get_indexdef(i.indexrelid) ~ '\\m(lease_expires_at|heartbeat_at)\\M'
        """
    ).fetchall()
    assert indexes == []


def test_heartbeats_update_the_run_in_place(conn, db_dsn):
    conn.execute("select runlane_test.agent('agent-hb')")
    run_id = conn.execute(
        "select run_id from runlane.submit_message('agent-hb', 'thread-1', 'hi')"
    ).fetchone()[0]
    # Each heartbeat its own transaction, as a worker's are: now() moves between them, so
    # each one really changes lease_expires_at.
    with psycopg.connect(db_dsn, autocommit=True) as worker:
        fence = worker.execute(
            "select fence from runlane.claim_runs('w-hb', array['interactive'], 10)"
        ).fetchone()[0]
        before = _updates_of_runs(worker)
        leases = []
        for _ in range(3):
            assert (
                worker.execute("select runlane.heartbeat(%s, %s)", (run_id, fence)).fetchone()[0]
                is True
            )
            leases.append(
                worker.execute(
                    "select lease_expires_at from runlane.runs where run_id = %s", (run_id,)
                ).fetchone()[0]
            )
        after = _updates_of_runs(worker)
    assert len(set(leases)) == 3, "every heartbeat moved the lease"
    assert (after[0] - before[0], after[1] - before[1]) == (3, 3), "updates, HOT updates"


def _updates_of_runs(conn: psycopg.Connection) -> tuple[int, int]:
    """runs' updates and HOT updates so far, this session's included: its pending counts
    are flushed when the forcing transaction ends (autocommit), before the read."""
    conn.execute("select pg_stat_force_next_flush()")
    return conn.execute(
        "select n_tup_upd, n_tup_hot_upd from pg_stat_user_tables "
        "where relid = 'runlane.runs'::regclass"
    ).fetchone()


def test_the_reaper_reads_the_running_runs_not_the_history(conn, db_dsn):
    conn.execute("select runlane_test.agent('agent-r')")
    # 5,000 finished runs of history, 20 running ones, the leases of 5 expired
    conn.execute(
        """
        insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt, model,
                                  state, finished_at)
        select 'org-a', 'agent-r', 'interactive', 'interactive', 'old-' || g, 'x', 'm',
               'succeeded', now() - interval '1 day'
        from generate_series(1, 5000) as g
        """
    )
    running = [
        conn.execute(
            "select runlane_test.queued_run('agent-r', 'interactive', 'interactive')"
        ).fetchone()[0]
        for _ in range(20)
    ]
    for run_id in running:
        conn.execute("select runlane_test.claimed(%s)", (run_id,))
    expired = running[:5]
    for minutes, run_id in enumerate(expired, start=1):
        conn.execute(
            "select runlane_test.lease_expired(%s, %s::interval)", (run_id, f"{minutes} minutes")
        )
    conn.execute("analyze runlane.runs")

    with psycopg.connect(db_dsn) as maintenance:
        _, _, scans = maintenance.execute(TABLE_COUNTS).fetchone()
        reaped = [
            r[0] for r in maintenance.execute("select run_id from runlane.reap_stale(now(), 3)")
        ]
        _, _, after_scans = maintenance.execute(TABLE_COUNTS).fetchone()
        maintenance.commit()
    assert after_scans == scans, "the reaper scanned the whole table"
    # the longest expired first (a page of 3 of the 5)
    assert sorted(reaped) == sorted(expired[2:])
