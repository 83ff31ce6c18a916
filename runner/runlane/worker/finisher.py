"""How an attempt's end is written: finished (batched), failed (retry_run), released at
shutdown, or closed canceled after a Stop.

Guarantees:
- a finish is queued only once the run's last step is done; runs finishing together go
  to the database as one finish_runs call of at most finish_batch runs (at once when no
  such call is in flight on the lane, else when it returns, after finish_window, or when
  finish_batch runs wait), each run in its own subtransaction: a run fenced out (RL001)
  is lost alone, a run refused otherwise is finished alone (FINISH_RUN, or with its last
  outputs FINISH_WITH_OUTPUTS: one statement, one commit); a crash before the call
  commits leaves the run to its lease; a call that did not finish together and is too
  long to go run by run is refused whole (54000: finish_runs holds the limit, 60) and
  sent again in halves with the same write numbers (a resend after a lost reply is then
  answered as applied);
- a failed attempt is handed to retry_run with its error and a backoff of 2^attempt
  seconds (at most 60); the database decides retry or failure;
- a release (shutdown) and a retry first wait for the attempt's charges;
- a lost run is finished canceled, which the database accepts only from the attempt
  that still owns a stopped run (RL001 otherwise: the lease was lost, nothing written);
- nothing is written for a run once it is lost;
- a write the database refused gives its write numbers back to the run's next write
  (RunHandle.give_back); one refused for its number (22023 on column write_seq) gives the
  run up to its lease (`run.lease_lost`, why `write_numbering`): no canceled finish is
  tried, its number would be refused again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg

from .. import log
from ..agents import StepResult
from .config import WorkerConfig
from .db import Database, by_organization, is_connection_error, pg_array
from .run_handle import STEP_OUTPUTS, RunHandle, numbering_refused, outputs_params

FINISH_RUN = """
select runlane.finish_run(
    p_run_id => %(run_id)s::bigint, p_fence => %(fence)s::bigint,
    p_outcome => %(outcome)s::text, p_error => %(error)s::text,
    p_cost => %(cost)s::numeric, p_seq => %(last_seq)s::bigint) as timing
"""
FINISH_WITH_OUTPUTS = (
    STEP_OUTPUTS
    + """
select w.first_response, runlane.finish_run(
    p_run_id => %(run_id)s::bigint, p_fence => %(fence)s::bigint,
    p_outcome => %(outcome)s::text, p_error => %(error)s::text,
    p_cost => %(cost)s::numeric, p_seq => %(last_seq)s::bigint) as timing
from written as w
"""
)
# finish_runs goes run by run (a batch that did not finish together) only so many runs per
# call, one subtransaction each; a longer call is refused whole, nothing written, with this
# SQLSTATE (program_limit_exceeded). The limit is the database's; the worker halves.
RUN_BY_RUN_LIMIT_EXCEEDED = "54000"
FINISH_RUNS = """
select run_id, ok, first_response, timing, sqlstate from runlane.finish_runs(
    p_run_ids => %(run_ids)s::bigint[], p_fences => %(fences)s::bigint[],
    p_outcomes => %(outcomes)s::text[], p_errors => %(errors)s::text[],
    p_costs => %(costs)s::numeric[], p_output_counts => %(counts)s::int[],
    p_output_kinds => %(kinds)s::text[], p_output_bodies => %(bodies)s::text[],
    p_seqs => %(seqs)s::bigint[])
"""
RETRY_RUN = """
select runlane.retry_run(
    p_run_id => %(run_id)s::bigint, p_fence => %(fence)s::bigint,
    p_error => %(error)s::text, p_delay => %(delay)s::interval,
    p_seq => %(seq)s::bigint) as state
"""
RELEASE_RUN = """
select runlane.release_run(
    p_run_id => %(run_id)s::bigint, p_fence => %(fence)s::bigint,
    p_wake_at => null, p_reason => 'shutdown', p_seq => %(seq)s::bigint) as released
