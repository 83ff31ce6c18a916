"""runlane.worker.db against a real PostgreSQL: a statement is sent again only when the
server cannot have applied it (a broken connection, a rolled-back transaction), on a
fresh connection, and never after any other error."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from psycopg.pq import Format
from worker_helpers import wait_until

from runlane.agents.echo import agent
from runlane.worker.config import WorkerConfig
from runlane.worker.db import Database, is_resendable, json_from_utf8

# Fails with `state` while the sequence is below `times`, then answers its value: the
# sequence is not transactional, so it counts every attempt the server received.
FAIL_FIRST = """
select case when nextval('attempts') <= %(times)s
            then runlane_test_fail(%(state)s) else currval('attempts') end as n
"""
FAIL_FUNCTION = """
create function runlane_test_fail(p_state text) returns bigint language plpgsql as $$
begin
    raise exception 'fail on purpose' using errcode = p_state;
end $$
"""


def _terminate(conn: psycopg.Connection, pid: int) -> None:
    """Ends backend `pid` and waits until it is gone (so the next statement finds it dead)."""
    conn.execute("select pg_terminate_backend(%s)", (pid,))
    wait_until(
        lambda: (
            not conn.execute(
                "select exists (select 1 from pg_stat_activity where pid = %s)", (pid,)
            ).fetchone()[0]
        ),
        what=f"backend {pid} gone",
    )


def _database(dsn: str, **options) -> Database:
    return Database(
        WorkerConfig(
            dsn=dsn, lanes=["interactive"], agent=agent, pool_size=1, maintenance=None, **options
        )
    )


@pytest.fixture
def attempts(conn):
    conn.execute("create sequence attempts")
    conn.execute(FAIL_FUNCTION)
    return conn


def test_a_statement_whose_backend_was_terminated_is_sent_again_on_a_fresh_connection(db_dsn, conn):
    async def scenario() -> tuple[int, int]:
        db = _database(db_dsn)
        await db.open()
        try:
            first = (await db.call("interactive", "select pg_backend_pid() as pid"))["pid"]
            _terminate(conn, first)
            second = (await db.call("interactive", "select pg_backend_pid() as pid"))["pid"]
            return first, second
        finally:
            await db.close()

    first, second = asyncio.run(scenario())
    assert second != first


def test_without_retries_a_broken_connection_is_raised_to_the_caller(db_dsn, conn):
    async def scenario() -> None:
        db = _database(db_dsn)
        await db.open()
        try:
            pid = (await db.call("interactive", "select pg_backend_pid() as pid"))["pid"]
            _terminate(conn, pid)
            with pytest.raises(psycopg.OperationalError) as raised:
                await db.call("interactive", "select 1", retries=0)
            assert is_resendable(raised.value)
        finally:
            await db.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("state", ["40001", "40P01", "55P03"])
def test_a_transaction_rolled_back_by_a_conflict_is_sent_again(db_dsn, attempts, state):
    async def scenario() -> int:
        db = _database(db_dsn)
        await db.open()
        try:
            row = await db.call("interactive", FAIL_FIRST, {"times": 2, "state": state})
            return row["n"]
        finally:
            await db.close()

    assert asyncio.run(scenario()) == 3  # two rolled back, the third applied


def test_any_other_error_is_raised_at_once_and_never_resent(db_dsn, attempts):
    async def scenario() -> None:
        db = _database(db_dsn)
        await db.open()
        try:
            with pytest.raises(psycopg.Error) as raised:
                await db.call("interactive", FAIL_FIRST, {"times": 5, "state": "RL001"})
            assert raised.value.sqlstate == "RL001"
        finally:
            await db.close()

    asyncio.run(scenario())
    assert attempts.execute("select last_value from attempts").fetchone()[0] == 1


def test_the_schema_check_finds_numbered_writes_in_a_migrated_database(db_dsn):
    async def scenario() -> tuple[bool, bool]:
        db = _database(db_dsn)
        before = db.write_seqs
        await db.open()
        try:
            await db.check_write_seqs()
            return before, db.write_seqs
        finally:
            await db.close()

    assert asyncio.run(scenario()) == (False, True)


def test_worker_connections_decode_json_as_json_loads_does(db_dsn):
    """The worker's own json decoder (db.json_from_utf8, on its pools' connections) gives
    what psycopg's default (json.loads) gives, for every kind of value and escape."""
    query = """select x::jsonb as b, x::json as j from unnest(array[
        '{"run.id": 9007199254740993, "run.total_ms": -12, "x": 1.5e300, "n": null}',
        '{"é": "漢字\\n\\t\\"\\\\", "esc": "\\u00e9\\ud83d\\ude00",
          "nested": [{"a": [true, false]}]}',
        '[]', '"just text"', '0.1']) as x"""

    async def scenario() -> list[tuple]:
        config = WorkerConfig(dsn=db_dsn, lanes=["interactive"], agent=agent)
        database = Database(config)
        await database.open()
        try:
            async with database.pools["interactive"].connection() as conn:
                jsonb = conn.adapters.types["jsonb"].oid
                assert conn.adapters.get_loader(jsonb, Format.TEXT)._loads is json_from_utf8
            return await database.call("interactive", query, fetch="all")
        finally:
            await database.close()

    ours = asyncio.run(scenario())
    with psycopg.connect(db_dsn) as plain:
        theirs = plain.execute(query).fetchall()
    assert [(r["b"], r["j"]) for r in ours] == [tuple(r) for r in theirs]
    assert ours[1]["b"]["esc"] == ours[1]["j"]["esc"] == "é😀"
    assert ours[0]["j"]["run.id"] == 9007199254740993  # an int, not a float


