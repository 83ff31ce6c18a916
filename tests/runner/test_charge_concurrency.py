"""Concurrent charges of one owner's runs, from several connections at once: every
charge lands exactly once in the ledger, each run's cost and the owner's quarter-hour
bucket are the sums of their charges, and weekly_spend sees all of it."""

from __future__ import annotations

import threading
from decimal import Decimal

import psycopg

CONNECTIONS = 4
CHARGES = 40
AMOUNT = Decimal("0.25")


def test_concurrent_charges_of_one_owner_are_all_counted(conn, db_dsn):
    runs = []
    for i in range(CONNECTIONS):
        conn.execute("select runlane_test.agent(%s, 'org-cc', null, 'owner-cc')", (f"agent-cc{i}",))
        run_id = conn.execute(
            "select runlane_test.queued_run(%s, 'background', 'manual')", (f"agent-cc{i}",)
        ).fetchone()[0]
        fence = conn.execute("select runlane_test.claimed(%s)", (run_id,)).fetchone()[0]
        runs.append((run_id, fence))
    barrier = threading.Barrier(CONNECTIONS)
    errors: list[BaseException] = []

    def charge(run_id: int, fence: int) -> None:
        try:
            with psycopg.connect(db_dsn, autocommit=True) as own:
                own.execute("set role runlane_worker")
                barrier.wait()
                for _ in range(CHARGES):
                    own.execute("select runlane.charge(%s, %s, %s)", (run_id, fence, AMOUNT))
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=charge, args=run) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []

    per_run = AMOUNT * CHARGES
    costs = conn.execute(
        "select cost from runlane.runs where run_id = any(%s) order by run_id",
        ([r for r, _ in runs],),
    ).fetchall()
    assert costs == [(per_run,)] * CONNECTIONS
    ledger = conn.execute(
        "select count(*), sum(amount) from runlane.charges where owner_id = 'owner-cc'"
    ).fetchone()
    assert ledger == (CONNECTIONS * CHARGES, per_run * CONNECTIONS)
    buckets = conn.execute(
        "select sum(amount) from runlane.charge_buckets where owner_id = 'owner-cc'"
    ).fetchone()[0]
    assert buckets == per_run * CONNECTIONS
    assert conn.execute("select runlane.weekly_spend('owner-cc')").fetchone()[0] == (
        per_run * CONNECTIONS
    )
