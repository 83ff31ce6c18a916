"""A stream ends when its run ends: every way a run closes (finish_run, finish_runs'
batch, retry_run with its attempts spent, reap_stale, a Stop of a queued run, a claim
that skips a gated run) sends {"stream": token, "end": true} on runlane_outputs at its
commit, so runlane.stream() ends at once instead of at its next poll, and the dashboard
reads a watched run's status at once instead of at its next tick."""

from __future__ import annotations

import asyncio
import json
import time
from contextlib import aclosing

import psycopg
from psycopg_pool import AsyncConnectionPool

import runlane
from runlane.dashboard.hub import Hub

END_DEADLINE = 10.0  # far below the 30 s poll the follower is given


def _queued_chat(conn, agent_id: str) -> int:
    return conn.execute(
        "select runlane_test.queued_run(%s, 'interactive', 'interactive')", (agent_id,)
    ).fetchone()[0]


def _claimed(conn, run_id: int) -> int:
    return conn.execute("select runlane_test.claimed(%s)", (run_id,)).fetchone()[0]


def _end_hints(listener: psycopg.Connection, want: int) -> list[dict]:
    """The payloads of the end hints heard, until `want` of them or the deadline."""
    ends: list[dict] = []
    deadline = time.monotonic() + END_DEADLINE
    while len(ends) < want and time.monotonic() < deadline:
        for note in listener.notifies(timeout=0.5, stop_after=1):
            payload = json.loads(note.payload)
            if payload.get("end") is True:
                ends.append(payload)
    return ends


def test_every_way_a_run_closes_notifies_its_stream(conn, db_dsn):
    conn.execute("select runlane_test.agent('agent-e', 'org-e')")
    conn.execute("select runlane_test.agent('agent-off', 'org-e')")
    ended: dict[str, int] = {}

    with psycopg.connect(db_dsn, autocommit=True) as listener:
        listener.execute("LISTEN runlane_outputs")

        run = _queued_chat(conn, "agent-e")
        conn.execute("select runlane.finish_run(%s, %s, 'succeeded')", (run, _claimed(conn, run)))
        ended["finish_run"] = run

        batch = [_queued_chat(conn, "agent-e") for _ in range(2)]
        fences = [_claimed(conn, r) for r in batch]
        rows = conn.execute(
            "select ok from runlane.finish_runs(%s, %s, array['succeeded', 'failed'], "
            "array[null, 'boom'], array[0, 0]::numeric[], array[1, 0], array['text'], "
            "array['a reply'])",
            (batch, fences),
        ).fetchall()
        assert rows == [(True,), (True,)]
        ended["finish_runs/1"], ended["finish_runs/2"] = batch

        run = _queued_chat(conn, "agent-e")
        conn.execute("update runlane.runs set max_attempts = 1 where run_id = %s", (run,))
        fence = _claimed(conn, run)
        conn.execute("select runlane.retry_run(%s, %s, 'boom', interval '0')", (run, fence))
        ended["retry_run"] = run

        run = _queued_chat(conn, "agent-e")
        conn.execute("update runlane.runs set max_attempts = 1 where run_id = %s", (run,))
        _claimed(conn, run)
        conn.execute("select runlane_test.lease_expired(%s)", (run,))
        conn.execute("select * from runlane.reap_stale(now())")
        ended["reap_stale"] = run

        run = _queued_chat(conn, "agent-e")
        conn.execute("select runlane.cancel_run(%s)", (run,))
        ended["cancel_run"] = run

        run = conn.execute(
            "select runlane_test.queued_run('agent-off', 'background', 'manual')"
        ).fetchone()[0]
        conn.execute("update runlane.agents set enabled = false where agent_id = 'agent-off'")
        conn.execute(
            "select * from runlane.claim_runs('w-e', array['background'], 10, interval '60 s')"
        )
        ended["claim_runs/skipped"] = run

        hints = _end_hints(listener, len(ended))

    states = dict(
        conn.execute(
            "select run_id, state from runlane.runs where run_id = any(%s)", (list(ended.values()),)
        ).fetchall()
    )
    assert {name: states[run] for name, run in ended.items()} == {
        "finish_run": "succeeded",
        "finish_runs/1": "succeeded",
        "finish_runs/2": "failed",
        "retry_run": "failed",
        "reap_stale": "failed",
        "cancel_run": "canceled",
        "claim_runs/skipped": "skipped",
    }
    tokens = {
        name: conn.execute("select runlane.stream_token(%s)", (run,)).fetchone()[0]
        for name, run in ended.items()
    }
    heard = {hint["stream"] for hint in hints}
    assert {name for name, token in tokens.items() if token not in heard} == set()
    # the token and the flag: no run id, no organization, no text
    assert all(set(hint) == {"stream", "end"} for hint in hints), hints


async def _follow_until_end(db_dsn: str, run_id: int, started: asyncio.Event) -> dict:
    async with aclosing(runlane.stream(db_dsn, run_id, poll=30.0, events=True)) as items:
        async for item in items:
            if item["event"] == "output":
                started.set()
            if item["event"] == "end":
                return item
    raise AssertionError("the stream stopped without an end event")


def test_stream_ends_when_its_run_finishes_not_at_its_next_poll(conn, db_dsn):
    conn.execute("select runlane_test.agent('agent-s', 'org-s')")
    run = _queued_chat(conn, "agent-s")
    fence = _claimed(conn, run)
    conn.execute("select runlane.append_output(%s, %s, 'text', 'first words')", (run, fence))

    async def scenario() -> tuple[dict, float]:
        started = asyncio.Event()
        follower = asyncio.create_task(_follow_until_end(db_dsn, run, started))
        await asyncio.wait_for(started.wait(), END_DEADLINE)
        await asyncio.sleep(0.2)  # the follower is waiting (30 s poll) for its next hint
        finished_at = time.monotonic()
        conn.execute("select runlane.finish_run(%s, %s, 'succeeded')", (run, fence))
        end = await asyncio.wait_for(follower, END_DEADLINE)
        return end, time.monotonic() - finished_at

    end, _took = asyncio.run(scenario())  # bench follow_end measures the time
    assert (end["state"], end["run_id"]) == ("succeeded", run)


def test_the_dashboard_reads_a_watched_runs_status_when_it_finishes_not_at_its_tick(conn, db_dsn):
    conn.execute("select runlane_test.agent('agent-d', 'org-d')")
    run = _queued_chat(conn, "agent-d")
    fence = _claimed(conn, run)

    async def scenario() -> str:
        pool = AsyncConnectionPool(db_dsn, min_size=1, max_size=2, open=False)
        await pool.open()
        hub = Hub(db_dsn, pool, tick=30.0)  # no periodic read within the deadline
        try:
            async with hub.watch_run(run) as topic:
                hub.start()  # its first round reads the watched run's status

                async def state_is(state: str) -> None:
                    while topic.status is None or topic.status["state"] != state:
                        await topic.wait(topic.version, 1.0)

                await asyncio.wait_for(state_is("running"), END_DEADLINE)
                await asyncio.sleep(0.2)  # the hub rests until its next hint or tick
                conn.execute("select runlane.finish_run(%s, %s, 'succeeded')", (run, fence))
                await asyncio.wait_for(state_is("succeeded"), END_DEADLINE)
                return topic.status["state"]
        finally:
            await hub.stop()
            await pool.close()

    assert asyncio.run(scenario()) == "succeeded"
