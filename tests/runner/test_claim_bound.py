"""The per-worker organization bound (runlane.max_per_org) cuts a claim before it locks.

A worker near its bound for an organization claims only the room it has left, and locks
only those rows: the organization's other queued runs stay free for the other workers
meanwhile (locking a full page and keeping what the bound allows would hold about
twice the rows a worker claims in a one-tenant drain). Rows another claimer holds do not
shorten the page: the claim reads on past them for the rest of its room.
"""

from __future__ import annotations

import psycopg
from worker_parts import queue_chat_runs

CLAIM = """
select run_id
from runlane.claim_runs(p_worker => %(worker)s::text, p_lanes => array['interactive'],
                        p_limit => %(limit)s::int)
"""
FREE_QUEUED = """
select count(*) from (
    select 1 from runlane.runs where state = 'queued' for update skip locked
) as free
"""


def bounded_claimer(db_dsn: str, bound: int) -> psycopg.Connection:
    claimer = psycopg.connect(db_dsn)
    claimer.execute("select set_config('runlane.max_per_org', %s, false)", (str(bound),))
    claimer.commit()
    return claimer


def test_a_worker_near_its_bound_locks_only_the_runs_it_claims(conn, db_dsn):
    queue_chat_runs(conn, "org-a", "a-1", 300)
    with bounded_claimer(db_dsn, 100) as claimer, psycopg.connect(db_dsn) as other:
        assert len(claimer.execute(CLAIM, {"worker": "w1", "limit": 90}).fetchall()) == 90
        claimer.commit()

        # A page of 100 with room for 10, its transaction still open.
        claimed = claimer.execute(CLAIM, {"worker": "w1", "limit": 100}).fetchall()
        assert len(claimed) == 10

        # Another session sees 210 queued runs (the 10 are not committed yet); only the 10
        # claimed ones are locked.
        assert other.execute(FREE_QUEUED).fetchone()[0] == 200
        other.rollback()
        claimer.commit()

    running = conn.execute(
        "select count(*) from runlane.runs where lease_owner = 'w1' and state = 'running'"
    ).fetchone()[0]
    assert running == 100


def test_rows_another_claimer_holds_do_not_shorten_a_bounded_page(conn, db_dsn):
    ids = queue_chat_runs(conn, "org-a", "a-1", 300)
    with bounded_claimer(db_dsn, 100) as claimer, psycopg.connect(db_dsn) as holder:
        first = [r[0] for r in claimer.execute(CLAIM, {"worker": "w1", "limit": 90})]
        claimer.commit()
        assert first == ids[:90]

        # Another claimer holds the next five runs in claim order, mid-claim.
        held = [
            r[0]
            for r in holder.execute(
                "select run_id from runlane.runs where run_id = any(%s) for update", (ids[90:95],)
            )
        ]
        assert held == ids[90:95]

        claimed = [r[0] for r in claimer.execute(CLAIM, {"worker": "w1", "limit": 100})]
        claimer.commit()
        holder.rollback()

    # The room (10) is filled past the held rows, oldest first.
    assert claimed == ids[95:105]


def test_an_organization_at_the_bound_is_not_read_and_the_others_are_claimed(conn, db_dsn):
    ids = queue_chat_runs(conn, "org-a", "a-1", 300)
    with bounded_claimer(db_dsn, 100) as claimer:
        assert [r[0] for r in claimer.execute(CLAIM, {"worker": "w1", "limit": 100})] == ids[:100]
        claimer.commit()
    newcomers = queue_chat_runs(conn, "org-b", "b-1", 5)

    # org-a's backlog (200 runs) is in front of org-b's five, and w1 is at its bound for
    # org-a: the window of oldest runs first, then the loose index scan alone (the session
    # setting a claim sets after a window that held too few organizations).
    with bounded_claimer(db_dsn, 100) as claimer, psycopg.connect(db_dsn) as other:
        for skip_window in ("off", "on"):
            claimer.execute(
                "select set_config('runlane.claim_skip_window', %s, false)", (skip_window,)
            )
            claimed = [r[0] for r in claimer.execute(CLAIM, {"worker": "w1", "limit": 50})]
            assert claimed == newcomers, skip_window
            # none of org-a's rows was locked
            assert other.execute(FREE_QUEUED).fetchone()[0] == 200
            other.rollback()
            claimer.rollback()


def test_with_several_organizations_each_stops_at_its_own_room(conn, db_dsn):
    queue_chat_runs(conn, "org-a", "a-1", 300)
    with bounded_claimer(db_dsn, 100) as claimer:
        assert len(claimer.execute(CLAIM, {"worker": "w1", "limit": 98}).fetchall()) == 98
        claimer.commit()
    queue_chat_runs(conn, "org-b", "b-1", 20)

    # Room for 2 of org-a and 100 of org-b: round robin alternates them, so the lock's room
    # (2 + 20) reaches past org-a's 2; the bound keeps 2 of it and all 20 of org-b.
    with bounded_claimer(db_dsn, 100) as claimer:
        claimed = [r[0] for r in claimer.execute(CLAIM, {"worker": "w1", "limit": 50})]
        claimer.commit()
    orgs = dict(
        conn.execute(
            "select org_id, count(*) from runlane.runs where run_id = any(%s) group by org_id",
            (claimed,),
        ).fetchall()
    )
    assert orgs == {"org-a": 2, "org-b": 20}
    assert (
        conn.execute(
            "select count(*) from runlane.runs "
            "where lease_owner = 'w1' and state = 'running' and org_id = 'org-a'"
        ).fetchone()[0]
        == 100
    )
