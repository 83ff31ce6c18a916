"""Nobody outside runlane can hold what runlane waits for.

Advisory locks on well-known keys could be taken by any login: a thread's submit_message
would wait for ever, run_now and tick would hang on the agent, and no worker would lead
maintenance. So the thread and agent locks and the maintenance leadership are rows in the
runlane schema (from migration 0005), which a login without a runlane grant cannot even
name; and every runlane function that can wait on a lock gives up after its
lock_timeout with 55P03 instead of hanging."""

from __future__ import annotations

import asyncio
import threading
import uuid

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from runlane.maintenance import one_pass
from runlane.migrate import MIGRATION_LOCK, MigrationError, migrate
from runlane.worker import is_resendable

OLD_MAINTENANCE_KEY = 7_317_002  # the leader's advisory key before 0005


@pytest.fixture
def outsider_dsn(conn, db_dsn):
    """A login with no runlane grant at all (it may connect, as PUBLIC may)."""
    role = f"outsider_{uuid.uuid4().hex[:8]}"
    conn.execute(f'create role "{role}" login')
    yield make_conninfo(db_dsn, user=role)
    conn.execute(
        "select pg_terminate_backend(pid) from pg_stat_activity where usename = %s", (role,)
    )
    conn.execute(f'drop role "{role}"')


def test_squatting_the_old_advisory_keys_blocks_no_runlane_call(conn, db_dsn, outsider_dsn):
    conn.execute("select runlane_test.agent('agent-s')")
    conn.execute("select runlane_test.scheduled_agent('agent-k', 'daily at 09:00')")
    conn.execute("select runlane_test.due('agent-k', now() - interval '1 minute')")
    conn.execute("select runlane_test.agent('agent-r', 'org-a', 'computer-r')")
    reaped = conn.execute("select runlane_test.queued_run('agent-r')").fetchone()[0]
    conn.execute("select runlane_test.claimed_on_computer(%s)", (reaped,))
    conn.execute("select runlane_test.lease_expired(%s)", (reaped,))
    with psycopg.connect(outsider_dsn, autocommit=True) as squatter:
        for key in (
            "runlane.thread:agent-s/thread-1",
            "runlane.agent:agent-s",
            "runlane.agent:agent-k",
        ):
            squatter.execute("select pg_advisory_lock(hashtextextended(%s, 0))", (key,))
        squatter.execute("select pg_advisory_lock(%s)", (OLD_MAINTENANCE_KEY,))

        # A hang would be a failure (57014), not a test that never ends.
        conn.execute("set statement_timeout = '20s'")
        _m, run_id, disposition = conn.execute(
            "select * from runlane.submit_message('agent-s', 'thread-1', 'hello')"
        ).fetchone()
        assert disposition == "created"
        row = conn.execute("select state, lane from runlane.run_now('agent-s')").fetchone()
        assert row == ("queued", "background")
        events = [e for (e,) in conn.execute("select event from runlane.tick()")]
        assert events == ["routine.fired"]
        # runlane tick (one pass) leads although the old leader key is held.
        assert asyncio.run(one_pass(db_dsn)) is True
        state = conn.execute(
            "select state from runlane.runs where run_id = %s", (reaped,)
        ).fetchone()[0]
        assert state != "running", "the expired run was reaped"


OUTSIDER_ATTEMPTS = [
    "select * from runlane.threads for update",
    "select * from runlane.agents for no key update",
    "select * from runlane.leader for update",
    "lock table runlane.leader in exclusive mode",
    "insert into runlane.leader values ('maintenance', 'me', now(), now(), 'infinity')",
    "select runlane._thread_lock('agent-s', 'thread-1')",
    "select runlane._lock_thread('agent-s', 'thread-1')",
    "select runlane._lock_agent('agent-s')",
    "select runlane.lead_maintenance('squatter', interval '1 hour')",
    "select runlane.resign_maintenance('anyone')",
]


@pytest.mark.parametrize("sql", OUTSIDER_ATTEMPTS)
def test_a_login_without_a_runlane_grant_cannot_lock_or_take_runlane_rows(conn, outsider_dsn, sql):
    conn.execute("select runlane_test.agent('agent-s')")
    with psycopg.connect(outsider_dsn) as outsider, pytest.raises(psycopg.Error) as info:
        outsider.execute(sql)  # in a transaction, as lock table needs
    assert info.value.sqlstate == "42501"  # permission denied


def test_a_squatted_migration_lock_fails_naming_the_holder(conn, outsider_dsn):
    with psycopg.connect(outsider_dsn, autocommit=True) as squatter:
        squatter.execute("select pg_advisory_lock(%s)", (MIGRATION_LOCK,))
        with pytest.raises(MigrationError) as info:
            migrate(conn, lock_timeout=0.2)
        assert f"pid {squatter.info.backend_pid}" in str(info.value)
        assert "pg_terminate_backend" in str(info.value)
    # Once the squatter is gone, migrating works (and changes nothing).
    assert migrate(conn, lock_timeout=5) == []


def _waits(db_dsn: str, sql: str, params: tuple, results: dict, name: str) -> None:
    with psycopg.connect(db_dsn, autocommit=True) as mine:
        # The session itself would wait for ever; a function that hangs ends as 57014.
        mine.execute("set lock_timeout = 0")
        mine.execute("set statement_timeout = '30s'")
        try:
            mine.execute(sql, params)
            results[name] = None
        except psycopg.Error as exc:
            results[name] = exc


