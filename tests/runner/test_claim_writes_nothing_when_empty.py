"""A claim that finds no run writes nothing, and a resend still returns what it claimed.

Every idle worker scans each lane every few seconds, and every notification wakes every
idle worker while one of them takes the run. Locking the worker's receipt row (and its
bound row) before looking at the queue would cost a transaction id, 96-152 bytes of WAL
and a flushed commit each time, so claim_runs reads the queue and the receipt in one
statement first and, with no eligible run and a key that is not the recorded one,
returns without a lock. "Writes nothing" is checked where it shows:
the claim's transaction was never given a transaction id (txid_current_if_assigned).
"""

from __future__ import annotations

import threading
import uuid

import psycopg
from worker_helpers import wait_until_blocked
from worker_parts import claim_connection, queue_chat_runs, worker_claim

from runlane.worker.dispatcher import CLAIM


def _claim(conn: psycopg.Connection, worker: str, key: uuid.UUID) -> tuple[list[tuple], int | None]:
    """The worker's keyed claim in a transaction of its own: (rows, the transaction's id
    if it was given one)."""
    with conn.transaction():
        rows = conn.execute(CLAIM, worker_claim(worker, key=key)).fetchall()
        xid = conn.execute("select txid_current_if_assigned()").fetchone()[0]
    return rows, xid


def test_an_empty_queue_is_claimed_without_a_write(conn, db_dsn):
    queue_chat_runs(conn, "org-a", "a-1", 0)
    with claim_connection(db_dsn) as worker:
        rows, xid = _claim(worker, "w-1", uuid.uuid4())
        assert rows == []
        assert xid is None, "the empty claim took a transaction id: it wrote"
        # ... and recorded nothing for a resend to find
        assert conn.execute("select count(*) from runlane.claim_receipts").fetchone()[0] == 0


def test_a_run_not_awake_yet_is_no_reason_to_write(conn, db_dsn):
    [run_id] = queue_chat_runs(conn, "org-a", "a-1", 1)
    conn.execute(
        "update runlane.runs set wake_at = now() + interval '1 hour' where run_id = %s", (run_id,)
    )
    with claim_connection(db_dsn) as worker:
        rows, xid = _claim(worker, "w-1", uuid.uuid4())
    assert (rows, xid) == ([], None)
    assert conn.execute(
        "select state, fence from runlane.runs where run_id = %s", (run_id,)
    ).fetchone() == ("queued", 0)


def test_the_workers_that_lost_the_run_write_nothing(conn, db_dsn):
    [run_id] = queue_chat_runs(conn, "org-a", "a-1", 1)
    with claim_connection(db_dsn) as winner, claim_connection(db_dsn) as loser:
        rows, xid = _claim(winner, "w-winner", uuid.uuid4())
        assert [r[0] for r in rows] == [run_id] and xid is not None
        # the same notification woke the other worker; its claim comes after the commit
        rows, xid = _claim(loser, "w-loser", uuid.uuid4())
        assert (rows, xid) == ([], None)


def test_a_resend_with_an_empty_queue_still_returns_the_claimed_runs(conn, db_dsn):
    ids = queue_chat_runs(conn, "org-a", "a-1", 3)
    key = uuid.uuid4()
    with claim_connection(db_dsn) as worker:
        first, _ = _claim(worker, "w-1", key)
        assert [r[0] for r in first] == ids
        # the reply was lost; the queue is empty now, and the resend carries the same key
        again, _ = _claim(worker, "w-1", key)
        assert [(r[0], r[1]) for r in again] == [(r[0], r[1]) for r in first]
        # a new key on the empty queue: nothing, and the receipt keeps the first claim
        rows, xid = _claim(worker, "w-1", uuid.uuid4())
        assert (rows, xid) == ([], None)
        assert conn.execute(
            "select claim_key, run_ids from runlane.claim_receipts "
            "where worker_id = 'w-1' and lanes = '{interactive}'"
        ).fetchone() == (key, ids)


def test_a_resend_racing_its_original_waits_for_it_even_when_the_queue_looks_empty_after(
    conn, db_dsn
):
    ids = queue_chat_runs(conn, "org-a", "a-1", 2)
    key = uuid.uuid4()
    params = worker_claim("w-1", key=key)
    with claim_connection(db_dsn) as original, claim_connection(db_dsn) as resend:
        original.execute("begin")
        taken = [r[0] for r in original.execute(CLAIM, params).fetchall()]
        assert taken == ids  # not committed yet: the resend's snapshot sees them queued
        resend.execute("set statement_timeout = '20s'")
        with resend.cursor() as cur:
            cur.execute("select pg_backend_pid()")
            resend_pid = cur.fetchone()[0]
        result: dict[str, list] = {}

        def send() -> None:
            result["rows"] = [r[0] for r in resend.execute(CLAIM, params).fetchall()]

        thread = threading.Thread(target=send)
        thread.start()
        wait_until_blocked(conn, resend_pid)  # on the receipt row the original holds
        original.execute("commit")
        thread.join(20)
    assert result["rows"] == ids
