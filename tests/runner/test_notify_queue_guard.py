"""No runlane write waits on, or fails for, the server's NOTIFY queue.

A full queue (8 GB in PostgreSQL 15) fails every COMMIT that queued a notification with
54000. runlane queues none once runlane.notify_queue_usage() reaches 0.5 (the guard in
runlane._notify, the only caller of pg_notify). Filling half the real queue takes 4 GB and
minutes, so each test replaces the reading, in its own database, by a fixed fraction and
watches a real LISTEN connection: at 0.4999 every notifying write announces what it did,
at 0.5 the same write commits and announces nothing. Every function that notifies is
exercised: publish_run, release_run, retry_run, reap_stale, finish_run waking a computer
waiter and handing held messages on, a finish_runs batch, append_output."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from runlane.worker import FINISH_RUNS, pg_array

SQL = Path(__file__).parent.parent.parent / "sql"

USAGE = """
create or replace function runlane.notify_queue_usage() returns double precision
language sql stable set search_path = pg_catalog, pg_temp as $$ select {}::float8 $$
"""


@pytest.fixture
def listener(db_dsn):
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("listen runlane_runs")
        conn.execute("listen runlane_outputs")
        yield conn


def drain(listener: psycopg.Connection) -> list[tuple[str, dict]]:
    return [(n.channel, json.loads(n.payload)) for n in listener.notifies(timeout=0.3)]


def one(conn, sql: str, *params):
    return conn.execute(sql, params).fetchone()[0]


def chat(conn, agent: str, thread: str) -> int:
    return one(conn, "select run_id from runlane.submit_message(%s, %s, 'hi')", agent, thread)


def publish(conn) -> tuple[Callable[[], None], list]:
    run_id = chat(conn, "agent-n", "t1")
    return (
        lambda: conn.execute("select runlane.publish_run(%s)", (run_id,)),
        [("runlane_runs", {"run_id": run_id, "lane": "interactive"})],
    )


def release(conn):
    run_id = chat(conn, "agent-n", "t1")
    fence = one(conn, "select runlane_test.claimed(%s)", run_id)
    return (
        lambda: conn.execute("select runlane.release_run(%s, %s)", (run_id, fence)),
        [("runlane_runs", {"run_id": run_id, "lane": "interactive"})],
    )


def retry(conn):
    run_id = chat(conn, "agent-n", "t1")
    fence = one(conn, "select runlane_test.claimed(%s)", run_id)
    return (
        lambda: conn.execute(
            "select runlane.retry_run(%s, %s, 'oops', interval '0')", (run_id, fence)
        ),
        [("runlane_runs", {"run_id": run_id, "lane": "interactive"})],
    )


def reap(conn):
    run_id = chat(conn, "agent-n", "t1")
    conn.execute("select runlane_test.claimed(%s)", (run_id,))
    conn.execute("select runlane_test.lease_expired(%s)", (run_id,))
    return (
        lambda: conn.execute("select * from runlane.reap_stale()"),
        [("runlane_runs", {"run_id": run_id, "lane": "interactive"})],
    )


def finish_waking_computer_waiter(conn):
    first = chat(conn, "agent-c", "t1")
    waiter = chat(conn, "agent-c", "t2")  # same agent, so same computer
    fence = one(conn, "select runlane_test.claimed_on_computer(%s)", first)
    return (
        lambda: conn.execute("select runlane.finish_run(%s, %s, 'succeeded')", (first, fence)),
        [("runlane_runs", {"run_id": waiter, "lane": "interactive"})],
    )


def held_messages(conn) -> tuple[int, int, int]:
    run_id = chat(conn, "agent-n", "t1")
    fence = one(conn, "select runlane_test.claimed(%s)", run_id)
    held = one(conn, "select message_id from runlane.submit_message('agent-n', 't1', 'more')")
    return run_id, fence, held


def follow_up(conn, held: int) -> list:
    run_id = one(conn, "select run_id from runlane.runs where source_message_id = %s", held)
    return [("runlane_runs", {"run_id": run_id, "lane": "interactive"})]


class Expect:
    """Expected notifications computed after the action (a follow-up run's id)."""

    def __init__(self, fn):
        self.fn = fn


def finish_handing_held_messages_on(conn):
    run_id, fence, held = held_messages(conn)

    def expected():
        token = one(conn, "select runlane.stream_token(%s)", run_id)
        return [("runlane_outputs", {"stream": token, "end": True}), *follow_up(conn, held)]

    return (
        lambda: conn.execute("select runlane.finish_run(%s, %s, 'succeeded')", (run_id, fence)),
        Expect(expected),
    )


def finish_runs_batch(conn):
    run_id, fence, held = held_messages(conn)
    params = {
        "run_ids": [run_id],
        "fences": [fence],
        "outcomes": ["succeeded"],
        "errors": [None],
        "costs": [0],
        "counts": [1],
        "kinds": ["text"],
        "bodies": ["reply"],
        "seqs": [None],
    }

    def act():
        rows = conn.execute(FINISH_RUNS, {k: pg_array(v) for k, v in params.items()}).fetchall()
        assert [r[1] for r in rows] == [True]

    def expected():
        token = one(conn, "select runlane.stream_token(%s)", run_id)
        return [
            ("runlane_outputs", {"stream": token}),
            ("runlane_outputs", {"stream": token, "end": True}),  # a batch's ends: array form
            *follow_up(conn, held),
        ]

    return act, Expect(expected)


def append_output(conn):
    run_id = chat(conn, "agent-n", "t1")
    fence = one(conn, "select runlane_test.claimed(%s)", run_id)

    def expected():
        token = one(conn, "select runlane.stream_token(%s)", run_id)
        return [("runlane_outputs", {"stream": token})]

    return (
        lambda: conn.execute("select runlane.append_output(%s, %s, 'text', 'x')", (run_id, fence)),
        Expect(expected),
    )


def append_outputs_batch(conn):
    runs = [chat(conn, "agent-n", thread) for thread in ("t1", "t2")]
    fences = [one(conn, "select runlane_test.claimed(%s)", run_id) for run_id in runs]

    def act():
        rows = conn.execute(
            "select outcome from runlane.append_outputs("
            "%s::bigint[], %s::bigint[], %s::bigint[], %s::text[], %s::text[])",
            (runs + runs, fences + fences, [1, 1, 2, 2], ["text"] * 4, ["a", "b", "c", "d"]),
        ).fetchall()
        assert rows == [("applied",), ("applied",)]

    def expected():
        # one per run, however many outputs it got
        return [
            ("runlane_outputs", {"stream": one(conn, "select runlane.stream_token(%s)", r)})
            for r in runs
        ]

    return act, Expect(expected)


SCENARIOS = [
    publish,
    release,
    retry,
    reap,
    finish_waking_computer_waiter,
    finish_handing_held_messages_on,
    finish_runs_batch,
    append_output,
    append_outputs_batch,
]


def prepare(conn, listener, usage: str, scenario):
    conn.execute("select runlane_test.agent('agent-n')")
    conn.execute("select runlane_test.agent('agent-c', 'org-a', 'computer-c')")
    conn.execute(USAGE.format(usage))
    act, expected = scenario(conn)
    drain(listener)
    return act, expected


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_under_half_full_every_notifying_write_announces(conn, listener, scenario):
    act, expected = prepare(conn, listener, "0.4999", scenario)
    act()
    want = expected.fn() if isinstance(expected, Expect) else expected
    got = drain(listener)
    assert all(note in got for note in want), (want, got)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_from_half_full_every_notifying_write_commits_and_announces_nothing(
    conn, listener, scenario
):
    act, expected = prepare(conn, listener, "0.5", scenario)
    act()  # committed (autocommit): the write stands
    want = expected.fn() if isinstance(expected, Expect) else expected
    assert want, "the write did what it announces at 0.4999"
    assert drain(listener) == []


def test_runlane_calls_pg_notify_only_through_the_guard(conn):
    """In the catalog (functions of every migration and function file, triggers
    included) and in the sources: only runlane._notify (both forms) calls pg_notify."""
    callers = [
        name
        for (name,) in conn.execute(
            "select p.oid::regprocedure::text from pg_proc as p "
            "where p.pronamespace = 'runlane'::regnamespace and p.prosrc ilike '%%pg_notify%%' "
            "order by 1"
        )
    ]
    assert callers == ["runlane._notify(text,text)", "runlane._notify(text,text[])"]
    files = sorted(
        str(p.relative_to(SQL)) for p in SQL.rglob("*.sql") if "pg_notify(" in p.read_text()
    )
    assert files == ["functions/notify/_notify.sql"]


def test_the_guard_reads_the_real_queue(conn):
    """Unreplaced, the reading is the server's own (nothing queued here: 0)."""
    assert one(conn, "select runlane.notify_queue_usage()") == one(
        conn, "select pg_notification_queue_usage()"
    )
