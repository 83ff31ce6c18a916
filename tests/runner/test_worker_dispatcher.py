"""runlane.worker.dispatcher against a real PostgreSQL: one lane's passes and pages. A
wake-up during a pass marks exactly one more pass; a full page doubles the next; the
page budget running out marks one more pass; the worker's strict max_per_org bound holds,
and a run ending while a claim the bound cut is on the wire marks one more pass; a broken claim
connection is replaced."""

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
from runlane.agents import done
from runlane.worker.dispatcher import RUN_MESSAGES_MANY, LaneDispatcher
from runlane.worker.finisher import Finisher
from runlane.worker.run_handle import RUN_MESSAGES, RunHandle
from runlane.worker.supervisor import OrgBound, Supervisor


def _plenty() -> Memory:
    return Memory(available=1 << 40, headroom=None)


@contextlib.asynccontextmanager
async def dispatcher(
    db_dsn: str, on_start=None, **options: Any
) -> AsyncIterator[tuple[LaneDispatcher, list[RunHandle]]]:
    """A dispatcher for the interactive lane whose claimed runs are only recorded and
    counted in flight (no supervisor: they stay running, held by this worker)."""
    started: list[RunHandle] = []
    options = {"worker_id": "w-dispatch", "scan_interval": 3600, **options}
    async with database(db_dsn, **options) as db:
        cfg = config(db_dsn, **options)
        bound = OrgBound(cfg.max_per_org)

        def start(run: RunHandle) -> None:
            started.append(run)
            bound.started(run.org_id)
            if on_start is not None:
                on_start(run)

        lane = LaneDispatcher(
            "interactive",
            cfg,
            db,
            Admission(_plenty, 0),
            start,
            Timings(),
            asyncio.create_task,
            bound,
        )
        try:
            yield lane, started
        finally:
            await lane.close()


def _queue(conn: psycopg.Connection, n: int, org_id: str = "org-w") -> list[int]:
    return [
        submit(conn, make_agent(conn, f"agent-{org_id}-{i}", org_id), f"t-{i}", "hi")
        for i in range(n)
    ]


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


def test_a_page_the_bound_cut_ends_the_pass_and_keeps_its_size(conn, db_dsn):
    _queue(conn, 10)

    async def scenario() -> tuple[int, int, int]:
        options = {
            "claim_batch": 2,
            "claim_batch_max": 20,
            "max_per_org": 3,
            "max_per_org_strict": True,
        }
        async with dispatcher(db_dsn, **options) as (lane, started):
            await lane.pass_once()
            return lane.claim_queries, len(started), lane.claim_size

    # Pages of 2 and 4 (cut to 1 by the bound): the queue is not drained, the next pass
    # asks for 4 again rather than start over at 2.
    assert asyncio.run(scenario()) == (2, 3, 4)


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
        async with dispatcher(db_dsn, max_per_org=2, max_per_org_strict=True) as (lane, started):
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
            wait_until(
                lambda: (
                    not conn.execute(
                        "select exists (select 1 from pg_stat_activity where pid = %s)", (pid,)
                    ).fetchone()[0]
                ),
                what="claim backend gone",
            )
            second = submit(conn, make_agent(conn, "agent-late"), "t-late", "hi")
            await lane.pass_once()
            assert lane.claim_conn.info.backend_pid != pid
            return [run.run_id for run in started], second

    claimed, second = asyncio.run(scenario())
    assert claimed == [first[0], second]


def test_the_claim_connection_tells_each_claim_it_is_a_transaction_of_its_own(conn, db_dsn):
    # claim_runs lets a claim that took nothing commit without a flush only on such a
    # session; the worker's claim connections are in autocommit and say so
    _queue(conn, 1)

    async def scenario() -> tuple[bool, dict[str, Any]]:
        async with dispatcher(db_dsn, max_per_org=3) as (lane, started):
            await lane.pass_once()
            assert len(started) == 1
            cur = await lane.claim_conn.execute(
                "select current_setting('runlane.autocommit_claims') as autocommit_claims, "
                "current_setting('runlane.max_per_org') as max_per_org"
            )
            return lane.claim_conn.autocommit, await cur.fetchone()

    assert asyncio.run(scenario()) == (True, {"autocommit_claims": "on", "max_per_org": "3"})


