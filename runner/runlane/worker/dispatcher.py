"""The lane dispatcher: when and how much one lane claims.

Guarantees:
- each lane has its own dispatcher loop and its own connection for claims only (a bare
  connection, not a pool: no bookkeeping on the path from a notification to its claim),
  so lanes never wait on each other and a claim never queues behind run work;
- a lane makes a pass at start, when woken (a notification naming it, the listener's
  (re)connect, the end of a run of an organization a claim cut at the max_per_org
  bound) and at least every scan_interval seconds (fast_scan_interval while
  notifications cannot be counted on, see scan_mode.py; admission_retry while memory
  admission is waiting); a wake-up
  during a pass only marks the lane for ONE more pass (an asyncio.Event), it never
  restarts the pass in progress; a failed pass is tried again after 0.5 s;
- a pass claims in bounded pages (claim_runs), each page admitted by memory first; a
  full page doubles the next page's size (up to claim_batch_max), a short one ends the
  pass (and, unless the max_per_org bound may have cut it, goes back to claim_batch;
  right after full or cut pages it also asks OrgBound for one more pass when the next run
  in flight ends: other claimers may have held the rest of a backlog);
  after max_pages full pages the lane is marked for one more pass;
- the claim connection carries this worker's max_per_org bound (runlane.max_per_org,
  read by claim_runs; work-conserving unless max_per_org_strict): the database decides
  which runs may start; under a strict bound each claim is reported to the worker's
  OrgBound (supervisor.py), which marks the lane for one more pass when a run of an
  organization the claim may have cut ended while it was on the wire (a work-conserving
  claim fills its page past the bound when nothing within its room waits: a short page
  is a drained queue);
- a claim whose connection broke is resent with the SAME claim key on a fresh connection
  (for up to half a lease), so a lost reply returns the runs it claimed instead of
  leaving them to their lease;
- when the listener loses its connection (connection_lost: a failover, a restart), the
  claim connection is presumed dead too and the next claim opens a fresh one instead of
  failing on it first; the waits between resends and after a failed pass end as soon as
  the listener is connected again (Database.pause), and its reconnect wakes every lane;
- runs a closed gate ended come back in the claim's reply: one that never started is
  logged run.skipped; one that started before (attempt > 0: the database closed it
  canceled with the gate's reason, as a finish) is logged run.finished with its timing row
  (run_timing, read off the claim path);
  each claimed run is handed to the supervisor; the page's messages are read in one
  run_messages_many call when the first of its runs asks for its messages, never when
  none does (a run missing from the read reads its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from .. import log
from ..admission import Admission, load_probe
from ..agents import Message
from .config import WorkerConfig
from .db import Database, by_organization, configure_connection, is_connection_error, pg_array
from .output_batcher import OutputBatcher
from .run_handle import RunHandle
from .scan_mode import ScanMode
from .supervisor import OrgBound

# Keyed: a claim resent with its key after a lost reply returns what it claimed. And
# reporting: the runs the claim ended skipped because a gate closed after they were
# queued (agent switched off or locked, no model, budget spent) come back as rows with
# skipped_reason set, after the claimed ones, for the run.skipped log line.
CLAIM = """
select * from runlane.claim_runs(
    p_worker => %(worker)s::text, p_lanes => %(lanes)s::text[],
    p_limit => %(limit)s::int, p_lease => %(lease)s::interval,
    p_claim_key => %(claim_key)s::uuid, p_report_skipped => true,
    p_handlers => %(handlers)s::text[])
"""
RUN_TIMING = "select runlane.run_timing(p_run_id => %(run_id)s::bigint) as timing"
# The claim connection's session: the per-worker organization bound claim_runs reads
# (runlane._max_per_org), work-conserving (it binds only while an organization within its
# room has runs waiting), and that each claim on it is a transaction of its own (the
# connection is in autocommit), so a claim that took nothing, holding row locks only,
# commits without waiting for its WAL flush (runlane._commit_empty_claim_without_flush).
CLAIM_SESSION = (
    "select set_config('runlane.max_per_org', %(bound)s::text, false), "
    "set_config('runlane.max_per_org_mode', 'work_conserving', false), "
    "set_config('runlane.autocommit_claims', 'on', false)"
)
# --max-per-org-strict: the bound binds always, a lone organization included.
STRICT_BOUND = "select set_config('runlane.max_per_org_mode', 'strict', false)"
# The batched read (sql/functions/runner): a claimed page's messages in one call.
RUN_MESSAGES_MANY = """
select run_id, message_id, body, created_at from runlane.run_messages_many(
    p_run_ids => %(run_ids)s::bigint[], p_fences => %(fences)s::bigint[])
