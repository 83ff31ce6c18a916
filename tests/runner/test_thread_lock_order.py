"""Transactions that take the locks of several chat threads take them in one order.

Finishing, retrying or reaping a chat run holds its thread's lock until commit. A
transaction that handles runs of several threads (a worker's finish_runs batch, the
leader's reap_stale) must take those locks in (agent_id, thread_id) order, whatever order
its runs come in: two of them taking the same threads in different orders wait for each
other in a circle, and PostgreSQL kills one after deadlock_timeout (40P01), in the middle
of chat traffic. Each test holds thread-a's lock in a second session that wants thread-b's
next, as a concurrent batch would, and gives the other transaction thread-b's run first."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import psycopg
from worker_helpers import claimed_chat_run, make_agent, wait_until

from runlane.worker import FINISH_RUNS, pg_array


def against_a_crossing_session(
    conn, db_dsn: str, agent: str, work: Callable[[psycopg.Connection], Any]
) -> Any:
    """Runs `work` on its own connection while another session holds thread-a's lock;
    once `work` waits for that lock, the other session takes thread-b's and commits."""
    result: dict[str, Any] = {}

    def run() -> None:
        with psycopg.connect(db_dsn, autocommit=True) as mine:
            result["pid"] = mine.info.backend_pid
            result["value"] = work(mine)

    with psycopg.connect(db_dsn) as other:
        other.execute("select runlane._thread_lock(%s, 'thread-a')", (agent,))
        worker = threading.Thread(target=run)
        worker.start()
        wait_until(
            lambda: (
                "pid" in result
                and conn.execute(
                    "select wait_event_type = 'Lock' from pg_stat_activity where pid = %s",
                    (result["pid"],),
                ).fetchone()[0]
            ),
            what="a wait for thread-a's lock",
        )
        other.execute("select runlane._thread_lock(%s, 'thread-b')", (agent,))
        other.commit()
        worker.join(30)
    assert "value" in result, "the transaction came through"
    return result["value"]


def test_a_finish_batch_takes_thread_locks_in_order_whatever_the_input_order(conn, db_dsn):
    agent = make_agent(conn, "agent-locks")
    run_a = claimed_chat_run(conn, agent, "thread-a")
    run_b = claimed_chat_run(conn, agent, "thread-b")
    params = {
        "run_ids": [run_b[0], run_a[0]],
        "fences": [run_b[1], run_a[1]],
        "outcomes": ["succeeded", "succeeded"],
        "errors": [None, None],
        "costs": [0, 0],
        "counts": [1, 1],
        "kinds": ["text", "text"],
        "bodies": ["reply b", "reply a"],
        "seqs": [1, 1],
    }

    rows = against_a_crossing_session(
        conn,
        db_dsn,
        agent,
        lambda mine: mine.execute(
            FINISH_RUNS, {k: pg_array(v) for k, v in params.items()}
        ).fetchall(),
    )

    assert [(r[0], r[1], r[4]) for r in rows] == [(run_a[0], True, None), (run_b[0], True, None)], (
        "both finished, in lock order"
    )
    assert conn.execute(
        "select array_agg(body order by body) from runlane.run_outputs where run_id = any(%s)",
        ([run_a[0], run_b[0]],),
    ).fetchone()[0] == ["reply a", "reply b"]


def test_reap_stale_takes_thread_locks_in_order_whatever_expired_first(conn, db_dsn):
    agent = make_agent(conn, "agent-locks")
    run_a = claimed_chat_run(conn, agent, "thread-a")
    run_b = claimed_chat_run(conn, agent, "thread-b")
    conn.execute(
        "update runlane.runs set lease_expires_at = now() - case run_id "
        "when %s then interval '2 minutes' else interval '1 minute' end "
        "where run_id in (%s, %s)",
        (run_b[0], run_a[0], run_b[0]),
    )

    rows = against_a_crossing_session(
        conn,
        db_dsn,
        agent,
        lambda mine: mine.execute(
            "select run_id, state, reason from runlane.reap_stale(now(), 10)"
        ).fetchall(),
    )

    assert rows == [(run_a[0], "queued", "lease_expired"), (run_b[0], "queued", "lease_expired")]
