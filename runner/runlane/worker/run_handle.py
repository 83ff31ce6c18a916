"""One claimed run as its agent sees it (the RunContext): every read and write of the
run goes through here, carrying the run's fence.

Guarantees:
- every write carries the attempt's fence; one refused with RL001 (another owner, or the
  run was stopped) marks the run lost, stops its agent task and raises LeaseLost, and
  every later write is refused here without a round trip;
- numbered writes (migration 0004) take the attempt's next sequence numbers and are sent
  in number order under the run's write lock, even when an agent writes concurrently; a
  resend keeps its numbers, so the database applies a write whose reply was lost once;
  a write the database refused (it raised: nothing applied) gives its numbers back to the
  next write (`give_back`), since the database refuses a number that skips ahead;
- a write refused for its number (22023 on column write_seq: the attempt's numbering and
  the database's no longer agree) gives the run up like a lost lease (`lose`, why
  `write_numbering`): its agent stops, nothing more is written, and its lease decides;
- `emit` queues the output on the run and returns: the worker's OutputBatcher sends the
  outputs of all its runs together, one commit per window (output_batcher.py), and the
  attempt's first visible output at once; each output is one row, as when written
  alone. A refusal of queued outputs is raised by the next emit or the step's end; an
  unknown kind or a body that is no text is refused by emit itself. Every other numbered
  write of the run first sends what is queued (a checkpoint, a step's end and the
  finish take it along in their own statement);
- a step's outputs and checkpoint go as ONE statement (one round trip, one commit);
- the run's messages are read once per attempt (from the claimed page's batch read when
  it has them), and steering taken adds to that copy;
- `charge()` records spend at once without blocking the step, one call at a time in
  order; `settle_charges()` waits for them and raises the first refusal.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import psycopg

from ..agents import HIDDEN_KINDS, UNCHANGED, VISIBLE_KINDS, LeaseLost, Message, StepResult, Turn
from .db import Database, is_resendable
from .output_batcher import OutputBatcher, send_outputs

OUTPUT_KINDS = VISIBLE_KINDS | HIDDEN_KINDS
# An agent that emits faster than its batches commit waits once this much is queued.
QUEUED_BYTES = 1 << 20

APPEND_OUTPUT = """
select runlane.append_output(
    p_run_id => %(run_id)s::bigint, p_fence => %(fence)s::bigint,
    p_kind => %(kind)s::text, p_body => %(body)s::text, p_seq => %(seq)s::bigint) as timing
"""
TAKE_STEERING = """
select message_id, body, created_at from runlane.take_steering(
    p_run_id => %(run_id)s::bigint, p_fence => %(fence)s::bigint, p_seq => %(seq)s::bigint)
"""
RUN_MESSAGES = """
select message_id, body, created_at from runlane.run_messages(
    p_run_id => %(run_id)s::bigint, p_fence => %(fence)s::bigint)
"""
THREAD_HISTORY = """
select run_id, role, body, created_at from runlane.thread_history(
    p_run_id => %(run_id)s::bigint, p_fence => %(fence)s::bigint, p_limit => %(limit)s::int)
"""
# A step's end as ONE statement (one round trip, one commit, no pipeline bookkeeping):
# its outputs in order, then the finish or the checkpoint. The order is data flow, not
# luck: the outer row (and with it the last call) exists only once the aggregate has
# read every output row, each written when its unnest row was produced. Each call has its
# own write sequence number (outputs seq, seq + 1, …, the last call last_seq), in that
# same order; the statement is one transaction, so a resend finds all of them applied or
# none.
STEP_OUTPUTS = """
with o as materialized (
    select u.ord, runlane.append_output(
        p_run_id => %(run_id)s::bigint, p_fence => %(fence)s::bigint,
        p_kind => u.kind, p_body => u.body,
        p_seq => %(seq)s::bigint + u.ord - 1) as timing
    from unnest(%(kinds)s::text[], %(bodies)s::text[]) with ordinality as u (kind, body, ord)
),
written as (
    select (array_agg(o.timing order by o.ord) filter (where o.timing is not null))[1]
        as first_response
    from o
)
"""
CHECKPOINT_WITH_OUTPUTS = (
    STEP_OUTPUTS
    + """
