"""runlane.worker.listener against a real PostgreSQL: a notification on runlane_runs
marks its lane for one more pass, a Stop hint is handed on, a forged payload is ignored
without holding up the next, and every (re)connect wakes every lane."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from worker_helpers import wait_until

from runlane.worker.listener import CHANNEL, Listener

APP = "runlane-test-listener"


def _listening(conn: psycopg.Connection) -> int | None:
    row = conn.execute(
        "select pid from pg_stat_activity where application_name = %s and query like 'listen%%'",
        (APP,),
    ).fetchone()
    return row[0] if row else None


def _listen_while(db_dsn: str, conn: psycopg.Connection, act) -> list[tuple[str, Any]]:
    """Runs a Listener while `act(heard)` (a plain function, on a thread) sends and waits;
    returns what it handed on, in order: ("lane", name or None) and ("stop", run id)."""
    heard: list[tuple[str, Any]] = []

    async def scenario() -> None:
        listener = Listener(
            db_dsn,
            {"autocommit": True, "application_name": APP},
            "w-test",
            lambda lane: heard.append(("lane", lane)),
            lambda run_id: heard.append(("stop", run_id)),
        )
        task = asyncio.create_task(listener.run())
        try:
            await asyncio.to_thread(act, heard)
        finally:
            listener.stop()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())
    return heard


def _send(conn: psycopg.Connection, payload: str) -> None:
    conn.execute("select pg_notify(%s, %s)", (CHANNEL, payload))


def test_a_notification_marks_its_lane_and_a_stop_hint_names_its_run(db_dsn, conn):
    def act(heard: list) -> None:
        wait_until(lambda: _listening(conn), what="the listener's LISTEN")
        _send(conn, '{"lane": "background"}')
        _send(conn, '{"cancel": 42, "lane": "interactive"}')
        wait_until(lambda: len(heard) >= 4, what="both hints handed on")

    heard = _listen_while(db_dsn, conn, act)
    assert heard == [
        ("lane", None),  # connected: every lane scans what was missed
        ("lane", "background"),
        ("lane", "interactive"),
        ("stop", 42),
    ]


def test_a_forged_payload_is_ignored_and_the_next_one_still_arrives(db_dsn, conn):
    def act(heard: list) -> None:
        wait_until(lambda: _listening(conn), what="the listener's LISTEN")
        for forged in (
            "not json",
            '{"lane": ["interactive"]}',
            '{"lane": "nope"}',
            '{"cancel": 1e400, "lane": "interactive"}',
            "x" * 2000,
        ):
            _send(conn, forged)
        _send(conn, '{"lane": "interactive"}')
        wait_until(lambda: len(heard) >= 3, what="the readable hints")

    heard = _listen_while(db_dsn, conn, act)
    # The forged Stop names a readable lane (a scan costs nothing) but no run.
    assert heard == [("lane", None), ("lane", "interactive"), ("lane", "interactive")]


def test_after_its_connection_is_lost_it_listens_again_and_wakes_every_lane(db_dsn, conn):
    def act(heard: list) -> None:
        first = wait_until(lambda: _listening(conn), what="the listener's LISTEN")
        conn.execute("select pg_terminate_backend(%s)", (first,))
        wait_until(lambda: (_listening(conn) or first) != first, what="a new LISTEN")
        wait_until(lambda: len(heard) >= 2, what="the wake-up after the reconnect")
        _send(conn, '{"lane": "interactive"}')
        wait_until(lambda: len(heard) >= 3, what="a hint on the new connection")

    heard = _listen_while(db_dsn, conn, act)
    assert heard == [("lane", None), ("lane", None), ("lane", "interactive")]
