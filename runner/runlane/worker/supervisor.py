"""The run supervisor: every claimed run, from its claim to the end of its attempt.

Guarantees:
- the claim is the run's durable ownership; the supervisor keeps it with a heartbeat
  every lease/3 (the first one a timer, not a task: most runs end before it fires); a
  beat that failed on a broken connection is tried again a beat later, or as soon as the
  listener reconnects after a loss (Database.pause: a failover, a restart);
- a heartbeat answering false, or any RL001, stops the agent task at once (the run is
  lost) and nothing more is written for the run but the one canceled finish the
  database accepts only for a stopped run still owned by this attempt (Finisher.end_lost);
- a Stop hint (runlane.cancel_run's notification, or embedded mode's call) is confirmed by
  one heartbeat before anything is stopped: a forged hint costs a heartbeat;
- the agent steps until a step is done or the run's iteration cap is reached; a step's
  charges are recorded before its end is written; a step's outputs must have a known
  kind and a text body, else the step fails; the attempt then ends through the Finisher
  (finish, retry, or release at shutdown);
- runs in flight are counted per organization (OrgBound): when a claim may have left an
  organization's runs queued because of the worker's max_per_org bound, the next end of
  one of its runs wakes every lane for one more pass (and a run of it that ended while
  that claim was on the wire marks the claiming lane for one more pass at once), so a
  bounded organization's backlog is never left to the next scan; likewise after a page
  that came back short right after pages that found a backlog (concurrent claimers may
  have held the rest), the next run to end wakes every lane once; without LISTEN, every
  run that ends wakes every lane;
- one run's failure never takes the worker down. There is no run-duration limit.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import psycopg

from .. import log
from ..agents import LeaseLost, StepResult
from .config import WorkerConfig
from .db import Database
from .finisher import Finisher
from .run_handle import RunHandle, check_output

HEARTBEAT = """
select runlane.heartbeat(
    p_run_id => %(run_id)s::bigint, p_fence => %(fence)s::bigint,
    p_lease => %(lease)s::interval) as ok
