"""A claim never waits on a lock an API transaction can hold, and claimers of one
organization still take turns.

claim_runs serializes the background claims of an organization (its cap) on the
organization's row in runlane.org_claim_locks, a row only claim_runs locks. So while a
transaction holds the organization's platform_settings row (put_org left open by a slow
request), chat and background claims return at once; a background claim of that
organization waits only while another claim holds the claim lock row, as the cap
requires. A chat claim, which locks no background run, skips that lock altogether.
"""

from __future__ import annotations

import psycopg
import pytest
import worker_helpers
from psycopg.conninfo import make_conninfo
from worker_helpers import wait_until

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after

CLAIM = """
select run_id, lane
from runlane.claim_runs(p_worker => %(worker)s::text, p_lanes => %(lanes)s::text[],
                        p_limit => %(limit)s::int)
"""


def test_claims_skip_the_settings_row_and_wait_only_for_another_claim(conn, db_dsn):
    conn.execute("select runlane_test.org('org-a', 5)")
    conn.execute("select runlane_test.agent('chat-agent', 'org-a')")
    conn.execute("select runlane_test.agent('loop-agent', 'org-a')")
    chat = conn.execute(
        "select runlane_test.queued_run('chat-agent', 'interactive', 'interactive')"
    ).fetchone()[0]
    loop = conn.execute(
        "select runlane_test.queued_run('loop-agent', 'background', 'manual')"
    ).fetchone()[0]
    conn.commit()

    with psycopg.connect(db_dsn) as holder, psycopg.connect(db_dsn) as claimer:
        # A wait would end in lock_not_available rather than hang the test.
        claimer.execute("set lock_timeout = '500ms'")
        claimer.commit()

        # The organization's settings row held as put_org holds it.
        holder.execute("select 1 from runlane.platform_settings where org_id = 'org-a' for update")
        rows = claimer.execute(
            CLAIM, {"worker": "w-chat", "lanes": ["interactive"], "limit": 10}
        ).fetchall()
        assert rows == [(chat, "interactive")]
        rows = claimer.execute(
            CLAIM, {"worker": "w-loop", "lanes": ["background"], "limit": 10}
        ).fetchall()
        assert rows == [(loop, "background")]
        claimer.rollback()
        holder.rollback()

        # The organization's claim lock held as a concurrent background claim holds it.
        holder.execute("select 1 from runlane.org_claim_locks where org_id = 'org-a' for update")
        rows = claimer.execute(
            CLAIM, {"worker": "w-chat", "lanes": ["interactive"], "limit": 10}
        ).fetchall()
        claimer.commit()
        assert rows == [(chat, "interactive")]
        with pytest.raises(psycopg.errors.LockNotAvailable):
            claimer.execute(CLAIM, {"worker": "w-loop", "lanes": ["background"], "limit": 10})
        claimer.rollback()
        holder.rollback()

    state = conn.execute(
        "select state, attempts from runlane.runs where run_id = %s", (loop,)
    ).fetchone()
    assert state == ("queued", 0)
    rows = conn.execute(
        CLAIM, {"worker": "w-loop", "lanes": ["background"], "limit": 10}
    ).fetchall()
    assert rows == [(loop, "background")]


def test_an_organization_without_its_lock_row_gets_one_at_its_first_claim(conn):
    """An organization created before its trigger was in place (between migration 0019
    and the functions of a migrate run) has no claim lock row: its first background claim
    adds it and holds it."""
    conn.execute("select runlane_test.org('org-late', 5)")
    conn.execute("select runlane_test.agent('late-agent', 'org-late')")
    run = conn.execute(
        "select runlane_test.queued_run('late-agent', 'background', 'manual')"
    ).fetchone()[0]
    conn.execute("delete from runlane.org_claim_locks where org_id = 'org-late'")
    rows = conn.execute(
        CLAIM, {"worker": "w-late", "lanes": ["background"], "limit": 10}
    ).fetchall()
    assert rows == [(run, "background")]
    assert (
        conn.execute(
            "select count(*) from runlane.org_claim_locks where org_id = 'org-late'"
        ).fetchone()[0]
        == 1
    )


def test_an_open_put_org_of_one_organization_never_stalls_another_organizations_runs(
    conn, db_dsn, workers
):
    """A login scoped to org-a leaves `put_org('org-a', …)` open (a slow request). Real
    workers claim both organizations' background runs meanwhile: org-b's "Run now" runs
    start and finish while that transaction stays open (and org-a's too: its settings
    row is read without a lock)."""
    login = "t_claim_scoped_a"
    conn.execute(f'create role "{login}" login')
    conn.execute(f'grant runlane_api to "{login}"')
    for org in ("org-a", "org-b"):
        conn.execute("select runlane_test.org(%s, 4)", (org,))
    conn.execute("select runlane.scope_api_login(%s, 'org-a')", (login,))
    runs = {}
    for org in ("org-a", "org-b"):
        for i in range(4):
            agent = conn.execute(
                "select runlane_test.agent(%s, %s)", (f"agent-{org}-{i}", org)
            ).fetchone()[0]
            runs.setdefault(org, []).append(
                conn.execute("select run_id from runlane.run_now(%s)", (agent,)).fetchone()[0]
            )
    conn.commit()

    open_request = psycopg.connect(make_conninfo(db_dsn, user=login))
    try:
        open_request.execute("select runlane.put_org('org-a', '{\"agent_max_concurrency\": 3}')")
        # ... and stays open: its transaction holds org-a's settings row.
        assert (
            conn.execute(
                "select count(*) from pg_locks as l join pg_stat_activity as a on a.pid = l.pid "
                "where a.usename = %s and l.locktype = 'transactionid'",
                (login,),
            ).fetchone()[0]
            >= 1
        )
        conn.commit()
        for _ in range(2):
            workers("--no-maintenance", lanes=("background",))

        def finished(org: str) -> bool:
            done = conn.execute(
                "select count(*) filter (where state = 'succeeded') from runlane.runs "
                "where run_id = any(%s)",
                (runs[org],),
            ).fetchone()[0]
            conn.commit()
            return done == len(runs[org])

        wait_until(
            lambda: finished("org-b"),
            timeout=90,
            what="org-b's runs finished while org-a's put_org is open",
        )
        wait_until(lambda: finished("org-a"), timeout=90, what="org-a's runs finished too")
        assert open_request.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    finally:
        open_request.rollback()
        open_request.close()
        conn.execute("delete from runlane.api_logins")
        conn.execute(f'drop role "{login}"')
        conn.commit()
