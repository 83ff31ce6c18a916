"""A claim fills its page past the rows concurrent claimers hold.

Workers that start together on one backlog race for its oldest runs. claim_runs reads
2 x p_limit + 8 candidates, locks them SKIP LOCKED, and reads again past those it could
not lock, twice as far each time: a small first claim behind a hundred held rows still
comes back full. (With a fixed margin it read 4 x 28 rows for a page of 10 and came back
empty; a worker takes a short page for a drained queue and waits for its next scan.)
"""

from __future__ import annotations

import psycopg
from worker_parts import queue_chat_runs

CLAIM = """
select run_id
from runlane.claim_runs(p_worker => 'w-late', p_lanes => array['interactive'], p_limit => 10)
"""


def test_a_small_claim_reads_past_a_hundred_held_rows(conn, db_dsn):
    ids = queue_chat_runs(conn, "org-a", "a-1", 300)

    with psycopg.connect(db_dsn) as holders, psycopg.connect(db_dsn) as late:
        # Other claimers' locks on the 112 oldest runs, their claims not yet committed.
        held = holders.execute(
            "select run_id from runlane.runs where run_id = any(%s) for update", (ids[:112],)
        ).fetchall()
        assert len(held) == 112

        claimed = [r[0] for r in late.execute(CLAIM)]
        late.commit()
        holders.rollback()

    assert claimed == ids[112:122]