"""


class OrgBound:
    """Runs in flight per organization on this worker, and the organizations whose queued
    runs a claim may have left behind because of the worker's max_per_org bound (claim_runs
    enforces the bound; nothing announces the room a run leaves under it).

    A claim is cut for an organization only if the runs the worker held of it when the
    claim was sent plus the runs it claimed reach the bound (the database counted no more
    than the worker held: a run leaves the count here only after its end committed). Then
    either a run of it ended while the claim was on the wire (that room may not have been
    seen: claim again now) or the runs it holds now reach the bound (the next of them to
    end wakes the lanes). Either way a cut backlog is claimed again without a scan."""

    def __init__(self, bound: int):
        self.bound = max(0, bound)  # 0: no bound
        self.held: dict[str, int] = {}
        self.cut: set[str] = set()
        self.recheck = False  # set by short_after_backlog: the next end wakes the lanes

    def short_after_backlog(self) -> None:
        """A page came back short, the bound cutting nothing, right after pages that found
        a backlog. Concurrent claimers may have held the rest of it: claim_runs reads past
        rows other claimers hold only so far, and in a 4-worker drain three workers could take
        such a page for a drained queue and sit out the drain until their scan, one worker
        claiming 93 % of the runs. While runs are in flight, the next of them to end wakes
        the lanes once; if that claim is short too, the lane waits for its next wake-up."""
        if self.held:
            self.recheck = True

    def started(self, org_id: str) -> None:
        self.held[org_id] = self.held.get(org_id, 0) + 1

    def ended(self, org_id: str) -> bool:
        """A run's attempt ended: True when its organization was cut by a claim, or a
        short page after a backlog asked for a recheck (the lanes should make one more
        pass)."""
        held = self.held.pop(org_id, 1)
        if held > 1:
            self.held[org_id] = held - 1
        wake, self.recheck = self.recheck, False
        if org_id in self.cut:
            self.cut.discard(org_id)
            return True
        return wake

    def before_claim(self, limit: int) -> dict[str, int] | None:
        """What a claim of up to `limit` runs needs to know afterwards (None: no bound):
        the organizations it could bring to the bound and the runs held of each."""
        if not self.bound:
            return None
        return {org: n for org, n in self.held.items() if n + limit >= self.bound}

    def after_claim(self, near: dict[str, int] | None, claimed: Iterable[str]) -> tuple[bool, bool]:
        """After the claimed runs were started: (cut, again). cut: the bound may have left
        runs queued (the queue is not known to be drained); again: the lane should make
        one more pass now. Organizations it may have cut are noted for ended()."""
        if near is None:
            return False, False
        counts = Counter(claimed)
        cut = again = False
        for org in near.keys() | counts.keys():
            reached = near.get(org, 0) + counts[org]
            if reached < self.bound:
                continue
            cut = True
            if self.held.get(org, 0) < reached:
                again = True  # room was freed while the claim was on the wire
            else:
                self.cut.add(org)
        return cut, again


class Supervisor:
    """Supervises every run this worker holds (see the module's docstring)."""

    def __init__(
        self,
        config: WorkerConfig,
        database: Database,
        finisher: Finisher,
        timing: Callable[..., None],
        spawn: Callable[[Any], asyncio.Task],
        wake_lanes: Callable[[], None],
    ):
        self.config = config
        self.db = database
        self.finisher = finisher
        self.timing = timing
        self._spawn = spawn
        self._wake_lanes = wake_lanes  # every lane: one more pass
        self.lease = timedelta(seconds=config.lease)
        self.runs: dict[int, RunHandle] = {}
        # Shared with the lane dispatchers. Only a strict bound leaves runs queued that no
        # notification announces: a work-conserving claim reads past the bound to fill its
        # page when nothing within its room waits, so its short page is a drained queue.
        self.bound = OrgBound(config.max_per_org if config.max_per_org_strict else 0)
        self.org_runs = self.bound.held  # runs in flight per organization

    def start(self, run: RunHandle) -> None:
        """A claimed run: counted in flight and supervised until its attempt ends. Its
        agent's first step is the first thing the loop runs next; the supervisor and the
        run.execution_started timing line come right after it (off the wake path)."""
        self.runs[run.run_id] = run
        self.bound.started(run.org_id)
        run.agent_task = asyncio.create_task(self._agent_loop(run))
        run.supervisor = asyncio.create_task(self._supervise(run), name=f"run-{run.run_id}")
        asyncio.get_running_loop().call_soon(self._log_started, run)

    def _log_started(self, run: RunHandle) -> None:
        self.timing("run.execution_started", run.row_timing, **run.fields)

    async def _supervise(self, run: RunHandle) -> None:
        # The first beat is due after lease/3: until then a timer, not a task (most runs
        # end before it fires).
        beats: list[asyncio.Task] = []
        timer = asyncio.get_running_loop().call_later(
            self._beat_interval, lambda: beats.append(asyncio.create_task(self._heartbeat(run)))
        )
        try:
            await self._run_to_end(run)
            if run.lost and not run.ended:  # a refusal after the end is that end
                await self.finisher.end_lost(run)
        except Exception as exc:  # noqa: BLE001 - never let one run take the worker down
            log.get().warning("run.supervisor_failed", **run.fields, **log.error_fields(exc))
        finally:
            timer.cancel()
            for beat in beats:
                beat.cancel()
            self.runs.pop(run.run_id, None)
            if self.bound.ended(run.org_id):
                # A claim may have left its organization's queued runs behind at this
                # worker's bound, and no notification announces the room this run leaves.
                self._wake_lanes()
            elif not self.config.listen:
                self._wake_lanes()  # no LISTEN hears the follow-up run or the freed computer

    async def _run_to_end(self, run: RunHandle) -> None:
        """Awaits the agent and writes how its attempt ended (finish, retry, release);
        writes nothing once the run is lost."""
        task = run.agent_task
        assert task is not None, "the supervisor starts the agent's task before this"
        try:
            result = await task
        except asyncio.CancelledError:
            if not task.cancelled():
                raise  # the supervisor itself was cancelled
            if run.releasing and not run.lost:
                await self.finisher.release(run)
            return
        except LeaseLost:
            return
        except Exception as exc:  # noqa: BLE001 - an agent failure fails the attempt
            if not run.lost:
                await self.finisher.retry(run, exc)
            return
        if run.lost:
            return
        try:  # the outputs still queued go with the finish, first
            result = replace(result, outputs=await run.end_outputs(tuple(result.outputs)))
        except LeaseLost:
            return
        except Exception as exc:  # noqa: BLE001 - a refused output fails the attempt
            if not run.lost:
                await self.finisher.retry(run, exc)
            return
        if not run.lost:
            await self.finisher.finish(run, result)

    async def _check_stop(self, run: RunHandle) -> None:
        """A Stop hint named this run: one heartbeat asks the database (it answers false
        for a stopped run), so a forged hint costs a heartbeat and stops nothing."""
        if run.lost:
            return
        try:
            row = await self.db.call(
                run.lane,
                HEARTBEAT,
                {"run_id": run.run_id, "fence": run.fence, "lease": self.lease},
                retries=0,
                orgs=(run.org_id,),
            )
        except psycopg.Error as exc:  # the heartbeat loop asks again within lease/3
            log.get().warning("run.heartbeat_failed", **run.fields, **log.error_fields(exc))
            return
        if not (row and row["ok"]):
            run.lose("stop_requested")

    async def _agent_loop(self, run: RunHandle) -> StepResult:
        """Steps until one is done (its outputs are written with the finish)."""
        agent = self.config.agents.get(run.handler)
        if agent is None:  # (the claim takes only the handlers this worker serves)
            raise LookupError(f"this worker serves no handler {run.handler!r}")
        while True:
            if run.iteration >= run.iteration_cap:
                return StepResult(done=True, outcome="failed", error="iteration_cap")
            result = await agent.step(run)
            await run.settle_charges()  # recorded before the step's end is written
            if run.lost:
                raise LeaseLost(f"run {run.run_id} is owned by another worker now")
            run.iteration += 1
            if not isinstance(result, StepResult):
                raise TypeError("an agent step must return a StepResult")
            for kind, body in result.outputs:  # refused here, as a failed step
                check_output(kind, body)
            if result.done:
                return result
            await run.end_step(result)

    @property
    def _beat_interval(self) -> float:
        return max(self.config.lease / 3, 0.05)

    async def _heartbeat(self, run: RunHandle) -> None:
        """Beats now, then every lease/3, until the run ends or is lost."""
        while not run.lost:
            try:
                row = await self.db.call(
                    run.lane,
                    HEARTBEAT,
                    {"run_id": run.run_id, "fence": run.fence, "lease": self.lease},
                    retries=0,
                    orgs=(run.org_id,),
                )
                owned = bool(row and row["ok"])
            except psycopg.Error as exc:
                if exc.sqlstate == "RL001":
                    owned = False
                else:  # a broken connection: the lease still runs; try again next beat,
                    # or as soon as the listener is back after a loss (a promoted standby,
                    # a restarted server), so an outage costs as little lease as it can
                    log.get().warning("run.heartbeat_failed", **run.fields, **log.error_fields(exc))
                    await self.db.pause(self._beat_interval)
                    continue
            if not owned:
                run.lose("heartbeat_refused")
                return
            await asyncio.sleep(self._beat_interval)

    def stop_hint(self, run_id: int) -> None:
        """A Stop (runlane.cancel_run) may concern `run_id`: when this worker runs it, the
        database is asked (a heartbeat) and a stopped run's agent is stopped at once.
        Embedded mode calls it after its cancel_run commits; never raises."""
        run = self.runs.get(run_id)
        if run is not None:
            self._spawn(self._check_stop(run))

    async def drain(self, wait: bool) -> None:
        """Let running runs finish within the grace period (when `wait`: no second signal
        came), then release the rest."""
        supervisors = [r.supervisor for r in self.runs.values() if r.supervisor]
        if supervisors and wait:
            await asyncio.wait(supervisors, timeout=self.config.shutdown_grace)
        self.release_all()
        supervisors = [r.supervisor for r in self.runs.values() if r.supervisor]
        if supervisors:
            await asyncio.wait(supervisors, timeout=30)

    def release_all(self) -> None:
        for run in list(self.runs.values()):
            if not run.releasing and run.agent_task and not run.agent_task.done():
                run.releasing = True
                run.agent_task.cancel()
