"""A message being sent while its agent changes handler or is erased, with two real
sessions: the message either lands before the change (and moves or blocks with it) or
after it (and sees it), never in between.

- put_agent moving the agent to another handler waits for a message still in flight and
  then moves its run; a message sent while the move is uncommitted waits and carries the
  new handler. Without that, the run keeps a handler the agent no longer has and waits for
  a worker that may never come.
- A message sent while erase_agent is uncommitted waits and is then answered RL008, as
  for any unknown agent (not a foreign-key error naming runlane's tables).
"""

from __future__ import annotations

import threading

import psycopg
import pytest
from worker_helpers import make_agent, wait_until


def _blocked_on_a_lock(conn: psycopg.Connection, pid: int) -> bool:
    return conn.execute(
        "select wait_event_type = 'Lock' from pg_stat_activity where pid = %s", (pid,)
    ).fetchone()[0]


def _in_background(dsn: str, sql: str, args: tuple) -> tuple[threading.Thread, dict, int]:
    """Runs `sql` on its own session in a thread; returns the thread, its outcome and pid."""
    session = psycopg.connect(dsn, autocommit=True)
    pid = session.info.backend_pid
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["row"] = session.execute(sql, args).fetchone()
        except psycopg.Error as exc:
            outcome["sqlstate"] = exc.sqlstate
        finally:
            session.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome, pid


def test_a_handler_move_waits_for_a_message_in_flight_and_moves_its_run(db_dsn, conn):
    make_agent(conn, "agent-h")
    with psycopg.connect(db_dsn) as sender:
        (run_id,) = sender.execute(
            "select run_id from runlane.submit_message('agent-h', 't-1', 'hello')"
        ).fetchone()
        mover, outcome, pid = _in_background(
            db_dsn, "select handler from runlane.put_agent('agent-h', %s)", ('{"handler": "code"}',)
        )
        wait_until(lambda: _blocked_on_a_lock(conn, pid), what="the move waiting for the message")
        sender.commit()
    mover.join(timeout=30)
    assert outcome == {"row": ("code",)}
    assert conn.execute(
        "select handler from runlane.runs where run_id = %s", (run_id,)
    ).fetchone() == ("code",)


def test_a_message_sent_during_a_handler_move_carries_the_new_handler(db_dsn, conn):
    make_agent(conn, "agent-h")
    with psycopg.connect(db_dsn) as mover:
        mover.execute("select runlane.put_agent('agent-h', '{\"handler\": \"code\"}')")
        sender, outcome, pid = _in_background(
            db_dsn,
            "select run_id from runlane.submit_message('agent-h', 't-2', 'hello')",
            (),
        )
        wait_until(lambda: _blocked_on_a_lock(conn, pid), what="the message waiting for the move")
        mover.commit()
    sender.join(timeout=30)
    (run_id,) = outcome["row"]
    assert conn.execute(
        "select handler from runlane.runs where run_id = %s", (run_id,)
    ).fetchone() == ("code",)


@pytest.mark.parametrize("thread", ["a-thread-it-had", "a-new-thread"])
def test_a_message_sent_during_an_erasure_is_answered_as_for_an_unknown_agent(db_dsn, conn, thread):
    make_agent(conn, "agent-e")
    conn.execute("select runlane.submit_message('agent-e', 'a-thread-it-had', 'hello')")
    conn.execute("update runlane.runs set state = 'canceled', finished_at = now()")
    with psycopg.connect(db_dsn) as eraser:
        assert eraser.execute("select runlane.erase_agent('agent-e')").fetchone() == (1,)
        sender, outcome, pid = _in_background(
            db_dsn, "select * from runlane.submit_message('agent-e', %s, 'hello')", (thread,)
        )
        wait_until(lambda: _blocked_on_a_lock(conn, pid), what="the message waiting")
        eraser.commit()
    sender.join(timeout=30)
    assert outcome == {"sqlstate": "RL008"}
    assert conn.execute(
        "select count(*) from runlane.messages where agent_id = 'agent-e'"
    ).fetchone() == (0,)
