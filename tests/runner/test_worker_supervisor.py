"""runlane.worker.supervisor against a real PostgreSQL: one run from its claim to the end
of its attempt. A refused heartbeat stops the agent and writes nothing; a Stop hint is
confirmed by the database before anything stops; the iteration cap and a bad output end
the attempt; a run of an organization a claim cut at the bound wakes the lanes."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from worker_helpers import make_agent, run_state, submit
from worker_parts import Timings, claim, config, database

from runlane.agents import CONTINUE, StepResult, done
from runlane.worker.finisher import FINISH_RUN, FINISH_RUNS, Finisher
from runlane.worker.run_handle import RunHandle
from runlane.worker.supervisor import HEARTBEAT, Supervisor


class Waiting:
    """An agent whose step ends (with one reply) only when the test opens the gate."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.steps = 0

    async def step(self, ctx: Any) -> StepResult:
        self.steps += 1
        await self.gate.wait()
        return done(outputs=[("text", "at last")])


class Endless:
    """An agent that always asks for another step."""

    async def step(self, ctx: Any) -> StepResult:
        return CONTINUE


class BadKind:
    async def step(self, ctx: Any) -> StepResult:
        return done(outputs=[("no-such-kind", "x")])


def _claimed(conn: psycopg.Connection) -> dict[str, Any]:
    make_agent(conn, "agent-s")
    submit(conn, "agent-s", "thread-1", "hello")
    (row,) = claim(conn)
    return row


def _supervise(db_dsn: str, row: dict[str, Any], agent: Any, act=None, **options: Any):
    """Supervises the claimed run with `agent` until its attempt has ended; `act(run,
    supervisor)` runs meanwhile. Returns the handle, the statements sent, the timing
    events and how many times the lanes were woken."""
    timings, woken, spawned = Timings(), [], []

    def spawn(coro: Any) -> asyncio.Task:
        task = asyncio.create_task(coro)
        spawned.append(task)
        return task

    async def scenario():
        async with database(db_dsn) as db:
            cfg = config(db_dsn, agent=agent, **options)
            supervisor = Supervisor(
                cfg, db, Finisher(cfg, db, timings, spawn), timings, spawn, lambda: woken.append(1)
            )
            run = RunHandle(row, db, timings)
            supervisor.start(run)
            assert supervisor.runs == {run.run_id: run}
            assert supervisor.org_runs == {run.org_id: 1}
            if act is not None:
                await act(run, supervisor, spawned)
            await run.supervisor
            await asyncio.gather(*spawned)
            assert supervisor.runs == {} and supervisor.org_runs == {}
            return run, db.sent

    run, sent = asyncio.run(scenario())
    return run, sent, timings, len(woken)


def test_a_run_whose_agent_is_done_is_finished(conn, db_dsn):
    row = _claimed(conn)
    agent = Waiting()
    agent.gate.set()
    run, _, timings, woken = _supervise(db_dsn, row, agent, max_per_org=0)
    assert run_state(conn, row["run_id"]) == "succeeded"
    assert timings.events() == ["run.execution_started", "run.first_response", "run.finished"]
    assert woken == 0  # no bound and a LISTEN connection: nothing to announce


def test_a_run_of_an_organization_a_claim_cut_at_the_bound_wakes_every_lane(conn, db_dsn):
    row = _claimed(conn)
    agent = Waiting()
    agent.gate.set()

    async def cut(run: RunHandle, supervisor: Supervisor, spawned: list) -> None:
        # The claim that brought this run brought its organization to the bound (1).
        assert supervisor.bound.after_claim({}, [run.org_id]) == (True, False)

    _, _, _, woken = _supervise(db_dsn, row, agent, cut, max_per_org=1, max_per_org_strict=True)
    assert woken == 1


def test_a_run_ending_under_its_organizations_bound_wakes_no_lane(conn, db_dsn):
    row = _claimed(conn)
    agent = Waiting()
    agent.gate.set()

    async def under(run: RunHandle, supervisor: Supervisor, spawned: list) -> None:
        assert supervisor.bound.after_claim({}, [run.org_id]) == (False, False)

    _, _, _, woken = _supervise(db_dsn, row, agent, under, max_per_org=2, max_per_org_strict=True)
    assert woken == 0  # nothing was left queued by the bound: a notification announces more


def test_a_refused_heartbeat_stops_the_agent_and_writes_nothing(conn, db_dsn):
    row = _claimed(conn)
    agent = Waiting()

    async def take_over(run: RunHandle, supervisor: Supervisor, spawned: list) -> None:
        conn.execute("select runlane_test.claimed(%s, 'another-worker')", (row["run_id"],))

    # A 0.3 s lease: a heartbeat every 0.1 s; the gate never opens.
    run, sent, timings, _ = _supervise(db_dsn, row, agent, take_over, lease=0.3)
    assert (run.lost, run.lost_why) == (True, "heartbeat_refused")
    assert run.agent_task.cancelled()
    assert conn.execute(
        "select state, lease_owner from runlane.runs where run_id = %s", (row["run_id"],)
    ).fetchone() == ("running", "another-worker")
    assert (
        conn.execute(
            "select count(*) from runlane.run_outputs where run_id = %s", (row["run_id"],)
        ).fetchone()[0]
        == 0
    )
    assert "run.finished" not in timings.events()