"""
# The system memory probe reads five /proc and cgroup files (~0.1 ms, up to 0.4 ms on a
# busy machine). A reading younger than PROBE_TTL answers as it is; an older one still
# answers but is refreshed right after (while the claim it admitted is on the wire); one
# older than PROBE_MAX_AGE, or none, is read first.
PROBE_TTL = 0.1  # seconds
PROBE_MAX_AGE = 1.0  # seconds


def cached_probe(probe: Callable[[], Any], ttl: float, max_age: float) -> Callable[[], Any]:
    """`probe`, read at most every `ttl` seconds and never on the caller's path unless the
    reading in hand is older than `max_age` (call it on the running event loop)."""
    last: list[Any] = [0.0, None]
    scheduled = [False]

    def read() -> None:
        last[1] = probe()
        last[0] = time.monotonic()

    def refresh() -> None:
        scheduled[0] = False
        try:
            read()
        except Exception:  # noqa: BLE001 - the next reading is taken in line and reported
            last[0] = 0.0

    def cached() -> Any:
        age = time.monotonic() - last[0]
        if last[1] is None or age >= max_age:
            read()
        elif age >= ttl and not scheduled[0]:
            scheduled[0] = True
            asyncio.get_running_loop().call_soon(refresh)
        return last[1]

    return cached


def admission_for(config: WorkerConfig) -> Admission:
    """The worker's memory admission, shared by its lanes; the system's probe is read off
    the claim path (cached_probe), an injected one (--memory-probe) on every claim."""
    probe = load_probe(config.memory_probe)
    if not config.memory_probe:  # the system's: kept fresh off the claim path
        probe = cached_probe(probe, PROBE_TTL, PROBE_MAX_AGE)
    return Admission(probe, config.memory_buffer_mb * 1024 * 1024)


class PageMessages:
    """The messages of a claimed page's runs, read in one run_messages_many call when the
    first of them asks, shared by all of them (read(runs) returns {run_id: messages})."""

    def __init__(
        self,
        read: Callable[[list[RunHandle]], Any],
        runs: list[RunHandle],
        spawn: Callable[[Any], asyncio.Task],
    ):
        self._read = read
        self._runs: list[RunHandle] | None = runs
        self._spawn = spawn
        self._task: asyncio.Task | None = None

    def task(self) -> asyncio.Task:
        if self._task is None:
            runs, self._runs = self._runs or [], None
            self._task = self._spawn(self._read(runs))
        return self._task


class LaneDispatcher:
    """Scans and claims for one lane (see the module's docstring)."""

    def __init__(
        self,
        lane: str,
        config: WorkerConfig,
        database: Database,
        admission: Admission,
        start: Callable[[RunHandle], None],
        timing: Callable[..., None],
        spawn: Callable[[Any], asyncio.Task],
        bound: OrgBound | None = None,
        mode: ScanMode | None = None,
        outputs: OutputBatcher | None = None,
    ):
        self.lane = lane
        self.outputs = outputs  # the worker's output batches (None: each emit alone)
        self.mode = mode  # the worker's scan mode: fast while notifications fail
        self.bound = bound or OrgBound(0)  # the worker's runs in flight per organization
        self.config = config
        self.db = database
        self.admission = admission
        self._start = start  # hands a claimed run to the supervisor
        self.timing = timing
        self._spawn = spawn
        self.lease = timedelta(seconds=config.lease)
        self.wake = asyncio.Event()  # set: one more pass
        self.stopping = False
        self.passes = 0
        self.claim_queries = 0
        # Opened by the lane's first pass, reopened by the pass after it broke.
        self.claim_conn: psycopg.AsyncConnection[dict[str, Any]] | None = None
        self.claim_size = config.claim_batch
        self.backlog = False  # the last page was full or cut by the bound
        self.drop_claim_conn = False  # set by connection_lost: reopen before the next claim

    def connection_lost(self) -> None:
        """The listener's connection broke: this lane's claim connection, to the same
        server, is presumed dead; the next claim opens a fresh one (the connection is not
        closed here: a claim may be using it)."""
        self.drop_claim_conn = True

    def stop(self) -> None:
        """No new pass and no new page from now on; the loop returns."""
        self.stopping = True
        self.wake.set()

    async def close(self) -> None:
        if self.claim_conn is not None:
            await self.claim_conn.close()

    async def run(self) -> None:
        """The lane's loop: a pass at start, then one per wake-up, until stop()."""
        lane, event = self.lane, self.wake
        event.set()  # the startup pass
        ready = False
        loop = asyncio.get_running_loop()
        while not self.stopping:
            timeout = self.config.scan_interval
            if self.mode is not None:
                timeout = self.mode.interval(timeout)
            if self.admission.waiting:
                timeout = min(timeout, self.config.admission_retry)
            # The scan is a timer that sets the same event a notification sets (no task
            # per wait, as asyncio.wait_for would create).
            scan = loop.call_later(timeout, event.set)
            try:
                await event.wait()
            finally:
                scan.cancel()
            if self.stopping:
                return
            event.clear()  # notifications from now on mark exactly one more pass
            try:
                await self.pass_once()
                if not ready:
                    ready = True
                    log.get().info("dispatch.ready", **{"run.lane": lane})
            except Exception as exc:  # noqa: BLE001 - the dispatcher must keep going
                log.get().warning(
                    "dispatch.pass_failed", **{"run.lane": lane, **log.error_fields(exc)}
                )
                await self.db.pause(0.5)
                event.set()  # try the pass again rather than wait for the next scan

    async def pass_once(self) -> None:
        """Claims page after page until the queue is drained, admission declines, the
        worker stops or max_pages ran out (then the lane is marked for one more pass)."""
        lane = self.lane
        self.passes += 1
        for _page in range(self.config.max_pages):
            if self.stopping or not self.admission.admit(lane):
                return
            self.claim_queries += 1
            limit = self.claim_size
            near = self.bound.before_claim(limit)
            rows = await self.claim(limit)
            runs = []
            for row in rows:
                if row.get("skipped_reason") is None:
                    runs.append(RunHandle(row, self.db, self.timing, self.outputs))
                elif row["attempt"]:  # it ran before: the gate closed it canceled
                    self._spawn(self._log_gated_finish(row))
                else:  # a gate closed between queue and claim: ended skipped, not claimed
                    log.get().info(
                        "run.skipped",
                        **{
                            "run.id": row["run_id"],
                            "run.lane": row["lane"],
                            "run.trigger": row["trigger"],
                            "run.reason": row["skipped_reason"],
                        },
                    )
            if runs:
                # The page's messages: one read for all its runs, sent when the first of
                # them asks (after the agents' first steps have started), never when none
                # does (an agent working from its prompt alone).
                page = PageMessages(self._prefetch_messages, runs, self._spawn)
                for run in runs:
                    run.prefetch = page
                    self._start(run)
            cut, again = self.bound.after_claim(near, (run.org_id for run in runs))
            if again:
                self.wake.set()  # room left under the bound while the claim was sent
            if len(runs) < limit:
                if not cut:  # the queue is drained; one cut by the bound keeps its size
                    self.claim_size = self.config.claim_batch
                    if self.backlog:  # ... or other claimers held the rest: recheck once
                        self.bound.short_after_backlog()
                self.backlog = cut
                return
            # A full page: more is likely waiting, take bigger pages (fewer claims).
            self.backlog = True
            self.claim_size = min(limit * 2, self.config.claim_batch_max)
        self.wake.set()  # the page budget ran out with work left: one more pass

    async def _log_gated_finish(self, row: dict[str, Any]) -> None:
        """A run that started before, ended by a closed gate (claim_runs closed it canceled
        with the gate's reason): its run.finished timing line, as a finish logs it."""
        fields = {
            "run.id": row["run_id"],
            "run.lane": row["lane"],
            "run.trigger": row["trigger"],
            "run.attempt": row["attempt"],
            "run.reason": row["skipped_reason"],
        }
        try:
            timing = await self.db.call(
                self.lane, RUN_TIMING, {"run_id": row["run_id"]}, orgs=(row["org_id"],)
            )
            self.timing("run.finished", timing["timing"] if timing else None, **fields)
        except Exception as exc:  # noqa: BLE001 - a timing read never fails anything
            log.get().warning("log.timing_failed", **fields, **log.error_fields(exc))

    async def claim(self, limit: int) -> list[dict[str, Any]]:
        """One keyed claim_runs call on the lane's own connection. When the connection
        breaks (before or after the server committed the claim: the client cannot tell),
        it is reopened and the claim resent with the SAME key, which returns the runs the
        lost reply held instead of claiming others and leaving those to their lease; for
        up to half a lease, then the pass fails (the lane loop tries again shortly)."""
        lane = self.lane
        params = {
            "worker": self.config.worker_id,
            "lanes": [lane],
            "handlers": self.config.handlers,
            "limit": limit,
            "lease": self.lease,
            "claim_key": uuid.uuid4() if self.db.write_seqs else None,
        }
        deadline = time.monotonic() + self.config.lease / 2
        backoff = 0.05
        while True:
            conn = self.claim_conn
            if self.drop_claim_conn and conn is not None:
                self.drop_claim_conn = False
                self.claim_conn = None
                with contextlib.suppress(Exception):
                    await conn.close()
                conn = None
            try:
                if conn is None or conn.closed:
                    conn = self.claim_conn = await psycopg.AsyncConnection.connect(
                        self.config.dsn, row_factory=dict_row, **self.db.conn_kwargs
                    )
                    configure_connection(conn)
                    await conn.execute(
                        CLAIM_SESSION, {"bound": str(max(0, self.config.max_per_org))}
                    )
                    if self.config.max_per_org_strict:
                        await conn.execute(STRICT_BOUND)
                cur = await conn.execute(CLAIM, params)
                return await cur.fetchall()
            except psycopg.Error as exc:
                broken = is_connection_error(exc) or (conn is not None and conn.broken)
                if broken and conn is not None:
                    self.claim_conn = None
                    with contextlib.suppress(Exception):
                        await conn.close()
                if not broken or time.monotonic() + backoff > deadline or self.stopping:
                    raise
                log.get().info(
                    "dispatch.claim_resent", **{"run.lane": lane}, **log.error_fields(exc)
                )
                await self.db.pause(backoff)
                backoff = min(backoff * 2, 1.0)

    async def _prefetch_messages(self, runs: list[RunHandle]) -> dict[int, list[Message]]:
        """The messages of a claimed batch in one read; {} on any failure (each run then
        reads its own, as without the batch)."""
        if self.db.distributed and len({r.org_id for r in runs}) > 1:
            # (one read per organization, each on its node: see by_organization)
            groups = by_organization(runs, lambda run: run.org_id)
            found: dict[int, list[Message]] = {}
            for part in await asyncio.gather(*(self._prefetch_messages(g) for g in groups)):
                found.update(part)
            return found
        try:
            rows = await self.db.call(
                self.lane,
                RUN_MESSAGES_MANY,
                {
                    "run_ids": pg_array([r.run_id for r in runs]),
                    "fences": pg_array([r.fence for r in runs]),
                },
                fetch="all",
                retries=0,
                orgs={r.org_id for r in runs},
            )
        except Exception as exc:  # noqa: BLE001 - the per-run read is the fallback
            log.get().warning(
                "run.messages_prefetch_failed", **{"run.lane": self.lane}, **log.error_fields(exc)
            )
            return {}
        batch: dict[int, list[Message]] = {}
        for r in rows:
            batch.setdefault(r["run_id"], []).append(
                Message(r["message_id"], r["body"], r["created_at"])
            )
        return batch