def test_a_call_waiting_on_a_lock_held_by_another_runlane_transaction_fails_with_55p03(
    conn, db_dsn
):
    conn.execute("select runlane_test.agent('agent-t')")
    conn.execute("select runlane_test.agent('agent-u')")
    run_id = conn.execute(
        "select run_id from runlane.submit_message('agent-u', 'thread-9', 'x')"
    ).fetchone()[0]
    conn.execute("select runlane.lead_maintenance('holder', interval '1 minute')")
    # worker w-victim's receipt row for its chat lane (its first claim of a run creates it)
    victim_claim = (
        "select * from runlane.claim_runs('w-victim', array['interactive'], 10, "
        "interval '60 seconds', gen_random_uuid(), true)",
        (),
    )
    claimed = conn.execute(*victim_claim).fetchall()
    assert [row[0] for row in claimed] == [run_id]
    fence = claimed[0][1]
    # a claim that finds no run locks nothing: the holder's claim below takes this one
    conn.execute("select runlane.submit_message('agent-u', 'thread-10', 'y')")

    holds: list[tuple[str, tuple]] = [
        # any worker login may claim under another worker's name (workers act for every
        # organization): a claim left open holds that worker's receipt row (first: the
        # thread's queued run below would be claimed in the same transaction; it takes
        # thread-10's run, which the waiting claim still sees queued)
        victim_claim,
        # an application transaction left open after submit_message holds the thread
        ("select * from runlane.submit_message('agent-t', 'thread-1', 'a')", ()),
        # ... after run_now, the agent
        ("select * from runlane.run_now('agent-t')", ()),
        # a worker's write in flight holds its run
        ("select runlane.heartbeat(%s, %s)", (run_id, fence)),
        # a leader renewing its lease holds the lease row
        ("select runlane.lead_maintenance('holder', interval '1 minute')", ()),
    ]
    waiters: dict[str, tuple[str, tuple]] = {
        "submit_message (thread)": (
            "select * from runlane.submit_message('agent-t', 'thread-1', 'b')",
            (),
        ),
        "create_run (agent)": (
            "select * from runlane.create_run('agent-t', 'manual', 'p', null)",
            (),
        ),
        "finish_run (run row)": ("select runlane.finish_run(%s, %s, 'succeeded')", (run_id, fence)),
        "lead_maintenance (lease row)": (
            "select runlane.lead_maintenance('holder', interval '1 minute')",
            (),
        ),
        "claim_runs (the worker's receipt row)": victim_claim,
    }
    results: dict[str, psycopg.Error | None] = {}
    with psycopg.connect(db_dsn) as holder:  # one open transaction holds all four
        for sql, params in holds:
            holder.execute(sql, params)
        threads = [
            threading.Thread(target=_waits, args=(db_dsn, sql, params, results, name))
            for name, (sql, params) in waiters.items()
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        holder.rollback()

    assert {name: getattr(exc, "sqlstate", exc) for name, exc in results.items()} == {
        name: "55P03" for name in waiters
    }
    # The held-up worker's lane tries its pass again (0.5 s later); once the holder is
    # gone its claim goes through (and takes the run the holder's claim gave back).
    assert [row[5] for row in conn.execute(*victim_claim).fetchall()] == ["agent-u"]
    for name in ("submit_message (thread)", "create_run (agent)"):
        diag = results[name].diag
        assert "lock_timeout" in diag.message_primary
        assert "retry" in diag.message_hint
    # Nothing was written, so a worker resends such a write (within half a lease) rather
    # than give up its run.
    assert is_resendable(results["finish_run (run row)"])


def test_nothing_is_written_by_a_call_that_timed_out(conn, db_dsn):
    conn.execute("select runlane_test.agent('agent-t')")
    results: dict[str, psycopg.Error | None] = {}
    with psycopg.connect(db_dsn) as holder:
        holder.execute("select * from runlane.submit_message('agent-t', 'thread-1', 'a')")
        _waits(
            db_dsn,
            "select * from runlane.submit_message('agent-t', 'thread-1', 'b')",
            (),
            results,
            "second",
        )
        holder.commit()
    assert results["second"].sqlstate == "55P03"
    bodies = [
        b
        for (b,) in conn.execute(
            "select body from runlane.messages where thread_id = 'thread-1' order by message_id"
        )
    ]
    assert bodies == ["a"]


def test_every_public_function_that_may_wait_for_a_lock_bounds_the_wait(conn):
    """Every volatile function the api or worker role may call sets lock_timeout = 5s
    itself (stable ones take no row locks)."""
    rows = conn.execute("""
        select p.oid::regprocedure::text, coalesce(p.proconfig, '{}')
        from pg_proc as p
        where p.pronamespace = 'runlane'::regnamespace and p.provolatile = 'v'
          and (has_function_privilege('runlane_api', p.oid, 'execute')
               or has_function_privilege('runlane_worker', p.oid, 'execute'))
    """).fetchall()
    assert len(rows) > 15
    assert [sig for sig, config in rows if "lock_timeout=5s" not in config] == []