def test_a_stop_hint_confirmed_by_the_database_stops_the_run_canceled(conn, db_dsn):
    row = _claimed(conn)
    agent = Waiting()

    async def stop(run: RunHandle, supervisor: Supervisor, spawned: list) -> None:
        conn.execute("select runlane.cancel_run(%s)", (row["run_id"],))
        supervisor.stop_hint(row["run_id"])

    run, _, _, _ = _supervise(db_dsn, row, agent, stop, lease=300)  # no heartbeat is due
    assert (run.lost, run.lost_why) == (True, "stop_requested")
    assert conn.execute(
        "select state, reason from runlane.runs where run_id = %s", (row["run_id"],)
    ).fetchone() == ("canceled", "canceled")


def test_a_forged_stop_hint_costs_one_heartbeat_and_stops_nothing(conn, db_dsn):
    row = _claimed(conn)
    agent = Waiting()

    async def forged(run: RunHandle, supervisor: Supervisor, spawned: list) -> None:
        supervisor.stop_hint(row["run_id"])  # the run was not stopped
        supervisor.stop_hint(row["run_id"] + 1000)  # nor is this one held here
        await asyncio.gather(*spawned)
        agent.gate.set()

    run, sent, _, _ = _supervise(db_dsn, row, agent, forged, lease=300)
    assert [sql for _, sql, _ in sent].count(HEARTBEAT) == 1
    assert not run.lost
    assert run_state(conn, row["run_id"]) == "succeeded"


def test_an_agent_that_never_ends_is_stopped_at_the_iteration_cap(conn, db_dsn):
    row = _claimed(conn)
    run, _, _, _ = _supervise(db_dsn, row, Endless())
    assert run.iteration == row["iteration_cap"] == 20
    assert conn.execute(
        "select state, last_error from runlane.runs where run_id = %s", (row["run_id"],)
    ).fetchone() == ("failed", "iteration_cap")


def test_a_step_output_of_an_unknown_kind_fails_the_attempt(conn, db_dsn):
    row = _claimed(conn)
    _supervise(db_dsn, row, BadKind())
    state, reason, error = conn.execute(
        "select state, reason, last_error from runlane.runs where run_id = %s", (row["run_id"],)
    ).fetchone()
    assert (state, reason) == ("queued", "retry_scheduled")
    assert "ValueError" in error
    assert (
        conn.execute(
            "select count(*) from runlane.run_outputs where run_id = %s", (row["run_id"],)
        ).fetchone()[0]
        == 0
    )


def test_a_heartbeat_refused_after_the_finish_committed_writes_nothing_more(conn, db_dsn):
    """The finish commits but its reply is slow (lost and resent, in production): the
    heartbeat meanwhile finds the run finished and is refused. That refusal is the run's
    own end, not a lost lease: no canceled finish is tried for it (it would be refused with
    RL001 and logged run.lease_lost, as the chaos soak's lost_acks check caught)."""
    row = _claimed(conn)
    agent = Waiting()
    agent.gate.set()
    refused = asyncio.Event()

    async def scenario():
        async with database(db_dsn) as db:
            call = db.call

            async def slow_finish_reply(lane, sql, params=None, fetch="one", retries=None, orgs=()):
                result = await call(lane, sql, params, fetch, retries, orgs)
                if sql == FINISH_RUNS:  # committed: the reply waits for a refused heartbeat
                    await asyncio.wait_for(refused.wait(), timeout=30)
                if sql == HEARTBEAT and not (result and result["ok"]):
                    refused.set()
                return result

            db.call = slow_finish_reply
            timings, spawned = Timings(), []

            def spawn(coro: Any) -> asyncio.Task:
                spawned.append(asyncio.create_task(coro))
                return spawned[-1]

            cfg = config(db_dsn, agent=agent, lease=0.3, max_per_org=0)
            supervisor = Supervisor(
                cfg, db, Finisher(cfg, db, timings, spawn), timings, spawn, lambda: None
            )
            run = RunHandle(row, db, timings)
            supervisor.start(run)
            await run.supervisor
            await asyncio.gather(*spawned)
            return run, db, timings

    run, db, timings = asyncio.run(scenario())
    assert run.lost, "the heartbeat was refused while the finish's reply was on its way"
    assert run_state(conn, row["run_id"]) == "succeeded"
    assert db.count(FINISH_RUN) == 0, "a canceled finish was tried for a finished run"
    assert timings.events().count("run.finished") == 1
