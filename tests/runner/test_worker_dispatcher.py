"""runlane.worker.dispatcher against a real PostgreSQL: one lane's passes and pages. A
wake-up during a pass marks exactly one more pass; a full page doubles the next; the
page budget running out marks one more pass; the worker's max_per_org bound holds; a
broken claim connection is replaced."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import psycopg
from worker_helpers import DEADLINE, make_agent, run_state, submit, wait_until
from worker_parts import Timings, config, database

from runlane.admission import Admission, Memory
from runlane.worker.dispatcher import LaneDispatcher
from runlane.worker.run_handle import RunHandle


def _plenty() -> Memory:
    return Memory(available=1 << 40, headroom=None)


@contextlib.asynccontextmanager
async def dispatcher(db_dsn: str, on_start=None, **options: Any
                     ) -> AsyncIterator[tuple[LaneDispatcher, list[RunHandle]]]:
    """A dispatcher for the interactive lane whose claimed runs are only recorded (no
    supervisor: they stay running, held by this worker)."""
    started: list[RunHandle] = []
    options = {"worker_id": "w-dispatch", "scan_interval": 3600, **options}
    async with database(db_dsn, **options) as db:
        cfg = config(db_dsn, **options)

        def start(run: RunHandle) -> None:
            started.append(run)
            if on_start is not None:
                on_start(run)
        lane = LaneDispatcher("interactive", cfg, db, Admission(_plenty, 0), start, Timings(),
                              asyncio.create_task)
        try:
            yield lane, started
        finally:
            await lane.close()


def _queue(conn: psycopg.Connection, n: int, org_id: str = "org-w") -> list[int]:
    return [submit(conn, make_agent(conn, f"agent-{org_id}-{i}", org_id), f"t-{i}", "hi")
            for i in range(n)]


def test_wake_ups_during_a_pass_mark_exactly_one_more_pass(conn, db_dsn):
    _queue(conn, 1)

    async def scenario() -> tuple[int, int, bool]:
        holder: list[LaneDispatcher] = []

        def notified_meanwhile(run: RunHandle) -> None:
            for _ in range(3):  # three notifications arrive while the pass runs
                holder[0].wake.set()
        async with dispatcher(db_dsn, notified_meanwhile) as (lane, started):
            holder.append(lane)
            loop = asyncio.create_task(lane.run())
            deadline = time.monotonic() + DEADLINE
            while lane.passes < 2:  # the marked pass
                assert time.monotonic() < deadline, "no second pass after the wake-ups"
                await asyncio.sleep(0.01)
            # A third pass would start at once; the scan timer is an hour away.
            await asyncio.sleep(0.3)
            passes, pending = lane.passes, lane.wake.is_set()
            lane.stop()
            await loop
            return passes, len(started), pending
    passes, started, pending = asyncio.run(scenario())
    assert (passes, started, pending) == (2, 1, False)


def test_a_full_page_doubles_the_next_and_a_short_one_ends_the_pass(conn, db_dsn):
    runs = _queue(conn, 25)

    async def scenario() -> tuple[int, int, int]:
        async with dispatcher(db_dsn, claim_batch=5, claim_batch_max=20) as (lane, started):
            await lane.pass_once()
            return lane.claim_queries, len(started), lane.claim_size
    # Pages of 5, 10 and 20 (10 left): three claims, then back to the first page size.
    assert asyncio.run(scenario()) == (3, 25, 5)
    assert {run_state(conn, r) for r in runs} == {"running"}


def test_when_the_page_budget_runs_out_the_lane_is_marked_for_one_more_pass(conn, db_dsn):
    _queue(conn, 3)

    async def scenario() -> tuple[int, bool]:
        async with dispatcher(db_dsn, claim_batch=2, max_pages=1) as (lane, started):
            await lane.pass_once()
            return len(started), lane.wake.is_set()
    assert asyncio.run(scenario()) == (2, True)


def test_the_worker_holds_at_most_max_per_org_runs_of_one_organization(conn, db_dsn):
    busy = _queue(conn, 5, "org-busy")
    quiet = _queue(conn, 2, "org-quiet")

    async def scenario() -> list[str]:
        async with dispatcher(db_dsn, max_per_org=2) as (lane, started):
            await lane.pass_once()
            await lane.pass_once()  # the bound still holds on the next pass
            return sorted(run.org_id for run in started)
    assert asyncio.run(scenario()) == ["org-busy", "org-busy", "org-quiet", "org-quiet"]
    assert sorted(run_state(conn, r) for r in busy) == ["queued"] * 3 + ["running"] * 2
    assert {run_state(conn, r) for r in quiet} == {"running"}


def test_a_claim_connection_that_broke_is_replaced_and_the_claim_sent_again(conn, db_dsn):
    first = _queue(conn, 1)

    async def scenario() -> tuple[list[int], int]:
        async with dispatcher(db_dsn) as (lane, started):
            await lane.pass_once()
            pid = lane.claim_conn.info.backend_pid
            conn.execute("select pg_terminate_backend(%s)", (pid,))
            wait_until(lambda: not conn.execute(
                "select exists (select 1 from pg_stat_activity where pid = %s)",
                (pid,)).fetchone()[0], what="claim backend gone")
            second = submit(conn, make_agent(conn, "agent-late"), "t-late", "hi")
            await lane.pass_once()
            assert lane.claim_conn.info.backend_pid != pid
            return [run.run_id for run in started], second
    claimed, second = asyncio.run(scenario())
    assert claimed == [first[0], second]