"""
RUN_TIMING = "select runlane.run_timing(p_run_id => %(run_id)s::bigint) as timing"


class Finisher:
    """Writes how each attempt ended (see the module's docstring); one per worker."""

    def __init__(
        self,
        config: WorkerConfig,
        database: Database,
        timing: Callable[..., None],
        spawn: Callable[[Any], asyncio.Task],
    ):
        self.config = config
        self.db = database
        self.timing = timing
        self._spawn = spawn
        # Finishes waiting to be sent together: (run, result, future) per lane.
        self.finishing: dict[str, list[tuple[RunHandle, StepResult, asyncio.Future]]] = {
            lane: [] for lane in config.lanes
        }
        self.finish_timer: dict[str, asyncio.TimerHandle | None] = dict.fromkeys(config.lanes)
        self.finish_calls = dict.fromkeys(config.lanes, 0)  # finish_runs calls in flight

    async def finish(self, run: RunHandle, result: StepResult) -> None:
        """The last step's outputs and the finish: queued to go with the finishes of runs
        ending at about the same time (one finish_runs call, one commit), each run fenced
        and rolled back alone. A run refused with anything but RL001 (a deadlock between
        batches, a bad outcome) is finished alone, as without the batch."""
        if self.config.finish_batch > 1:
            future = asyncio.get_running_loop().create_future()
            self.finishing[run.lane].append((run, result, future))
            self._schedule(run.lane)
            try:
                # (not shielded: a cancelled wait cancels the future, which the batch
                # then leaves alone; the finish itself is sent either way)
                row = await future
            except psycopg.Error as exc:
                if is_connection_error(exc):
                    raise
                row = None  # refused as a whole (cannot happen for good input): alone
            if row is not None:
                if row["ok"]:
                    run.ended = True
                    run._log_first_response(row["first_response"])
                    self.timing("run.finished", row["timing"], **run.fields)
                    return
                if row["sqlstate"] == "RL001":
                    run.lose("fenced_out")
                    return
        await self._finish_alone(run, result)

    def _schedule(self, lane: str) -> None:
        """Idle: at the end of this loop iteration (the runs ending in it go together, no
        wait). While a finish_runs call is in flight: when it returns, after
        finish_window, or once finish_batch runs wait, whichever comes first."""
        queue = self.finishing[lane]
        if len(queue) >= self.config.finish_batch:
            self._send(lane)
        elif self.finish_timer[lane] is None:
            delay = self.config.finish_window if self.finish_calls[lane] else 0
            self.finish_timer[lane] = asyncio.get_running_loop().call_later(delay, self._send, lane)

    def _send(self, lane: str) -> None:
        timer, self.finish_timer[lane] = self.finish_timer[lane], None
        if timer is not None:
            timer.cancel()
        queue = self.finishing[lane]
        while queue:
            batch = queue[: self.config.finish_batch]
            del queue[: self.config.finish_batch]
            self._spawn(self._batch(lane, batch))

    async def _batch(
        self,
        lane: str,
        batch: list[tuple[RunHandle, StepResult, asyncio.Future]],
        seqs: list[int | None] | None = None,
    ) -> None:
        """One finish_runs call. `seqs`: the runs' write numbers when the runs go again in
        halves of a call refused whole; the same numbers, because that call may have been
        a resend of one that committed (its reply lost): a half is then answered as
        applied, where new numbers would be refused as fenced out."""
        if seqs is None:  # outputs and finish: one number per run
            seqs = [run.next_seq()["seq"] for run, _, _ in batch]
        if self.db.distributed and len({run.org_id for run, _, _ in batch}) > 1:
            # (one call per organization, each on its node: see by_organization)
            for group in by_organization(list(zip(batch, seqs, strict=True)), _org_of_entry):
                self._spawn(self._batch(lane, [e for e, _ in group], [q for _, q in group]))
            return
        params: dict[str, list[Any]] = {
            "run_ids": [],
            "fences": [],
            "outcomes": [],
            "errors": [],
            "costs": [],
            "counts": [],
            "kinds": [],
            "bodies": [],
            "seqs": seqs,
        }
        for run, result, _ in batch:
            params["run_ids"].append(run.run_id)
            params["fences"].append(run.fence)
            params["outcomes"].append(result.outcome)
            params["errors"].append(result.error)
            params["costs"].append(run.cost)
            params["counts"].append(len(result.outputs))
            for kind, body in result.outputs:
                params["kinds"].append(kind)
                params["bodies"].append(body)
        self.finish_calls[lane] += 1
        try:
            rows = await self.db.call(
                lane,
                FINISH_RUNS,
                {k: pg_array(v) for k, v in params.items()},
                fetch="all",
                orgs={run.org_id for run, _, _ in batch},
            )
        except psycopg.Error as exc:
            if exc.sqlstate != RUN_BY_RUN_LIMIT_EXCEEDED or len(batch) < 2:
                for (run, _, _), seq in zip(batch, seqs, strict=True):
                    run.give_back({"seq": seq, "last_seq": seq}, exc)
                self._fail(batch, exc)
                return
            # Nothing was written: the same runs again in two halves (each halved again
            # if still too long for the run-by-run path).
            half = len(batch) // 2
            for part in (slice(0, half), slice(half, None)):
                self._spawn(self._batch(lane, batch[part], seqs[part]))
            return
        except BaseException as exc:
            self._fail(batch, exc)
            if not isinstance(exc, Exception):
                raise
            return
        finally:
            self.finish_calls[lane] -= 1
            if self.finishing[lane] and not self.finish_calls[lane]:
                self._send(lane)  # what waited for this call goes now
        by_run = {row["run_id"]: row for row in rows}
        for (run, _, future), seq in zip(batch, seqs, strict=True):
            row = by_run.get(run.run_id)
            if row is not None and not row["ok"]:
                # (that run's subtransaction was rolled back: its number is unused)
                run.unused({"seq": seq, "last_seq": seq})
            if not future.done():
                future.set_result(row)

    @staticmethod
    def _refused(run: RunHandle, numbers: dict[str, int | None], exc: psycopg.Error) -> bool:
        """An end the database refused: its numbers go back to the run; True when the
        refusal loses the run (RL001: fenced out or stopped; its write number refused)."""
        run.give_back(numbers, exc)
        if exc.sqlstate == "RL001":
            run.lose("fenced_out")
            return True
        if numbering_refused(exc):
            run.lose("write_numbering")
            return True
        return False

    @staticmethod
    def _fail(
        batch: list[tuple[RunHandle, StepResult, asyncio.Future]], exc: BaseException
    ) -> None:
        """Every finish of the call gets its error (each run is then finished alone, or
        lost with the connection)."""
        for _, _, future in batch:
            if not future.done():
                future.set_exception(
                    exc if isinstance(exc, Exception) else asyncio.CancelledError()
                )

    async def _finish_alone(self, run: RunHandle, result: StepResult) -> None:
        """The last step's outputs and the finish, in one statement (one commit)."""
        numbers = run.next_seq(len(result.outputs) + 1)
        params: dict[str, Any] = {
            "run_id": run.run_id,
            "fence": run.fence,
            "outcome": result.outcome,
            "error": result.error,
            "cost": run.cost,
            **numbers,
        }
        sql = FINISH_RUN
        if result.outputs:
            sql = FINISH_WITH_OUTPUTS
            params.update(outputs_params(result.outputs))
        try:
            row = await self.db.call(run.lane, sql, params, orgs=(run.org_id,))
        except psycopg.Error as exc:
            if self._refused(run, numbers, exc):
                return
            raise
        run.ended = True
        run._log_first_response(row.get("first_response") if row else None)
        self.timing("run.finished", row["timing"] if row else None, **run.fields)

    async def retry(self, run: RunHandle, exc: Exception) -> None:
        with contextlib.suppress(Exception):  # the failed step's charges, before the failure
            await run.settle_charges()
        with contextlib.suppress(Exception):  # what it emitted stays, as without a batch
            await run.send_outputs()
        if run.lost:
            return
        delay = timedelta(seconds=min(2**run.attempt, 60))
        error = f"{type(exc).__name__}: {exc}"[:1000]  # what the database keeps of it
        numbers = run.next_seq()
        try:
            row = await self.db.call(
                run.lane,
                RETRY_RUN,
                {
                    "run_id": run.run_id,
                    "fence": run.fence,
                    "error": error,
                    "delay": delay,
                    **numbers,
                },
                orgs=(run.org_id,),
            )
        except psycopg.Error as db_exc:
            if self._refused(run, numbers, db_exc):
                return
            raise
        run.ended = True
        state = row["state"] if row else None
        log.get().warning(
            "run.attempt_failed", **run.fields, **log.error_fields(exc), **{"run.state": state}
        )
        if state in ("failed", "canceled"):  # canceled: it was stopped, never retried
            await self._log_terminal(run)

    async def _log_terminal(self, run: RunHandle) -> None:
        try:
            row = await self.db.call(
                run.lane, RUN_TIMING, {"run_id": run.run_id}, orgs=(run.org_id,)
            )
            self.timing("run.finished", row["timing"] if row else None)
        except Exception as exc:  # noqa: BLE001 - a timing read never fails anything
            log.get().warning("log.timing_failed", **run.fields, **log.error_fields(exc))

    async def release(self, run: RunHandle) -> None:
        with contextlib.suppress(Exception):  # the interrupted step's charges stay charged
            await run.settle_charges()
        with contextlib.suppress(Exception):  # and what it emitted stays written
            await run.send_outputs()
        if run.lost:
            return
        numbers = run.next_seq()
        try:
            row = await self.db.call(
                run.lane,
                RELEASE_RUN,
                {"run_id": run.run_id, "fence": run.fence, **numbers},
                orgs=(run.org_id,),
            )
            run.ended = True
            if row and row["released"] is False:  # it was stopped: closed canceled instead
                log.get().info("run.stopped", **run.fields, **{"lease.why": "shutdown"})
                await self._log_terminal(run)
            else:
                log.get().info("run.released", **run.fields, **{"run.reason": "shutdown"})
        except psycopg.Error as exc:
            if self._refused(run, numbers, exc):
                return
            log.get().warning("run.release_failed", **run.fields, **log.error_fields(exc))

    async def end_lost(self, run: RunHandle) -> None:
        """A run whose heartbeat or write was refused: either another owner has it (the
        lease is lost: nothing more is written) or it was stopped (runlane.cancel_run),
        and then its finish closes it canceled, freeing its computer. One finish call
        tells the two apart: the database accepts it only from the attempt that still
        owns the run, and refuses (RL001) every other. Its agent is stopped already.
        A run given up for its write numbers is left to its lease: a finish would be
        refused for its number too."""
        async with run.write_lock:  # a batch on the wire carries numbers before ours
            run.drop_outputs()
        if run.lost_why == "write_numbering":
            log.get().warning(
                "run.lease_lost",
                **{
                    "run.id": run.run_id,
                    "run.lane": run.lane,
                    "run.attempt": run.attempt,
                    "lease.why": run.lost_why,
                },
            )
            return
        numbers = run.next_seq()
        params = {
            "run_id": run.run_id,
            "fence": run.fence,
            "outcome": "canceled",
            "error": "canceled",
            "cost": run.cost,
            **numbers,
        }
        try:
            row = await self.db.call(run.lane, FINISH_RUN, params, orgs=(run.org_id,))
        except psycopg.Error as exc:
            run.give_back(numbers, exc)
            if exc.sqlstate == "RL001":
                log.get().warning(
                    "run.lease_lost",
                    **{
                        "run.id": run.run_id,
                        "run.lane": run.lane,
                        "run.attempt": run.attempt,
                        "lease.why": run.lost_why,
                    },
                )
            else:
                log.get().warning("run.stop_failed", **run.fields, **log.error_fields(exc))
            return
        log.get().info("run.stopped", **run.fields, **{"lease.why": run.lost_why})
        self.timing("run.finished", row["timing"] if row else None, **run.fields)


def _org_of_entry(entry: tuple[tuple[RunHandle, StepResult, asyncio.Future], int | None]) -> str:
    return entry[0][0].org_id