class Gated:
    """An agent whose run ends (one step, done) only when the test opens its gate."""

    def __init__(self) -> None:
        self.gates: dict[int, asyncio.Event] = {}

    def gate(self, run_id: int) -> asyncio.Event:
        return self.gates.setdefault(run_id, asyncio.Event())

    async def step(self, ctx: Any) -> Any:
        await self.gate(ctx.run_id).wait()
        return done()


def test_a_run_ending_while_a_claim_cut_by_the_bound_is_sent_marks_one_more_pass(conn, db_dsn):
    """One organization, max_per_org 2: a run that ends while a claim the bound cut is on
    the wire frees room the claim may not have seen; the lane passes again instead of
    waiting for the next scan (the drain of one organization ran at the scan's pace)."""
    runs = _queue(conn, 5)
    agent = Gated()

    async def scenario() -> tuple[list[bool], list[int], dict[str, int]]:
        options = {
            "worker_id": "w-bound",
            "scan_interval": 3600,
            "max_per_org": 2,
            "max_per_org_strict": True,
        }
        async with database(db_dsn, **options) as db:
            supervisor, lane = _one_pass(db_dsn, db, agent, Timings(), **options)
            marked = []
            try:
                await lane.pass_once()  # claims 2 of 5: the bound cut the page
                first, second = list(supervisor.runs.values())
                agent.gate(first.run_id).set()
                await first.supervisor
                marked.append(lane.wake.is_set())  # the first end at the bound
                lane.wake.clear()  # as the lane loop does before its pass

                claim = lane.claim

                async def claim_then_end(limit: int) -> list[dict[str, Any]]:
                    rows = await claim(limit)  # the database saw `second` running
                    agent.gate(second.run_id).set()
                    await second.supervisor  # ... which ends before the reply is read
                    return rows

                lane.claim = claim_then_end
                await lane.pass_once()
                lane.claim = claim
                marked.append(lane.wake.is_set())  # the room `second` left
                lane.wake.clear()
                await lane.pass_once()
                held = dict(supervisor.org_runs)
            finally:
                for run in list(supervisor.runs.values()):
                    agent.gate(run.run_id).set()
                    await run.supervisor
                await lane.close()
            return marked, held

    marked, held = asyncio.run(scenario())
    assert marked == [True, True]
    assert held == {"org-w": 2}  # the bound still holds
    assert sorted(run_state(conn, r) for r in runs) == ["queued"] + ["succeeded"] * 4


def _one_pass(
    db_dsn: str, db: Any, agent: Any, timings: Timings, **options: Any
) -> tuple[Supervisor, LaneDispatcher]:
    """A supervisor and an interactive lane dispatcher on `db`, running `agent`; what the
    supervisor wakes the lanes for marks this lane for one more pass (lane.wake)."""
    cfg = config(db_dsn, agent=agent, **options)
    lanes: list[LaneDispatcher] = []
    supervisor = Supervisor(
        cfg,
        db,
        Finisher(cfg, db, timings, asyncio.create_task),
        timings,
        asyncio.create_task,
        lambda: lanes[0].wake.set(),
    )
    lanes.append(
        LaneDispatcher(
            "interactive",
            cfg,
            db,
            Admission(_plenty, 0),
            supervisor.start,
            timings,
            asyncio.create_task,
            supervisor.bound,
        )
    )
    return supervisor, lanes[0]


