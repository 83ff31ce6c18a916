"""append_outputs locks its runs in run_id order, whatever order its outputs come in.

A worker's tick sends every stream's outputs in one append_outputs call and holds those
runs' rows until it commits. Two transactions that lock the same runs in different orders
wait for each other in a circle, and PostgreSQL kills one after deadlock_timeout (40P01).
The test holds the lower run's row in a second session that wants the higher run's row
next, as a crossing batch would, and gives append_outputs the higher run's output first."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
from worker_helpers import claimed_chat_run, make_agent, wait_until


def test_a_batch_of_outputs_locks_its_runs_in_run_id_order(conn, db_dsn):
    agent = make_agent(conn, "agent-append-order")
    low = claimed_chat_run(conn, agent, "thread-a")
    high = claimed_chat_run(conn, agent, "thread-b")
    assert low[0] < high[0]
    result: dict[str, Any] = {}

    def send() -> None:
        with psycopg.connect(db_dsn, autocommit=True) as mine:
            result["pid"] = mine.info.backend_pid
            result["rows"] = mine.execute(
                "select run_id, outcome, sqlstate from runlane.append_outputs("
                "%s::bigint[], %s::bigint[], %s::bigint[], %s::text[], %s::text[])",
                (
                    [high[0], low[0]],
                    [high[1], low[1]],
                    [1, 1],
                    ["text", "text"],
                    ["to b", "to a"],
                ),
            ).fetchall()

    with psycopg.connect(db_dsn) as other:
        other.execute("select 1 from runlane.runs where run_id = %s for no key update", (low[0],))
        sender = threading.Thread(target=send)
        sender.start()
        wait_until(
            lambda: (
                "pid" in result
                and conn.execute(
                    "select wait_event_type = 'Lock' from pg_stat_activity where pid = %s",
                    (result["pid"],),
                ).fetchone()[0]
            ),
            what="append_outputs waiting for the lower run's row",
        )
        # holds nothing yet: the higher run's row is free for the crossing session
        other.execute("select 1 from runlane.runs where run_id = %s for no key update", (high[0],))
        other.commit()
        sender.join(30)

    assert result.get("rows") == [(high[0], "applied", None), (low[0], "applied", None)], (
        "both runs applied, one row each in input order"
    )
    assert conn.execute(
        "select array_agg(body order by body) from runlane.run_outputs where run_id = any(%s)",
        ([low[0], high[0]],),
    ).fetchone()[0] == ["to a", "to b"]
