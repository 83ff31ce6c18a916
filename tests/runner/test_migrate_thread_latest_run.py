"""0026: a thread's row names its newest chat run. Threads written before it record
nothing and are searched once; a chat run whose thread has no row at all (older than
the thread rows) gets one, so a message still joins that run instead of starting a
second one."""

from __future__ import annotations

from pathlib import Path

import psycopg

from runlane.migrate import migrate

FIXTURES = Path(__file__).parent.parent / "sql" / "fixtures"


def load_test_fixtures(conn: psycopg.Connection) -> None:
    conn.execute("create extension if not exists pgtap schema public")
    conn.execute("create schema if not exists runlane_test")
    for path in sorted(FIXTURES.glob("*.sql")):
        conn.execute(path.read_text())


def latest(conn: psycopg.Connection, thread: str) -> tuple | None:
    return conn.execute(
        "select latest_run_id from runlane.threads where agent_id = 'agent-a' and thread_id = %s",
        (thread,),
    ).fetchone()


def test_chat_runs_from_before_0026_are_found_after_it(empty_db_dsn):
    with psycopg.connect(empty_db_dsn, autocommit=True) as conn:
        migrate(conn, to=25)
        load_test_fixtures(conn)
        conn.execute("select runlane_test.agent('agent-a')")
        submit = "select run_id, disposition from runlane.submit_message('agent-a', %s, 'hi')"
        recorded = conn.execute(submit, ("thread-recorded",)).fetchone()[0]
        rowless = conn.execute(submit, ("thread-rowless",)).fetchone()[0]
        # Before 0026 nothing is recorded: the thread's run is searched, and found.
        assert conn.execute(submit, ("thread-recorded",)).fetchone() == (recorded, "steering")
        # A thread older than its lock row: its run is queued, its row is not there.
        conn.execute("delete from runlane.threads where thread_id = 'thread-rowless'")

        migrate(conn)

        assert latest(conn, "thread-recorded") == (None,)
        assert latest(conn, "thread-rowless") == (None,)
        assert conn.execute(submit, ("thread-recorded",)).fetchone() == (recorded, "steering")
        assert conn.execute(submit, ("thread-rowless",)).fetchone() == (rowless, "steering")
        assert latest(conn, "thread-recorded") == (recorded,)
        assert latest(conn, "thread-rowless") == (rowless,)
        # A new thread starts at 0 and records the run its first message creates.
        created = conn.execute(submit, ("thread-new",)).fetchone()
        assert created[1] == "created"
        assert latest(conn, "thread-new") == (created[0],)