def test_a_busy_lane_serves_another_organization_before_the_backlog_of_one(db_dsn, conn):
    """One connection, held by a statement of org-a; six more of org-a queue, then one of
    org-b: org-b's goes right after org-a's next, not after its whole backlog."""
    conn.execute("create sequence served")
    conn.execute("select pg_advisory_lock(4242)")

    async def scenario() -> dict[str, int]:
        db = _database(db_dsn)
        await db.open()
        order: dict[str, int] = {}

        async def serve(label: str, org: str) -> None:
            row = await db.call("interactive", "select nextval('served') as n", orgs=(org,))
            order[label] = row["n"]

        try:
            blocker = asyncio.create_task(
                db.call("interactive", "select pg_advisory_xact_lock(4242)", orgs=("org-a",))
            )
            await asyncio.to_thread(
                wait_until,
                lambda: (
                    conn.execute(
                        "select count(*) from pg_locks where locktype = 'advisory' and not granted"
                    ).fetchone()[0]
                    == 1
                ),
                what="the blocker waiting",
            )
            tasks = []
            for label, org in [*[(f"a{i}", "org-a") for i in range(6)], ("b", "org-b")]:
                tasks.append(asyncio.create_task(serve(label, org)))
                for _ in range(5):  # each queues before the next is created
                    await asyncio.sleep(0)
            conn.execute("select pg_advisory_unlock(4242)")
            await asyncio.wait_for(asyncio.gather(blocker, *tasks), 60)
            return order
        finally:
            await db.close()

    order = asyncio.run(scenario())
    assert order["a0"] == 1
    assert order["b"] == 2, order
    assert [order[f"a{i}"] for i in range(1, 6)] == [3, 4, 5, 6, 7]


def test_a_statement_waiting_to_be_resent_holds_no_turn(db_dsn, attempts):
    """One connection: a statement rolled back as a conflict until another organization's
    statement has run. That one gets the connection during the first's backoff, so the
    first is applied on a resend (a turn held through the backoff would let it fail
    until its deadline)."""
    attempts.execute("create table marker (n int)")
    wait_for_marker = """
    select case when nextval('attempts') > 0 and not exists (select 1 from marker)
                then runlane_test_fail('40001') else 1 end as n
    """

    async def scenario() -> int:
        db = _database(db_dsn, lease=10.0)  # resends for up to 5 s
        await db.open()
        try:
            first = asyncio.create_task(db.call("interactive", wait_for_marker, orgs=("org-a",)))
            await asyncio.to_thread(
                wait_until,
                lambda: attempts.execute("select is_called from attempts").fetchone()[0],
                what="the first statement sent",
            )
            await db.call(
                "interactive", "insert into marker values (1)", fetch="none", orgs=("org-b",)
            )
            return (await asyncio.wait_for(first, 60))["n"]
        finally:
            await db.close()

    assert asyncio.run(scenario()) == 1
