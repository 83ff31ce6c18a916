"""What still blocks the contract step (0003) of the rolling upgrade to direct dispatch.

Thin over `runlane.upgrade_status()`: one row per blocker (live legacy workers, pending
legacy run deliveries, agents with more than one unfinished background run, redundant
timer runs left), the same list migration 0003 refuses with (SQLSTATE RL009).
"""

from __future__ import annotations

import psycopg
from psycopg.rows import dict_row

UPGRADE_STATUS = "select blocker, detail from runlane.upgrade_status()"


def upgrade_status(conn: psycopg.Connection) -> list[dict]:
    """[{'blocker': …, 'detail': …}, …]; empty when the contract step may run."""
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(UPGRADE_STATUS)
        return cur.fetchall()
