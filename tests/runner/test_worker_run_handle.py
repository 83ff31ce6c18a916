"""runlane.worker.run_handle: one claimed run as its agent sees it, against a real
PostgreSQL. Writes carry the fence and the attempt's numbers in order; a refused write
loses the run and stops its agent; charges go at once, in order; messages are read once."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import psycopg
import pytest
from worker_helpers import make_agent, submit
from worker_parts import Timings, claim, database

from runlane.agents import LeaseLost, StepResult
from runlane.worker.run_handle import RunHandle


def _one_run(conn: psycopg.Connection, agent_id: str = "agent-h") -> dict:
    make_agent(conn, agent_id)
    submit(conn, agent_id, "thread-1", "hello")
    (row,) = claim(conn)
    return row


def _outputs(conn: psycopg.Connection, run_id: int) -> list[str]:
    return [
        b
        for (b,) in conn.execute(
            "select body from runlane.run_outputs where run_id = %s and kind = 'text' "
            "order by output_id",
            (run_id,),
        )
    ]


def test_writes_an_agent_sends_at_once_all_land_in_the_order_they_were_made(conn, db_dsn):
    row = _one_run(conn)

    async def scenario() -> None:
        async with database(db_dsn) as db:
            run = RunHandle(row, db, Timings())
            await asyncio.gather(*(run.emit("text", f"part {i}") for i in range(20)))

    asyncio.run(scenario())
    # Each write had its own number and none was taken for a resend and dropped.
    assert _outputs(conn, row["run_id"]) == [f"part {i}" for i in range(20)]
    assert (
        conn.execute(
            "select write_seq from runlane.runs where run_id = %s", (row["run_id"],)
        ).fetchone()[0]
        == 20
    )


def test_the_first_visible_output_reports_the_first_response_once(conn, db_dsn):
    row = _one_run(conn)
    timings = Timings()

    async def scenario() -> None:
        async with database(db_dsn) as db:
            run = RunHandle(row, db, timings)
            await run.emit("text", "first")
            await run.end_step(
                StepResult(done=False, outputs=(("text", "second"),), checkpoint={"k": 1})
            )

    asyncio.run(scenario())
    assert timings.events() == ["run.first_response"]
    saved = conn.execute(
        "select checkpoint from runlane.runs where run_id = %s", (row["run_id"],)
    ).fetchone()[0]
    assert saved == {"iteration": 0, "cost": 0.0, "state": {"k": 1}}
    assert _outputs(conn, row["run_id"]) == ["first", "second"]


def test_a_write_refused_as_fenced_out_loses_the_run_and_cancels_its_agent(conn, db_dsn):
    row = _one_run(conn)
    conn.execute("select runlane_test.claimed(%s, 'another-worker')", (row["run_id"],))

    async def scenario() -> tuple[RunHandle, asyncio.Task]:
        async with database(db_dsn) as db:
            run = RunHandle(row, db, Timings())
            run.agent_task = asyncio.create_task(asyncio.sleep(60))
            with pytest.raises(LeaseLost):
                await run.emit("text", "too late")
            await asyncio.sleep(0)  # let the cancellation reach the agent task
            agent_task = run.agent_task
        # The database is closed now: a later write is refused here, with no round trip.
        with pytest.raises(LeaseLost):
            await run.save_checkpoint({"step": 2})
        return run, agent_task

    run, agent_task = asyncio.run(scenario())
    assert (run.lost, run.lost_why) == (True, "fenced_out")
    assert agent_task.cancelled()
    assert _outputs(conn, row["run_id"]) == []


def test_charges_are_recorded_in_order_and_a_refused_one_fails_only_itself(conn, db_dsn):
    row = _one_run(conn)

    async def scenario() -> psycopg.Error:
        async with database(db_dsn) as db:
            run = RunHandle(row, db, Timings())
            run.charge(0.25)
            run.charge(0)  # nothing to record
            run.charge(-1)  # refused by the database
            run.charge(0.5)
            with pytest.raises(psycopg.Error) as refused:
                await run.settle_charges()
            return refused.value

    refused = asyncio.run(scenario())
    assert refused.sqlstate == "22023"
    assert conn.execute(
        "select amount from runlane.charges where run_id = %s order by charged_at, amount",
        (row["run_id"],),
    ).fetchall() == [(Decimal("0.25"),), (Decimal("0.5"),)]


def test_the_runs_messages_are_read_once_per_attempt(conn, db_dsn):
    row = _one_run(conn)

    async def scenario() -> tuple[list, list]:
        async with database(db_dsn) as db:
            run = RunHandle(row, db, Timings())
            first = await run.messages()
        second = await run.messages()  # the database is closed: from the attempt's copy
        return first, second

    first, second = asyncio.run(scenario())
    assert len(first) == 1 and first[0].body.startswith("hello")
    assert second == first


def test_outputs_still_queued_commit_with_the_checkpoint_that_follows_them(conn, db_dsn):
    """An agent that emits and then saves its checkpoint writes both in one statement:
    the queued outputs go first, so a resume never repeats them nor loses them."""
    from runlane.worker.output_batcher import OutputBatcher

    row = _one_run(conn)

    async def scenario() -> None:
        async with database(db_dsn) as db:
            db.write_seqs = True
            spawned: list[asyncio.Task] = []

            def spawn(coro):
                spawned.append(asyncio.ensure_future(coro))
                return spawned[-1]

            batcher = OutputBatcher(db, [row["lane"]], 10.0, spawn)  # a window never reached
            run = RunHandle(row, db, Timings(), batcher)
            await run.emit("progress", "working")  # not visible: waits for the window
            await run.save_checkpoint({"step": 1})
            for task in spawned:
                task.cancel()

    asyncio.run(scenario())
    output_xid, run_xid = conn.execute(
        "select o.xmin::text, r.xmin::text from runlane.run_outputs as o "
        "join runlane.runs as r using (run_id) where o.run_id = %s",
        (row["run_id"],),
    ).fetchone()
    assert output_xid == run_xid, "the output and the checkpoint share one commit"
