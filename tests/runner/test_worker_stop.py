"""Stop (`runlane.cancel_run`) with real worker processes.

A chat run streaming outputs on a computer is stopped from a login that is only in
runlane_api: the worker hears the Stop hint on runlane_runs, confirms it with the
database and stops the agent (its lease is 300 s long, so no heartbeat is due: only the
notification can have done it); the run ends canceled with its run.finished row, no
output is written after the request, its computer goes to the background run waiting for
it, a stream of the run ends; the background run is stopped in turn, and the next message
of the thread, waiting for the computer, is answered normally.
With every notification suppressed by the NOTIFY-queue guard (runlane._notify), the run's
next heartbeat stops it instead. A forged Stop hint stops nothing.
"""

from __future__ import annotations

import asyncio
import json
import uuid

import psycopg
import pytest
import worker_helpers
from psycopg.conninfo import make_conninfo
from worker_helpers import background_run, make_agent, run_state, submit, wait_until

import runlane
import runlane.hints

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after

VISIBLE = """
select coalesce(max(output_id), 0), count(*) from runlane.run_outputs
where run_id = %s and kind in ('text', 'final', 'message_tool', 'card')
"""
SUPPRESS_NOTIFY = """
create or replace function runlane.notify_queue_usage() returns double precision
language sql stable set search_path = pg_catalog, pg_temp as $$ select 0.5::float8 $$
"""


@pytest.fixture
def api_dsn(conn, db_dsn):
    """A login that is only in runlane_api."""
    name = f"stop_{uuid.uuid4().hex[:10]}"
    conn.execute(f'create role "{name}" login in role runlane_api')
    conn.execute("select runlane.scope_api_login(%s, null)", (name,))
    yield make_conninfo(db_dsn, user=name)
    conn.execute(f'drop role "{name}"')


def streaming_agent(conn: psycopg.Connection, agent_id: str, computer: str | None) -> str:
    make_agent(conn, agent_id)
    conn.execute(
        "update runlane.agents set computer_id = %s where agent_id = %s", (computer, agent_id)
    )
    conn.execute(
        "update runlane.platform_settings set agent_iteration_cap = 100000 where org_id = 'org-w'"
    )
    return agent_id


def outputs(conn: psycopg.Connection, run_id: int) -> tuple[int, int]:
    """(newest visible output id, number of visible outputs) of a run."""
    return conn.execute(VISIBLE, (run_id,)).fetchone()


def stop(api_dsn: str, run_id: int) -> tuple[str, int]:
    with psycopg.connect(api_dsn, autocommit=True) as api:
        state = api.execute("select runlane.cancel_run(%s)", (run_id,)).fetchone()[0]
        # Every output committed before the Stop is visible now, and none can follow.
        last = api.execute(
            "select last_output_id from runlane.run_status(%s)", (run_id,)
        ).fetchone()[0]
    return state, last


def stop_latency_ms(conn: psycopg.Connection, run_id: int) -> float:
    return conn.execute(
        """
        select extract(epoch from f.created_at - c.created_at) * 1000
        from runlane.run_events as c, runlane.run_events as f
        where c.run_id = %(r)s and c.event = 'run.cancel_requested'
          and f.run_id = %(r)s and f.event = 'run.finished'
    """,
        {"r": run_id},
    ).fetchone()[0]


def assert_stopped(conn: psycopg.Connection, run_id: int, last: int) -> None:
    assert outputs(conn, run_id)[0] == last, "an output was written after the Stop"
    assert conn.execute(
        "select state, reason from runlane.runs where run_id = %s", (run_id,)
    ).fetchone() == ("canceled", "canceled")
    assert conn.execute(
        "select detail ->> 'outcome', detail ->> 'reason' from runlane.run_events "
        "where run_id = %s and event = 'run.finished'",
        (run_id,),
    ).fetchall() == [("canceled", "canceled")]
    assert (
        conn.execute(
            "select count(*) from runlane.computer_leases where run_id = %s", (run_id,)
        ).fetchone()[0]
        == 0
    )


async def read_stream(dsn: str, run_id: int) -> list[int]:
    return [o["output_id"] async for o in runlane.stream(dsn, run_id, poll=0.2)]


