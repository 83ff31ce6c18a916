"""Streamed outputs, batched: the outputs every run of a lane emits within one window go
to the database together, in one runlane.append_outputs call (one commit).

A chat worker's main write is the reply itself. One commit per output would make a
worker streaming S replies commit S times per token interval, and notifying commits
queue behind one cluster-wide lock; one commit per window carries them all.

Guarantees:
- `ctx.emit` queues the output on its run (RunHandle) and returns; the lane's next batch
  carries it. A batch starts `output_window` seconds after the last one started, while
  outputs wait, and never while another of the lane's batches is still on the wire: a
  worker commits its lane's outputs at most 1/window times a second, and under load each
  commit simply carries more;
- an attempt's first visible output never waits for a window: it starts a batch at once
  (it stamps the run's first response), whatever else is on the wire;
- a run's outputs go in emit order and are numbered when the batch is made, under the
  run's write lock (a run is in at most one batch at a time; its other numbered writes
  wait for that batch and first send what is still queued), so the database sees each
  attempt's numbers in order;
- each run of a batch is fenced, numbered and refused alone (append_outputs): a run
  fenced out or stopped is lost at once (its agent stops); a run refused otherwise keeps
  the refusal, which its next emit or step end raises; the batch's other runs are written;
- a batch whose reply was lost is resent with the same numbers (Database.call): the
  database answers it as applied and writes nothing twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import psycopg

from .db import Database, by_organization, pg_array

if TYPE_CHECKING:
    from .run_handle import RunHandle

APPEND_OUTPUTS = """
select run_id, outcome, first_response, sqlstate, column_name, message
from runlane.append_outputs(
    p_run_ids => %(run_ids)s::bigint[], p_fences => %(fences)s::bigint[],
    p_seqs => %(seqs)s::bigint[], p_kinds => %(kinds)s::text[], p_bodies => %(bodies)s::text[])
"""


def batch_params(batch: list[tuple[RunHandle, list[tuple[str, str]], int]]) -> dict[str, str]:
    """append_outputs' arrays for (run, outputs, first write number) triples."""
    params: dict[str, list[Any]] = {
        "run_ids": [],
        "fences": [],
        "seqs": [],
        "kinds": [],
        "bodies": [],
    }
    for run, outputs, first in batch:
        for i, (kind, body) in enumerate(outputs):
            params["run_ids"].append(run.run_id)
            params["fences"].append(run.fence)
            params["seqs"].append(first + i)
            params["kinds"].append(kind)
            params["bodies"].append(body)
    return {k: pg_array(v) for k, v in params.items()}


class _Lane:
    def __init__(self) -> None:
        self.waiting: dict[int, RunHandle] = {}  # runs with queued outputs, in order
        self.timer: asyncio.TimerHandle | None = None
        self.on_wire = 0  # the lane's window batches being sent
        self.started = 0.0  # when the last window batch started (monotonic)
        self.urgent = False  # a batch is due at once (a first visible output)


class OutputBatcher:
    """Collects the runs' queued outputs per lane and sends them in batches (see the
    module's docstring); one per worker."""

    def __init__(
        self,
        database: Database,
        lanes: list[str],
        window: float,
        spawn: Callable[[Any], asyncio.Task],
    ):
        self.db = database
        self.window = window
        self._spawn = spawn
        self.lanes = {lane: _Lane() for lane in lanes}

    def queued(self, run: RunHandle, urgent: bool) -> None:
        """`run` has outputs waiting; `urgent`: one of them is its first visible output."""
        lane = self.lanes[run.lane]
        lane.waiting.setdefault(run.run_id, run)
        if urgent and not lane.urgent:
            lane.urgent = True
            asyncio.get_running_loop().call_soon(self._start, run.lane, True)
        self._schedule(run.lane)

    def _schedule(self, name: str) -> None:
        lane = self.lanes[name]
        if lane.timer is not None or lane.on_wire or not lane.waiting:
            return
        delay = max(0.0, lane.started + self.window - time.monotonic())
        lane.timer = asyncio.get_running_loop().call_later(delay, self._start, name, False)

    def _start(self, name: str, urgent: bool) -> None:
        lane = self.lanes[name]
        if urgent:
            lane.urgent = False
        else:
            lane.timer = None
            lane.on_wire += 1
            lane.started = time.monotonic()
        self._spawn(self._send(name, urgent))

    async def _send(self, name: str, urgent: bool) -> None:
        lane = self.lanes[name]
        taken: list[tuple[RunHandle, list[tuple[str, str]], int]] = []
        try:
            for run in list(lane.waiting.values()):
                if run.lost:  # nothing more is written for a lost run
                    lane.waiting.pop(run.run_id, None)
                    run.drop_outputs()
                    continue
                if run.write_lock.locked():  # in a batch, or its own write sends them
                    continue
                lane.waiting.pop(run.run_id, None)
                await run.write_lock.acquire()  # free: returns without suspending
                entry = run.numbered_outputs()
                if entry is None:
                    run.write_lock.release()
                    continue
                taken.append(entry)
            if taken:
                await send_outputs(self.db, name, taken)
        finally:
            for run, _, _ in taken:
                run.write_lock.release()
            if not urgent:
                lane.on_wire -= 1
            self._schedule(name)


async def send_outputs(
    db: Database, lane: str, batch: list[tuple[RunHandle, list[tuple[str, str]], int]]
) -> None:
    """One append_outputs call for `batch` (its runs' write locks held by the caller);
    each run then learns its own outcome (RunHandle.outputs_answered)."""
    if db.distributed and len({run.org_id for run, _, _ in batch}) > 1:
        # (one call per organization, each on its node: see by_organization)
        groups = by_organization(batch, lambda entry: entry[0].org_id)
        await asyncio.gather(*(send_outputs(db, lane, group) for group in groups))
        return
    rows: list[dict[str, Any]] = []
    failure: psycopg.Error | None = None
    try:
        rows = await db.call(
            lane,
            APPEND_OUTPUTS,
            batch_params(batch),
            fetch="all",
            orgs={run.org_id for run, _, _ in batch},
        )
    except psycopg.Error as exc:  # the whole call: every run keeps the error
        failure = exc
    by_run = {row["run_id"]: row for row in rows}
    for run, outputs, first in batch:
        numbers: dict[str, int | None] = {"seq": first, "last_seq": first + len(outputs) - 1}
        if failure is not None:
            run.outputs_failed(numbers, failure)
        else:
            run.outputs_answered(numbers, by_run.get(run.run_id))
