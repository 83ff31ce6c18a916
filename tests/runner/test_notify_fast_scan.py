"""Notifications are hints; while they cannot be counted on, the scan finds the work.

Any login that may CONNECT can fill the server's NOTIFY queue (LISTEN in a transaction it
keeps open, pg_notify in a loop), and from half full runlane sends no notification. Half
the real queue is 4 GB and takes minutes to fill, so each test replaces the reading, in
its own database, by a fixed fraction (as test_notify_queue_guard does) and checks with a
real LISTEN connection that nothing is announced:
- a real worker whose scan is an hour reads the queue, logs dispatch.fast_scan_started,
  claims and answers a chat message nobody announced, and logs dispatch.fast_scan_stopped
  once the queue is low again;
- a stream follower (runlane.stream, as a runlane_api login) whose poll is an hour still
  sees the reply and the end of the run;
- runlane.notify_queue_holders() names a real backend of another login with no runlane
  grant that LISTENs inside a transaction it keeps open (pid, login, application name,
  transaction age), and so do the maintenance leader's notify.queue_usage warning and
  the worker's dispatch.fast_scan_started.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import uuid

import httpx
import psycopg
import pytest
import worker_helpers
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row
from worker_helpers import make_agent, run_state, submit, wait_until

import runlane

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after

USAGE = """
create or replace function runlane.notify_queue_usage() returns double precision
language sql stable set search_path = pg_catalog, pg_temp as $$ select {}::float8 $$
"""


@pytest.fixture
def login(conn, db_dsn):
    """make(*roles) -> (name, dsn) of a new login in those roles (none: no runlane grant)."""
    made: list[str] = []

    def make(*roles: str) -> tuple[str, str]:
        name = f"nq_{uuid.uuid4().hex[:10]}"
        conn.execute(f'create role "{name}" login')
        made.append(name)
        for role in roles:
            conn.execute(f'grant "{role}" to "{name}"')
        if "runlane_api" in roles:  # an API login acts only where the database enters it
            conn.execute("select runlane.scope_api_login(%s, null)", (name,))
        return name, make_conninfo(db_dsn, user=name)

    yield make
    for name in made:
        conn.execute(f'drop role "{name}"')


@pytest.fixture
def listener(db_dsn):
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        conn.execute("listen runlane_runs")
        conn.execute("listen runlane_outputs")
        yield conn


def metrics(port: int) -> dict[str, float]:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return {m[1]: float(m[2]) for m in re.finditer(r"^([a-z_]+) (\S+)$", text, re.M)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def announced(listener: psycopg.Connection) -> list[str]:
    return [n.payload for n in listener.notifies(timeout=0.2)]


def test_a_worker_answers_chat_by_its_fast_scan_while_notifications_are_suppressed(
    conn, listener, workers
):
    make_agent(conn, "agent-f")
    conn.execute(USAGE.format("0.5"))  # runlane sends no notification from here on
    port = free_port()
    worker = workers("--scan-interval", "3600", "--no-maintenance", "--metrics-port", str(port))
    started = worker.wait_for("dispatch.fast_scan_started")
    assert started["level"] == "warning"
    assert started["notify.queue_usage"] == 0.5
    assert started["notify.queue_warn"] == 0.25
    assert started["dispatch.reason"] == "notify_queue"
    assert isinstance(started["notify.holders"], list)
    worker.wait_for("dispatch.ready")
    worker.wait_for("listener.listening")
    announced(listener)  # the worker's own LISTEN proof used a private channel

    run_id = submit(conn, "agent-f", "thread-1", "hello")  # published: nothing is sent
    wait_until(lambda: run_state(conn, run_id) == "succeeded", what="the chat run answered")
    assert announced(listener) == []  # neither the publication nor the reply announced
    assert worker.events("dispatch.fast_scan_stopped") == []
    shown = metrics(port)
    assert shown["runlane_dispatch_fast_scan"] == 1
    assert shown["runlane_notify_queue_usage"] == 0.5
    assert shown["runlane_dispatch_scan_only"] == 0

    conn.execute(USAGE.format("0.1"))
    stopped = worker.wait_for("dispatch.fast_scan_stopped")
    assert stopped["notify.queue_usage"] == 0.1
    assert stopped["dispatch.fast_scan_s"] >= 0
    assert len(worker.events("dispatch.fast_scan_started")) == 1
    assert metrics(port)["runlane_dispatch_fast_scan"] == 0


def test_a_warning_level_above_half_still_scans_fast_once_runlane_stops_notifying(conn, workers):
    conn.execute(USAGE.format("0.5"))
    worker = workers("--notify-queue-warn", "0.9", "--no-maintenance")
    started = worker.wait_for("dispatch.fast_scan_started")
    assert started["notify.queue_warn"] == 0.5


def test_a_stream_follower_pages_while_notifications_are_suppressed(
    conn, db_dsn, listener, login, workers
):
    make_agent(conn, "agent-s")
    api_login, api_dsn = login("runlane_api")
    conn.execute(USAGE.format("0.5"))
    run_id = submit(conn, "agent-s", "thread-1", "hello")

    async def follow() -> list[dict]:
        async with asyncio.timeout(worker_helpers.DEADLINE):
            async with contextlib.aclosing(
                runlane.stream(api_dsn, run_id, events=True, poll=3600)
            ) as items:
                return [item async for item in items]

    async def follow_while_it_runs() -> list[dict]:
        reading = asyncio.create_task(follow())
        # The follower has paged (found nothing) before any worker starts.
        await asyncio.to_thread(
            wait_until,
            lambda: conn.execute(
                "select count(*) from pg_stat_activity where usename = %s and state = 'idle' "
                "and query ~ '(outputs_since|notify_queue_usage)'",
                (api_login,),
            ).fetchone()[0],
            what="the follower paged",
        )
        assert run_state(conn, run_id) == "queued"
        workers("--no-maintenance")
        return await reading

    items = asyncio.run(follow_while_it_runs())
    assert [i["event"] for i in items][-1] == "end"
    assert items[-1]["state"] == "succeeded"
    assert any(i["event"] == "output" for i in items)
    assert announced(listener) == []


def test_the_holders_are_named_by_the_function_and_in_the_leaders_warning(
    conn, db_dsn, login, workers
):
    stranger, stranger_dsn = login()  # CONNECT only (PUBLIC's), no runlane grant
    _worker_login, worker_dsn = login("runlane_worker")
    application = "queue-filler"
    with psycopg.connect(stranger_dsn, application_name=application) as filler:
        filler.execute("listen x")  # opens the transaction; LISTEN takes effect at commit
        filler.execute("select 1")
        filler.commit()
        filler.execute("listen y")  # and now a transaction that stays open
        filler.execute("select 1")
        pid = filler.info.backend_pid
        with psycopg.connect(worker_dsn, autocommit=True, row_factory=dict_row) as w:
            rows = wait_until(
                lambda: [
                    r
                    for r in w.execute("select * from runlane.notify_queue_holders(100)").fetchall()
                ],
                what="rows",
            )
        mine = [r for r in rows if r["pid"] == pid]
        assert len(mine) == 1, rows
        held = mine[0]
        assert held["login"] == stranger
        assert held["application"] == application
        assert held["database"] == db_dsn.rsplit("/", 1)[1]
        assert held["state"] == "idle in transaction"
        assert held["xact_started"] is not None and held["xact_age_s"] >= 0
        idle = [
            r["state"] is not None and r["state"].startswith("idle in transaction") for r in rows
        ]
        assert idle == sorted(idle, reverse=True), "idle in transaction listed first"
        assert "query" not in held

        conn.execute(USAGE.format("0.3"))
        leader = workers("--tick-interval", "0.2", "--leader-retry", "0.2", "--leader-ttl", "2")
        warning = leader.wait_for(
            "notify.queue_usage", where=lambda r: any(h["pid"] == pid for h in r["notify.holders"])
        )
        named = next(h for h in warning["notify.holders"] if h["pid"] == pid)
        assert named["login"] == stranger
        assert named["application"] == application
        assert named["state"] == "idle in transaction"
        assert named["xact_age_s"] >= 0
        assert set(named) == {
            "pid",
            "login",
            "application",
            "database",
            "state",
            "wait_event",
            "xact_age_s",
        }
        # The worker names it too, when its lanes start scanning fast.
        started = leader.wait_for("dispatch.fast_scan_started")
        assert [h["login"] for h in started["notify.holders"] if h["pid"] == pid] == [stranger]
        filler.rollback()


def test_the_holders_function_refuses_a_limit_out_of_range(conn):
    for limit in (0, 101, None):
        with pytest.raises(psycopg.Error) as refused:
            conn.execute("select * from runlane.notify_queue_holders(%s::int)", (limit,))
        assert refused.value.sqlstate == "22023"