def test_stop_by_notification_frees_the_computer_and_the_thread(conn, db_dsn, api_dsn, workers):
    chat = streaming_agent(conn, "agent-stop", "computer-stop")
    waiter = streaming_agent(conn, "agent-wait", "computer-stop")
    # Each step sleeps 3 s before its output: a Stop lands while the agent waits, and
    # a lease of 300 s puts the first heartbeat 100 s away.
    worker = workers(
        "--agent",
        "stream_agent:agent",
        "--lease",
        "300",
        "--no-maintenance",
        "--scan-interval",
        "0.5",
        lanes=("interactive", "background"),
        env={"STREAM_AGENT_CHUNKS": "100000", "STREAM_AGENT_DELAY": "3"},
    )
    run_id = submit(conn, chat, "thread-stop", "talk to me")
    wait_until(lambda: outputs(conn, run_id)[1] >= 1, what="the first output")
    queued = background_run(conn, waiter)  # waits for computer-stop
    assert run_state(conn, queued) == "queued"

    state, last = stop(api_dsn, run_id)
    assert state == "running", "a running run answers running: the stop is on its way"

    wait_until(lambda: run_state(conn, run_id) == "canceled", what="the run canceled")
    assert_stopped(conn, run_id, last)
    stopped = worker.wait_for("run.stopped", where=lambda r: r["run.id"] == run_id)
    assert stopped["lease.why"] == "stop_requested", "the notification stopped it"
    finished = worker.wait_for("run.finished", where=lambda r: r.get("run.id") == run_id)
    assert finished["run.outcome"] == "canceled"
    assert not worker.events("run.lease_lost")
    print(
        f"stop by notification: run.finished {stop_latency_ms(conn, run_id):.0f} ms "
        "after run.cancel_requested"
    )

    # The freed computer goes to its waiter; a stream of the stopped run ends.
    wait_until(lambda: outputs(conn, queued)[1] >= 1, what="the computer's waiter at work")
    assert asyncio.run(read_stream(db_dsn, run_id))[-1] == last
    # The thread takes its next message in a new run (queued behind the computer).
    follow_up = submit(conn, chat, "thread-stop", "and now?")
    assert follow_up != run_id
    # Stopping the background run that holds the computer lets that run start.
    state, last_background = stop(api_dsn, queued)
    assert state == "running"
    wait_until(lambda: run_state(conn, queued) == "canceled", what="the background run canceled")
    assert_stopped(conn, queued, last_background)
    wait_until(lambda: outputs(conn, follow_up)[1] >= 1, what="the next message answered")
    assert run_state(conn, run_id) == "canceled"


def test_stop_without_notification_reaches_the_worker_by_heartbeat(conn, db_dsn, api_dsn, workers):
    conn.execute(SUPPRESS_NOTIFY)  # runlane._notify now sends nothing (the queue guard)
    chat = streaming_agent(conn, "agent-quiet", None)
    worker = workers(
        "--agent",
        "stream_agent:agent",
        "--lease",
        "3",
        "--no-maintenance",
        "--scan-interval",
        "0.2",
        env={"STREAM_AGENT_CHUNKS": "100000", "STREAM_AGENT_DELAY": "4"},
    )
    with psycopg.connect(db_dsn, autocommit=True) as listener:
        listener.execute("listen runlane_runs")
        run_id = submit(conn, chat, "thread-quiet", "talk to me")
        wait_until(lambda: outputs(conn, run_id)[1] >= 1, what="the first output")
        state, last = stop(api_dsn, run_id)
        assert state == "running"
        wait_until(lambda: run_state(conn, run_id) == "canceled", what="the run canceled")
        hints = [json.loads(n.payload) for n in listener.notifies(timeout=0.3)]
    assert not [h for h in hints if "cancel" in h], "the Stop hint was suppressed"
    assert_stopped(conn, run_id, last)
    stopped = worker.wait_for("run.stopped", where=lambda r: r["run.id"] == run_id)
    assert stopped["lease.why"] == "heartbeat_refused", "the heartbeat stopped it"
    print(
        f"stop by heartbeat (lease 3 s): run.finished {stop_latency_ms(conn, run_id):.0f} ms "
        "after run.cancel_requested"
    )


def test_a_forged_stop_hint_stops_nothing(conn, db_dsn, workers):
    chat = streaming_agent(conn, "agent-forged", None)
    worker = workers(
        "--agent",
        "stream_agent:agent",
        "--no-maintenance",
        env={"STREAM_AGENT_CHUNKS": "4", "STREAM_AGENT_DELAY": "0.5"},
    )
    run_id = submit(conn, chat, "thread-forged", "talk to me")
    wait_until(lambda: outputs(conn, run_id)[1] >= 1, what="the first output")
    conn.execute(
        "select pg_notify('runlane_runs', %s)",
        (json.dumps({"cancel": run_id, "lane": "interactive"}),),
    )
    wait_until(lambda: run_state(conn, run_id) != "running", what="the run's end")
    assert run_state(conn, run_id) == "succeeded"
    assert outputs(conn, run_id)[1] == 4
    assert not worker.events("run.stopped")


@pytest.mark.parametrize(
    "payload,expected",
    [
        ('{"cancel": 42, "lane": "interactive"}', 42),
        (b'{"cancel": 42, "lane": "background"}', 42),
        ('{"run_id": 42, "lane": "interactive"}', None),
        ('{"cancel": 1e400, "lane": "interactive"}', None),
        ('{"cancel": "42", "lane": "interactive"}', None),
        ('{"cancel": 9223372036854775808, "lane": "interactive"}', None),
        ('{"cancel": [42]}', None),
        ("not json", None),
    ],
)
def test_stop_hints_are_read_as_untrusted(payload, expected):
    assert runlane.hints.stop_of(payload) == expected
