"""A chat claim never queues behind an organization's cap lock.

claim_runs locks an organization's settings row only to count its running background
runs. A claim that locked no background run skips that machinery, so while another
transaction holds the organization's row (a background claim of the same organization
in progress), a chat claim still returns at once; a background claim of that
organization waits for the row, as the cap requires.
"""

from __future__ import annotations

import psycopg
import pytest

CLAIM = """
select run_id, lane
from runlane.claim_runs(p_worker => %(worker)s::text, p_lanes => %(lanes)s::text[],
                        p_limit => %(limit)s::int)
"""


def test_chat_claim_skips_the_organization_lock(conn, db_dsn):
    conn.execute("select runlane_test.org('org-a', 5)")
    conn.execute("select runlane_test.agent('chat-agent', 'org-a')")
    conn.execute("select runlane_test.agent('loop-agent', 'org-a')")
    chat = conn.execute(
        "select runlane_test.queued_run('chat-agent', 'interactive', 'interactive')").fetchone()[0]
    loop = conn.execute(
        "select runlane_test.queued_run('loop-agent', 'background', 'manual')").fetchone()[0]

    with psycopg.connect(db_dsn) as holder, psycopg.connect(db_dsn) as claimer:
        # The organization's row held as a concurrent background claim holds it.
        holder.execute("select 1 from runlane.platform_settings where org_id = 'org-a' "
                       "for no key update")
        # A wait would end in lock_not_available rather than hang the test.
        claimer.execute("set lock_timeout = '500ms'")
        claimer.commit()

        rows = claimer.execute(CLAIM, {"worker": "w-chat", "lanes": ["interactive"],
                                       "limit": 10}).fetchall()
        claimer.commit()
        assert rows == [(chat, "interactive")]

        with pytest.raises(psycopg.errors.LockNotAvailable):
            claimer.execute(CLAIM, {"worker": "w-loop", "lanes": ["background"], "limit": 10})
        claimer.rollback()
        holder.rollback()

    state = conn.execute("select state, attempts from runlane.runs where run_id = %s",
                         (loop,)).fetchone()
    assert state == ("queued", 0)
    rows = conn.execute(CLAIM, {"worker": "w-loop", "lanes": ["background"],
                                "limit": 10}).fetchall()
    assert rows == [(loop, "background")]
