"""Migration 0008 carries existing spend into the charge ledger: an install upgraded from
runs.cost keeps its owners' weekly spend (a run's cost charged at its finish, else its
creation); runs without a positive, finite cost charge nothing."""

from __future__ import annotations

from decimal import Decimal

import psycopg

from runlane.migrate import migrate

SEED = """
insert into runlane.platform_settings (org_id) values ('org-m');
insert into runlane.users (user_id, org_id) values ('owner-m', 'org-m'), ('owner-n', 'org-m');
insert into runlane.agents (agent_id, org_id, owner_id, model)
values ('agent-m1', 'org-m', 'owner-m', 'x'), ('agent-m2', 'org-m', 'owner-m', 'x'),
       ('agent-n', 'org-m', 'owner-n', 'x');
insert into runlane.runs (org_id, agent_id, lane, trigger, state, cost, attempts,
                          created_at, finished_at)
values
    ('org-m', 'agent-m1', 'background', 'manual', 'succeeded', 4.5, 1,
     '2026-11-23 10:00+00', '2026-11-25 10:00+00'),
    ('org-m', 'agent-m2', 'background', 'manual', 'failed', 2, 3,
     '2026-11-16 10:00+00', '2026-11-24 09:00+00'),
    ('org-m', 'agent-m1', 'background', 'manual', 'succeeded', 1, 1,
     '2026-11-20 10:00+00', '2026-11-20 10:05+00'),
    ('org-m', 'agent-m2', 'background', 'manual', 'succeeded', 0, 1,
     '2026-11-24 10:00+00', '2026-11-24 10:05+00'),
    ('org-m', 'agent-n', 'background', 'manual', 'succeeded', 'NaN', 1,
     '2026-11-24 10:00+00', '2026-11-24 10:05+00'),
    ('org-m', 'agent-n', 'interactive', 'interactive', 'running', 0.25, 1,
     '2026-11-24 11:00+00', null);
"""


def test_existing_spend_is_carried_into_the_ledger(empty_db_dsn):
    with psycopg.connect(empty_db_dsn, autocommit=True) as conn:
        migrate(conn, to=3)
        conn.execute(SEED)
        migrate(conn)
        week = "2026-11-26 12:00+00"  # the week of Monday 2026-11-23 (UTC)

        def spend(owner: str, at: str) -> Decimal:
            return conn.execute("select runlane.weekly_spend(%s, %s)", (owner, at)).fetchone()[0]

        # Charged at the finish: the run created the week before counts this week.
        assert spend("owner-m", week) == Decimal("6.5")
        assert spend("owner-m", "2026-11-19 12:00+00") == Decimal("1")
        # NaN is dropped; an unfinished run is charged at its creation.
        assert spend("owner-n", week) == Decimal("0.25")
        rows = conn.execute(
            "select a.agent_id, c.attempt, c.amount from runlane.charges as c "
            "join runlane.runs as r using (run_id) join runlane.agents as a using (agent_id) "
            "order by c.charge_id"
        ).fetchall()
        assert rows == [
            ("agent-m1", 1, Decimal("4.5")),
            ("agent-m2", 3, Decimal("2")),
            ("agent-m1", 1, Decimal("1")),
            ("agent-n", 1, Decimal("0.25")),
        ]
        assert conn.execute("select sum(amount) from runlane.charge_buckets").fetchone()[
            0
        ] == Decimal("7.75")