def test_a_claimed_runs_agent_steps_before_the_pages_message_read_and_log(conn, db_dsn):
    """The wake path ends at the agent's first step: the run.execution_started line is
    written after it has started, not before; and an agent that never asks for its
    messages costs no message read at all."""
    _queue(conn, 1)
    seen: list[tuple[list[str], list[str]]] = []

    async def scenario() -> None:
        options = {"worker_id": "w-first", "scan_interval": 3600}
        async with database(db_dsn, **options) as db:
            timings = Timings()

            class First:
                async def step(self, ctx: Any) -> Any:
                    seen.append(([sql for _, sql, _ in db.sent], timings.events()))
                    return done()

            supervisor, lane = _one_pass(db_dsn, db, First(), timings, **options)
            try:
                await lane.pass_once()
                (run,) = supervisor.runs.values()
                await run.supervisor
                assert "run.execution_started" in timings.events()
                assert RUN_MESSAGES_MANY not in [sql for _, sql, _ in db.sent]
            finally:
                await lane.close()

    asyncio.run(scenario())
    ((sent, events),) = seen
    assert RUN_MESSAGES_MANY not in sent
    assert events == []


def test_a_pages_messages_are_read_once_when_its_first_run_asks(conn, db_dsn):
    """Three runs claimed in one page whose agents read their messages: one
    run_messages_many call, sent only after the first agent asked, and each run gets its
    own message (none reads alone)."""
    runs = _queue(conn, 3)
    read: dict[int, list[str]] = {}
    sent_before_asking: list[list[str]] = []

    async def scenario() -> list[str]:
        options = {"worker_id": "w-page", "scan_interval": 3600}
        async with database(db_dsn, **options) as db:
            timings = Timings()

            class Reader:
                async def step(self, ctx: Any) -> Any:
                    sent_before_asking.append([sql for _, sql, _ in db.sent])
                    read[ctx.run_id] = [m.body for m in await ctx.messages()]
                    return done()

            supervisor, lane = _one_pass(db_dsn, db, Reader(), timings, **options)
            try:
                await lane.pass_once()
                for run in list(supervisor.runs.values()):
                    await run.supervisor
            finally:
                await lane.close()
            return [sql for _, sql, _ in db.sent]

    sent = asyncio.run(scenario())
    assert RUN_MESSAGES_MANY not in sent_before_asking[0]
    assert sent.count(RUN_MESSAGES_MANY) == 1
    assert RUN_MESSAGES not in sent  # no run read its own
    assert sorted(read) == sorted(runs)
    assert all(len(bodies) == 1 for bodies in read.values())


def test_a_short_page_after_a_backlog_passes_again_when_a_run_ends(conn, db_dsn):
    """A page that comes back short right after a full one may be short because other
    claimers hold the rest of the backlog, not because the queue is drained: the next run
    this worker ends wakes the lane for one more pass, instead of leaving the backlog to
    the scan (in 4-worker drains three workers sat out that way, one claiming 93 %)."""
    runs = _queue(conn, 6)
    agent = Gated()

    async def scenario() -> tuple[list[bool], int]:
        options = {"worker_id": "w-recheck", "scan_interval": 3600, "claim_batch": 2}
        async with database(db_dsn, **options) as db:
            supervisor, lane = _one_pass(db_dsn, db, agent, Timings(), **options)
            marked = []
            other = await psycopg.AsyncConnection.connect(db_dsn)  # another claimer
            try:
                claim = lane.claim

                async def claim_then_hold_the_rest(limit: int) -> list[dict[str, Any]]:
                    rows = await claim(limit)
                    if lane.claim_queries == 1:  # the other claimer locks what is left
                        await other.execute(
                            "select run_id from runlane.runs where state = 'queued' for update"
                        )
                    return rows

                lane.claim = claim_then_hold_the_rest
                await lane.pass_once()  # a full page of 2, then a page of 4 that finds none
                lane.claim = claim
                first = next(iter(supervisor.runs.values()))
                agent.gate(first.run_id).set()
                await first.supervisor
                marked.append(lane.wake.is_set())  # the end after the short page
                lane.wake.clear()
                await other.rollback()  # the other claimer let its rows go
                await lane.pass_once()  # ... and claims the rest
                claimed = lane.claim_queries
            finally:
                await other.close()
                for run in list(supervisor.runs.values()):
                    agent.gate(run.run_id).set()
                    await run.supervisor
                await lane.close()
            return marked, claimed

    marked, claimed = asyncio.run(scenario())
    assert marked == [True]
    assert claimed >= 3
    assert [run_state(conn, r) for r in runs].count("queued") == 0