select w.first_response, runlane.save_checkpoint(
    p_run_id => %(run_id)s::bigint, p_fence => %(fence)s::bigint,
    p_checkpoint => %(checkpoint)s::jsonb, p_seq => %(last_seq)s::bigint)::text as saved
from written as w
"""
)
# Spend is recorded the moment an agent charges it (its own commit), so a failed,
# retried or reaped attempt keeps what it spent in the owner's weekly budget.
CHARGE = """
select runlane.charge(
    p_run_id => %(run_id)s::bigint, p_fence => %(fence)s::bigint,
    p_amount => %(amount)s::numeric, p_seq => %(seq)s::bigint) as total
"""


def check_output(kind: Any, body: Any) -> None:
    """An output the runner sends later (queued by emit, or a step's result) is refused
    when it is made, as a failed step, rather than when its batch reaches the database,
    which refuses the same (runlane.append_output's kinds)."""
    if kind not in OUTPUT_KINDS or not isinstance(body, str):
        raise ValueError(f"an output needs a known kind and a text body, not {kind!r}")


def refused_unapplied(exc: BaseException) -> bool:
    """The database raised this error for the statement and rolled it back: nothing of it
    was applied (a refusal the worker does not resend; a resent statement is answered as
    applied before anything else is checked, so this holds after a resend too)."""
    return isinstance(exc, psycopg.Error) and exc.sqlstate is not None and not is_resendable(exc)


def numbering_refused(exc: BaseException) -> bool:
    """The database refused a write for its sequence number (runlane._refuse_write_number):
    one that skips ahead, or an end whose number another write took."""
    return (
        isinstance(exc, psycopg.Error)
        and exc.sqlstate == "22023"
        and exc.diag.column_name == "write_seq"
    )


def outputs_params(outputs: tuple[tuple[str, str], ...]) -> dict[str, list[str]]:
    return {"kinds": [kind for kind, _ in outputs], "bodies": [body for _, body in outputs]}


class RunHandle:
    """One claimed run: the context its agent sees, and the fence every write carries."""

    def __init__(
        self,
        row: dict[str, Any],
        database: Database,
        timing: Callable[..., None],
        outputs: OutputBatcher | None = None,
    ):
        self._db = database
        # None: each emit is its own append_output call (embedded tests, old schemas)
        self._batcher = outputs
        self._timing = timing
        self.run_id: int = row["run_id"]
        self.fence: int = row["fence"]
        self.attempt: int = row["attempt"]
        self.lane: str = row["lane"]
        self.trigger: str = row["trigger"]
        self.agent_id: str = row["agent_id"]
        # the code that runs the agent (agents.handler; the worker's --agent NAME=...)
        self.handler: str = row.get("handler") or "default"
        self.org_id: str = row["org_id"]
        self.thread_id: str | None = row["thread_id"]
        self.prompt: str = row["prompt"] or ""
        self.model: str | None = row["model"]
        self.late_notice: dict[str, Any] | None = row["late_notice"]
        self.iteration_cap: int = row["iteration_cap"] or 20
        self.row_timing: Any = row.get("timing")
        saved = row["checkpoint"] if isinstance(row["checkpoint"], dict) else {}
        # The runner wraps the agent's state with its own bookkeeping, so iteration and
        # cost survive a resume on another worker.
        self.checkpoint: Any = saved.get("state")
        self.iteration: int = int(saved.get("iteration", 0))
        # Cost an older runner carried in the checkpoint, not yet charged: passed with
        # the finish. ctx.charge() records its amounts at once and never adds here.
        self.cost: float = float(saved.get("cost", 0))
        self._unsent: list[Any] = []  # charges not yet sent, in order
        self._charging: asyncio.Task | None = None  # sends them, one call at a time
        self._messages: list[Message] | None = None  # read once per attempt
        # The claimed page's messages (dispatcher.PageMessages): one read for the page,
        # sent when the first of its runs asks.
        self.prefetch: Any = None
        self.lost = False
        self.lost_why = ""
        # The attempt's end (finish, retry, release) was accepted: a heartbeat refused from
        # then on (the run is no longer running) is that end, not a lost lease.
        self.ended = False
        self.releasing = False
        self.agent_task: asyncio.Task | None = None
        self.supervisor: asyncio.Task | None = None
        # The attempt's write sequence: every write gets the next numbers, kept when
        # Database.call resends it, so the database applies a write whose reply was lost once.
        # The agent's numbered writes go one at a time, in number order (_call).
        self._seq = 0
        self.write_lock = asyncio.Lock()
        self._first_response_logged = False
        # Outputs emitted and not yet sent (OutputBatcher), their size, whether a visible
        # one was queued this attempt, and a refusal of queued outputs not yet raised.
        self._queued: list[tuple[str, str]] = []
        self._queued_bytes = 0
        self._visible_queued = False
        self._refusal: Exception | None = None

    @property
    def _key(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "fence": self.fence}

    def next_seq(self, count: int = 1) -> dict[str, int | None]:
        """Numbers for the next write (`count` calls in one statement): seq .. last_seq
        (None before migration 0004: not deduplicated)."""
        if not self._db.write_seqs:
            return {"seq": None, "last_seq": None}
        first = self._seq + 1
        self._seq += count
        return {"seq": first, "last_seq": self._seq}

    def give_back(self, numbers: dict[str, int | None], exc: BaseException) -> None:
        """A numbered write the database refused (refused_unapplied) leaves its numbers
        unused: the next write takes them again, unless a later number was taken since."""
        if refused_unapplied(exc):
            self.unused(numbers)

    def unused(self, numbers: dict[str, int | None]) -> None:
        """Numbers of a write known not to be applied: the next write takes them again,
        unless a later number was taken since."""
        if numbers["seq"] is not None and self._seq == numbers["last_seq"]:
            self._seq = numbers["seq"] - 1

    def lose(self, why: str) -> None:
        """Ownership is gone, or the run was stopped (runlane.cancel_run: the database
        refuses its writes and heartbeats the same way): stop the agent now; every later
        write is refused locally. The supervisor then tries to finish it canceled, which
        only a stopped run still owned by this attempt accepts (Finisher.end_lost)."""
        if self.lost:
            return
        self.lost = True
        self.lost_why = why
        task = self.agent_task
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()

    async def _call(
        self,
        sql: str,
        params: dict[str, Any],
        fetch: str = "one",
        seqs: int = 0,
        outputs: tuple[tuple[str, str], ...] | None = None,
    ) -> Any:
        """One statement for this run. `seqs` > 0: a numbered write of that many calls; its
        numbers are taken and the statement sent under the run's write lock, so numbered
        writes reach the database in number order even when an agent writes concurrently
        (a number below one already applied would be taken for a resend and dropped).
        Queued outputs go first: as `outputs` of the statement itself when it writes
        outputs (kinds, bodies; one number each), else in a call of their own."""
        if self.lost:
            raise LeaseLost(f"run {self.run_id} is owned by another worker now")
        if seqs:
            async with self.write_lock:
                if outputs is not None:
                    outputs = (*self.take_outputs(), *outputs)
                    params = {**params, **outputs_params(outputs)}
                    seqs += len(outputs)
                else:
                    await self._send_queued()
                    self._raise_refusal()
                numbers = self.next_seq(seqs)
                try:
                    return await self._call(sql, {**params, **numbers}, fetch)
                except LeaseLost:  # refused (RL001, its number) or never sent: unused
                    self.unused(numbers)
                    raise
                except psycopg.Error as exc:
                    self.give_back(numbers, exc)
                    raise
        try:
            return await self._db.call(
                self.lane, sql, {**self._key, **params}, fetch, orgs=(self.org_id,)
            )
        except psycopg.Error as exc:
            if exc.sqlstate == "RL001":
                self.lose("fenced_out")
                raise LeaseLost(f"run {self.run_id} is owned by another worker now") from None
            if numbering_refused(exc):
                self.lose("write_numbering")
                raise LeaseLost(f"run {self.run_id}: a write was refused for its number") from None
            raise

    # -- queued outputs (OutputBatcher) ------------------------------------------------
    def take_outputs(self) -> list[tuple[str, str]]:
        """The queued outputs, in emit order (one row each); the queue is empty afterwards."""
        outputs, self._queued = self._queued, []
        self._queued_bytes = 0
        return outputs

    def drop_outputs(self) -> None:
        self.take_outputs()

    def numbered_outputs(self) -> tuple[RunHandle, list[tuple[str, str]], int] | None:
        """The queued outputs taken and numbered for one append_outputs call, as a batch
        entry (run, outputs, first write number); None when nothing is queued. The caller
        holds the write lock until the call is answered."""
        outputs = self.take_outputs()
        if not outputs:
            return None
        first = self.next_seq(len(outputs))["seq"]
        assert first is not None, "batches need numbered writes (migration 0004)"
        return (self, outputs, first)

    async def _send_queued(self) -> None:
        """Sends the queued outputs now, alone (the caller holds the write lock)."""
        entry = self.numbered_outputs()
        if entry is not None:
            await send_outputs(self._db, self.lane, [entry])

    async def send_outputs(self) -> None:
        """Waits until every output emitted so far is written; raises a refusal of them."""
        if self._batcher is None or self.lost:
            return
        async with self.write_lock:
            await self._send_queued()
        self._raise_refusal()

    async def end_outputs(
        self, outputs: tuple[tuple[str, str], ...]
    ) -> tuple[tuple[str, str], ...]:
        """The attempt's last outputs: what is still queued, then `outputs` (the finish
        writes them). Waits for a batch on the wire; raises a refusal of queued outputs."""
        if self._batcher is None:
            return outputs
        async with self.write_lock:
            queued = tuple(self.take_outputs())
        self._raise_refusal()
        return (*queued, *outputs)

    def _raise_refusal(self) -> None:
        refusal, self._refusal = self._refusal, None
        if refusal is not None:
            raise refusal

    def outputs_failed(self, numbers: dict[str, int | None], exc: psycopg.Error) -> None:
        """A call carrying queued outputs failed as a whole (after its resends)."""
        self.give_back(numbers, exc)
        self._refusal = self._refusal or exc

    def outputs_answered(self, numbers: dict[str, int | None], row: dict[str, Any] | None) -> None:
        """append_outputs' answer for this run: applied (or a resend answered as applied),
        or refused: a refusal that loses the run stops it, any other is kept for the next
        emit or step end to raise."""
        if row is None:
            self._refusal = self._refusal or LookupError(
                f"append_outputs gave no answer for run {self.run_id}"
            )
            return
        if row["outcome"] != "refused":
            self._log_first_response(row["first_response"])
            return
        self.unused(numbers)
        if row["sqlstate"] == "RL001":
            self.lose("fenced_out")
        elif row["sqlstate"] == "22023" and row["column_name"] == "write_seq":
            self.lose("write_numbering")
        else:
            error = psycopg.errors.lookup(row["sqlstate"]) if row["sqlstate"] else None
            self._refusal = self._refusal or (error or psycopg.DatabaseError)(row["message"])

    # -- the agent's context ---------------------------------------------------------
    async def emit(self, kind: str, body: str) -> None:
        if self.lost:
            raise LeaseLost(f"run {self.run_id} is owned by another worker now")
        if self._batcher is None or not self._db.write_seqs:
            row = await self._call(APPEND_OUTPUT, {"kind": kind, "body": body}, seqs=1)
            self._log_first_response(row and row["timing"])
            return
        self._raise_refusal()
        check_output(kind, body)
        self._queued.append((kind, body))
        self._queued_bytes += len(body)
        first_visible = kind in VISIBLE_KINDS and not self._visible_queued
        self._visible_queued = self._visible_queued or first_visible
        self._batcher.queued(self, first_visible)
        if self._queued_bytes >= QUEUED_BYTES:
            await self.send_outputs()

    async def save_checkpoint(self, data: Any) -> None:
        wrapped = {"iteration": self.iteration + 1, "cost": self.cost, "state": data}
        # (with the outputs still queued, in the same statement: one commit, not two)
        row = await self._call(
            CHECKPOINT_WITH_OUTPUTS, {"checkpoint": json.dumps(wrapped)}, seqs=1, outputs=()
        )
        self.checkpoint = data
        self._log_first_response(row and row["first_response"])

    async def take_steering(self) -> list[Message]:
        # A resent take (its reply was lost) answers with every attached message: what
        # this attempt already knows is dropped, the rest is what the lost reply held.
        known_messages = await self.messages()
        rows = await self._call(TAKE_STEERING, {}, fetch="all", seqs=1)
        known = {m.message_id for m in known_messages}
        taken = [
            Message(r["message_id"], r["body"], r["created_at"])
            for r in rows
            if r["message_id"] not in known
        ]
        if taken:
            # Attached messages change only by this owner's take_steering: keep the copy.
            self._messages = sorted([*known_messages, *taken], key=lambda m: m.message_id)
        return taken

    async def messages(self) -> list[Message]:
        if self._messages is None and self.prefetch is not None:
            prefetch, self.prefetch = self.prefetch, None
            # Shielded: this run's cancellation must not cancel its neighbours' read.
            batch = await asyncio.shield(prefetch.task())
            if self.run_id in batch:  # else fenced out or no messages: ask alone
                self._messages = batch[self.run_id]
        if self._messages is None:
            rows = await self._call(RUN_MESSAGES, {}, fetch="all")
            self._messages = [Message(r["message_id"], r["body"], r["created_at"]) for r in rows]
        return list(self._messages)

    async def history(self, limit: int = 20) -> list[Turn]:
        """The thread's earlier turns (runlane.thread_history): read on each call."""
        rows = await self._call(THREAD_HISTORY, {"limit": limit}, fetch="all")
        return [Turn(r["run_id"], r["role"], r["body"], r["created_at"]) for r in rows]

    async def end_step(self, result: StepResult) -> None:
        """A step that continues: its outputs and checkpoint in one statement (with the
        outputs still queued first), or, with no checkpoint, its outputs queued."""
        self._raise_refusal()
        if result.checkpoint is UNCHANGED:
            for kind, body in result.outputs:
                await self.emit(kind, body)
            return
        # self.iteration already counts the step that just ended.
        wrapped = {"iteration": self.iteration, "cost": self.cost, "state": result.checkpoint}
        row = await self._call(
            CHECKPOINT_WITH_OUTPUTS,
            {"checkpoint": json.dumps(wrapped)},
            seqs=1,
            outputs=tuple(result.outputs),
        )
        self.checkpoint = result.checkpoint
        self._log_first_response(row and row["first_response"])

    def _log_first_response(self, timing: Any) -> None:
        """Logs run.first_response once per attempt: the reply of the write that stamped it
        carries the row, and so does a resend of a write of that attempt after a lost
        reply (runlane._resent_first_response), which may come after the first was seen."""
        if timing and not self._first_response_logged:
            self._first_response_logged = True
            self._timing("run.first_response", timing)

    def charge(self, cost: float) -> None:
        """Records `cost` at once (runlane.charge, its own commit) without blocking the
        step; the step's end, a retry and a release wait for it (settle_charges), and a
        refused amount fails the step. A run's charges go one call at a time, in order,
        so an agent charging in a loop holds one pool connection, not the lane's pool."""
        if cost == 0:
            return
        self._unsent.append(cost)
        if self._charging is None:
            self._charging = asyncio.ensure_future(self._send_charges())
            self._charging.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _send_charges(self) -> None:
        refused: Exception | None = None
        try:
            while self._unsent:  # no await between the last check and the end
                amount = self._unsent.pop(0)
                try:
                    await self._call(CHARGE, {"amount": amount}, seqs=1)
                except psycopg.Error as exc:  # this charge refused: the others still go
                    refused = refused or exc
        finally:
            self._charging = None
        if refused is not None:
            raise refused

    async def settle_charges(self) -> None:
        """Waits until every charge made so far is recorded; raises the first refusal."""
        if self._charging is not None:
            await self._charging

    @property
    def fields(self) -> dict[str, Any]:
        return {
            "run.id": self.run_id,
            "run.lane": self.lane,
            "run.trigger": self.trigger,
            "run.attempt": self.attempt,
            "run.fence": self.fence,
        }
