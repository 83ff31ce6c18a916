"""Maintenance passes, run by exactly one leader at a time.

Leadership is a lease, the row of `runlane.leader`, won and renewed with
`runlane.lead_maintenance(worker, ttl)`: won when it is free or has lapsed, renewed only by
its holder. No session or advisory lock is involved, so a leader that is paused (SIGSTOP,
a stalled VM) keeps nothing: its lease lapses `leader_ttl` seconds after its last renewal
and a follower, trying every `leader_retry` seconds, takes over. Recovery therefore
resumes at most `leader_ttl + leader_retry` seconds after the leader stopped renewing
(its first pass starts at once). A leader renews at the start of every pass and again
before any step once half the ttl has passed since its last renewal (measured on its
monotonic clock, which counts a pause), so a leader that was paused past its lease finds
out before its next step and runs no step after losing it: it logs
`maintenance.leader_lost` and follows. A stopping worker hands its lease back
(`runlane.resign_maintenance`). The lease lasts at most 60 s (the database refuses a
longer one), so a holder that stops renewing holds maintenance up for at most that long.
A follower that finds the lease's holder silent (no renewal for more than half its lease,
or the lease lapsed: `runlane.lead_maintenance_with_holder` names the holder) logs one
`maintenance.leader_silent` per silence (the holder's worker id, seconds since its
renewal, its lease, whether it lapsed) and takes the lease over once it lapsed. Each pass:
  1. `tick()` (commits new timer runs and advanced schedules), logging routine.fired,
     routine.coalesced and run.skipped;
  2. publication: `publish_run()` for each run the tick created, each in its own
     transaction; a failure is logged and loses nothing (the dispatchers' scan recovers);
  3. `reap_stale()`, then `cancel_redundant_timer_runs()` and `drain_legacy_deliveries()`;
  4. the NOTIFY queue: `notify.queue_usage` (a warning, once per pass) while
     `runlane.notify_queue_usage()` is at least `notify_queue_warn` (0.25 by default;
     runlane stops sending notifications at 0.5, see sql/functions/notify/_notify.sql),
     naming the backends most likely holding it (`notify.holders`: pid, login,
     application, database, state, wait event, transaction age in seconds; from
     `runlane.notify_queue_holders()`, never a query's text);
  5. retention, only when configured (`--retention`): `purge_finished(retention)` in
     batches of `purge_batch` runs while a batch comes back full (at most
     `purge_batches` per pass, each its own transaction), then the claim receipts of
     workers silent for the whole window (`purge_stale_claim_receipts`, batched the same
     way), those workers' registry rows (`purge_gone_workers`) and one window of
     `purge_batch` chat threads, swept in key order across passes, whose lock rows are
     all that is left of them (`purge_empty_threads`); logging
     `maintenance.purged` when anything was deleted;
and every `queue_delay_interval` seconds `queue_delay()`: `run.queue_delayed` while
interactive runs wait too long, one `run.queue_recovered` when they no longer do.
None of this runs on a dispatcher's connection, so it never blocks dispatch. The
maintenance functions lock the rows they change, so even two passes at once (a leader's
step already running on the server when it was paused) change nothing twice.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from . import eventloop, log

TICK = "select event, run_id, occurrence from runlane.tick()"
PUBLISH = "select runlane.publish_run(p_run_id => %(run_id)s::bigint)"
REAP = "select run_id, state, reason from runlane.reap_stale()"
CANCEL_REDUNDANT = "select runlane.cancel_redundant_timer_runs() as cancelled"
DRAIN_LEGACY = "select runlane.drain_legacy_deliveries() as drained"
QUEUE_DELAY = """
select delayed_runs, oldest_wait_ms
from runlane.queue_delay(p_threshold => %(threshold)s::interval)
"""
RUN_TIMING = "select runlane.run_timing(p_run_id => %(run_id)s::bigint) as timing"
LEAD = """
select won, holder, holder_silent_ms, holder_ttl_ms, holder_lapsed
from runlane.lead_maintenance_with_holder(p_worker => %(leader)s::text, p_ttl => %(ttl)s::interval)
"""
# The longest leader lease the database grants (runlane.lead_maintenance).
LEADER_TTL_MAX = 60.0
RESIGN = "select runlane.resign_maintenance(p_worker => %(leader)s::text) as resigned"
NOTIFY_USAGE = "select runlane.notify_queue_usage() as usage"
# The backends most likely holding the queue back (never their query text).
NOTIFY_HOLDERS = """
select pid, login, application, database, state, wait_event, xact_age_s
from runlane.notify_queue_holders(p_limit => 3)
"""


def holder_fields(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """notify_queue_holders rows as logged (the transaction age to 0.1 s)."""
    return [
        {k: (round(v, 1) if k == "xact_age_s" and v is not None else v) for k, v in row.items()}
        for row in rows
    ]


PURGE = """
select runlane.purge_finished(p_older_than => %(window)s::interval, p_limit => %(limit)s::int)
    as purged
"""
PURGE_RECEIPTS = """
select runlane.purge_stale_claim_receipts(
    p_older_than => %(window)s::interval, p_limit => %(limit)s::int) as purged
"""
PURGE_WORKERS = """
select runlane.purge_gone_workers(
    p_older_than => %(window)s::interval, p_limit => %(limit)s::int) as purged
"""
PURGE_THREADS = """
select purged, last_agent_id, last_thread_id from runlane.purge_empty_threads(
    p_after_agent_id => %(agent)s::text, p_after_thread_id => %(thread)s::text,
    p_limit => %(limit)s::int)
"""


@dataclass
class MaintenanceConfig:
    tick_interval: float = 5.0
    queue_delay_interval: float = 30.0
    queue_delay_threshold: float = 30.0
    leader_retry: float = 3.0
    # Seconds a leader's lease lasts without renewal (1-60); None: three tick intervals
    # (at least 1 s, at most 60), so a lost leader is replaced within a few passes.
    leader_ttl: float | None = None
    notify_queue_warn: float = 0.25  # log notify.queue_usage from this fraction on
    # Delete runs finished longer ago than this (at least 8 days); None: delete nothing.
    retention: timedelta | None = None
    purge_batch: int = 1000  # runs per purge_finished call (1-10000)
    purge_batches: int = 20  # calls per pass at most; the rest waits for the next pass

    def __post_init__(self) -> None:
        if self.leader_ttl is None:
            self.leader_ttl = min(max(3 * self.tick_interval, 1.0), LEADER_TTL_MAX)
        if not 1.0 <= self.leader_ttl <= LEADER_TTL_MAX:
            raise ValueError("leader_ttl must be between 1 and 60 seconds")
        if self.retention is not None and self.retention < timedelta(days=8):
            raise ValueError("retention must be at least 8 days, so weekly budgets stay exact")
        if not 1 <= self.purge_batch <= 10000 or self.purge_batches < 1:
            raise ValueError("purge_batch must be between 1 and 10000, purge_batches at least 1")
        if self.leader_ttl <= self.tick_interval:
            raise ValueError(
                "leader_ttl must be longer than tick_interval: "
                "the leader renews its lease once per pass"
            )

    @property
    def lease_ttl(self) -> float:
        """leader_ttl as __post_init__ settles it: never None once the config exists."""
        if self.leader_ttl is None:
            raise ValueError("leader_ttl is unset: MaintenanceConfig.__post_init__ did not run")
        return self.leader_ttl


def _when(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


class Maintenance:
    def __init__(
        self,
        dsn: str,
        config: MaintenanceConfig,
        application_name: str,
        leader_id: str | None = None,
        connect_kwargs: dict[str, Any] | None = None,
    ):
        self.dsn = dsn
        # The worker's connection settings (autocommit, prepare_threshold), not its name.
        self.connect_kwargs = {
            k: v
            for k, v in (connect_kwargs or {}).items()
            if k not in ("autocommit", "application_name")
        }
        self.config = config
        self.application_name = f"{application_name}:maintenance"[:63]
        # Unique per process even when two workers are started with one --worker-id.
        self.leader_id = leader_id or f"{application_name}/{uuid.uuid4().hex[:8]}"[:200]
        self.delayed = False
        self.next_queue_check = 0.0
        self.leading = False
        self.renewed_at = 0.0  # monotonic time the last successful renewal was sent
        self.silent_holder: str | None = None  # the holder whose silence was logged
        # Where the sweep of empty chat threads goes on (purge_empty_threads' last key;
        # None: from the first thread).
        self.threads_after: tuple[str | None, str | None] = (None, None)

    async def renew(self, conn: psycopg.AsyncConnection) -> bool:
        """Win or renew the lease; logs maintenance.leader_acquired / leader_lost on change."""
        sent = time.monotonic()
        row = (
            await self._rows(
                conn,
                LEAD,
                {"leader": self.leader_id, "ttl": timedelta(seconds=self.config.lease_ttl)},
            )
        )[0]
        won = bool(row["won"])
        self._watch_holder(row)
        if won:
            self.renewed_at = sent
            if not self.leading:
                self.leading = True
                self.next_queue_check = 0.0
                log.get().info(
                    "maintenance.leader_acquired",
                    **{"maintenance.leader_ttl_s": self.config.leader_ttl},
                )
        elif self.leading:
            self.leading = False
            log.get().warning(
                "maintenance.leader_lost",
                **{"maintenance.since_renewal_s": round(time.monotonic() - self.renewed_at, 3)},
            )
        return won

    def _watch_holder(self, row: dict[str, Any]) -> None:
        """One maintenance.leader_silent per silence of another holder: its lease lapsed,
        or it has not renewed for more than half of it (a holder renews at least that often)."""
        holder = row["holder"]
        silent = holder is not None and (
            row["holder_lapsed"] or row["holder_silent_ms"] * 2 > row["holder_ttl_ms"]
        )
        if not silent:
            self.silent_holder = None
            return
        if holder == self.silent_holder:
            return
        self.silent_holder = holder
        log.get().warning(
            "maintenance.leader_silent",
            **{
                "maintenance.holder": holder,
                "maintenance.since_renewal_s": round(row["holder_silent_ms"] / 1000, 3),
                "maintenance.holder_ttl_s": round(row["holder_ttl_ms"] / 1000, 3),
                "maintenance.lapsed": bool(row["holder_lapsed"]),
            },
        )

    async def still_leading(self, conn: psycopg.AsyncConnection) -> bool:
        """Before each step: renew once half the ttl has passed since the last renewal
        (a pause shows on the monotonic clock), so no step starts after the lease lapsed."""
        if not self.leading:
            return False
        if time.monotonic() - self.renewed_at < self.config.lease_ttl / 2:
            return True
        return await self.renew(conn)

    async def resign(self, conn: psycopg.AsyncConnection) -> None:
        if self.leading:
            self.leading = False
            await conn.execute(RESIGN, {"leader": self.leader_id})
            log.get().info("maintenance.leader_resigned")

    async def _rows(
        self, conn: psycopg.AsyncConnection, sql: str, params: dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(sql, params)
        return await cur.fetchall()

    async def _step(self, name: str, conn: psycopg.AsyncConnection, coro_fn) -> bool:
        """One step; a database error other than a lost connection is logged (False), and
        the other steps still run. A lost connection ends the leadership (re-raised)."""
        try:
            await coro_fn(conn)
            return True
        except psycopg.Error as exc:
            if conn.closed or conn.broken:
                raise
            log.get().warning(
                "maintenance.step_failed", **{"maintenance.step": name, **log.error_fields(exc)}
            )
            return False

    async def publish(self, conn: psycopg.AsyncConnection, run_id: int) -> None:
        """Announce a run tick created (its own transaction); embedded mode adds an
        in-process wake-up."""
        await conn.execute(PUBLISH, {"run_id": run_id})

    async def tick_and_publish(self, conn: psycopg.AsyncConnection) -> None:
        rows = await self._rows(conn, TICK)
        fired = []
        for row in rows:
            event = row["event"]
            fields = {
                "run.id": row["run_id"],
                "run.trigger": "scheduled",
                "routine.occurrence": _when(row["occurrence"]),
            }
            log.get().info(event, **fields)
            if event == "routine.fired" and row["run_id"] is not None:
                fired.append(row["run_id"])
        # Publication: the runs above are committed; each notification is its own
        # transaction, and a failure here loses nothing (the scan finds the run).
        for run_id in fired:
            try:
                await self.publish(conn, run_id)
            except psycopg.Error as exc:
                log.get().warning(
                    "run.publish_failed", **{"run.id": run_id, **log.error_fields(exc)}
                )
                if conn.closed or conn.broken:
                    raise

    async def reap(self, conn: psycopg.AsyncConnection) -> None:
        for row in await self._rows(conn, REAP):
            log.get().warning(
                "run.reaped",
                **{"run.id": row["run_id"], "run.state": row["state"], "run.reason": row["reason"]},
            )
            if row["state"] in ("failed", "canceled", "succeeded"):
                try:
                    timing = await self._rows(conn, RUN_TIMING, {"run_id": row["run_id"]})
                    log.timing("run.finished", timing[0]["timing"] if timing else None)
                except psycopg.Error as exc:
                    log.get().warning(
                        "log.timing_failed", **{"run.id": row["run_id"], **log.error_fields(exc)}
                    )

    async def cancel_redundant(self, conn: psycopg.AsyncConnection) -> None:
        rows = await self._rows(conn, CANCEL_REDUNDANT)
        cancelled = rows[0]["cancelled"] if rows else 0
        if cancelled:
            log.get().info("routine.redundant_cancelled", **{"routine.cancelled_runs": cancelled})

    async def drain_legacy(self, conn: psycopg.AsyncConnection) -> None:
        """Legacy run deliveries whose runs direct dispatch already handled."""
        rows = await self._rows(conn, DRAIN_LEGACY)
        drained = rows[0]["drained"] if rows else 0
        if drained:
            log.get().info("upgrade.deliveries_drained", **{"upgrade.drained": drained})

    async def queue_delay(self, conn: psycopg.AsyncConnection) -> None:
        rows = await self._rows(
            conn, QUEUE_DELAY, {"threshold": timedelta(seconds=self.config.queue_delay_threshold)}
        )
        delayed = rows[0]["delayed_runs"] if rows else 0
        if delayed:
            self.delayed = True
            log.get().warning(
                "run.queue_delayed",
                **{
                    "queue.delayed_runs": delayed,
                    "queue.oldest_wait_ms": rows[0]["oldest_wait_ms"],
                    "queue.threshold_ms": int(self.config.queue_delay_threshold * 1000),
                },
            )
        elif self.delayed:
            self.delayed = False
            log.get().info("run.queue_recovered", **{"queue.delayed_runs": 0})

    async def notify_queue(self, conn: psycopg.AsyncConnection) -> None:
        usage = (await self._rows(conn, NOTIFY_USAGE))[0]["usage"]
        if usage is not None and usage >= self.config.notify_queue_warn:
            holders: list[dict[str, Any]] | None
            try:
                holders = holder_fields(await self._rows(conn, NOTIFY_HOLDERS))
            except psycopg.Error as exc:  # the warning goes out without its suspects
                if conn.broken:
                    raise
                holders = None
                log.get().warning("notify.holders_failed", **log.error_fields(exc))
            log.get().warning(
                "notify.queue_usage",
                **{
                    "notify.queue_usage": usage,
                    "notify.queue_warn": self.config.notify_queue_warn,
                    "notify.holders": holders,
                },
            )

    async def _purge_batches(self, conn: psycopg.AsyncConnection, sql: str) -> int:
        """Full batches mean more may wait, so call again (bounded per pass, re-checking
        the lease between calls); the rows deleted."""
        purged = 0
        for _ in range(self.config.purge_batches):
            if not await self.still_leading(conn):
                break
            rows = await self._rows(
                conn, sql, {"window": self.config.retention, "limit": self.config.purge_batch}
            )
            count = rows[0]["purged"] if rows else 0
            purged += count
            if count < self.config.purge_batch:
                break
        return purged

    async def purge(self, conn: psycopg.AsyncConnection) -> None:
        """Retention: finished runs, then the claim receipts and registry rows of workers
        long gone, then one window of the sweep over chat threads; logs what this pass deleted."""
        retention = self.config.retention
        if retention is None:  # pass_once takes this step only with a retention configured
            return
        runs = await self._purge_batches(conn, PURGE)
        receipts = await self._purge_batches(conn, PURGE_RECEIPTS)
        workers = await self._purge_batches(conn, PURGE_WORKERS)
        threads = 0
        if await self.still_leading(conn):
            agent, thread = self.threads_after
            rows = await self._rows(
                conn,
                PURGE_THREADS,
                {"agent": agent, "thread": thread, "limit": self.config.purge_batch},
            )
            if rows:
                threads = rows[0]["purged"]
                self.threads_after = (rows[0]["last_agent_id"], rows[0]["last_thread_id"])
        if runs or receipts or workers or threads:
            log.get().info(
                "maintenance.purged",
                **{
                    "maintenance.purged_runs": runs,
                    "maintenance.purged_claim_receipts": receipts,
                    "maintenance.purged_workers": workers,
                    "maintenance.purged_threads": threads,
                    "maintenance.retention_s": int(retention.total_seconds()),
                },
            )

    async def pass_once(self, conn: psycopg.AsyncConnection, queue_check: bool) -> bool:
        """Every step, whatever happened to the others, while the lease is ours; True when
        all succeeded. A lost lease ends the pass before its next step (False)."""
        steps = [
            ("tick", self.tick_and_publish),
            ("reap_stale", self.reap),
            ("cancel_redundant_timer_runs", self.cancel_redundant),
            ("drain_legacy_deliveries", self.drain_legacy),
            ("notify_queue", self.notify_queue),
        ]
        if self.config.retention is not None:
            steps.append(("purge_finished", self.purge))
        if queue_check:
            steps.append(("queue_delay", self.queue_delay))
        ok = True
        for name, step in steps:
            if not await self.still_leading(conn):
                return False
            ok = await self._step(name, conn, step) and ok
        return ok

    async def lead(self, conn: psycopg.AsyncConnection, stopped: asyncio.Event) -> None:
        """Renew (or try to win) the lease; lead a pass when it is ours, then wait a tick
        interval; follow (wait leader_retry) while another worker's lease runs."""
        while not stopped.is_set():
            try:
                if await self.renew(conn):
                    now = time.monotonic()
                    queue_check = now >= self.next_queue_check
                    if queue_check:
                        self.next_queue_check = now + self.config.queue_delay_interval
                    await self.pass_once(conn, queue_check)
                    wait = self.config.tick_interval
                else:
                    wait = self.config.leader_retry
            except psycopg.Error as exc:
                if conn.closed or conn.broken:
                    raise
                # The lease could not be read or renewed (e.g. 55P03): whether it is still
                # ours is unknown, so no step runs until a renewal says so.
                self.leading = False
                log.get().warning("maintenance.lease_check_failed", **log.error_fields(exc))
                wait = self.config.leader_retry
            await eventloop.wait_event(stopped, wait)

    async def run_forever(self, stopped: asyncio.Event) -> None:
        """Follow or lead until the worker stops; then hand the lease back."""
        while not stopped.is_set():
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.dsn,
                    autocommit=True,
                    application_name=self.application_name,
                    **self.connect_kwargs,
                ) as conn:
                    await self.lead(conn, stopped)
                    await self.resign(conn)
            except psycopg.Error as exc:
                # Whether the lease is still ours is unknown: the next renewal says.
                self.leading = False
                log.get().warning("maintenance.connection_lost", **log.error_fields(exc))
                await eventloop.wait_event(stopped, self.config.leader_retry)


async def one_pass(dsn: str, config: MaintenanceConfig | None = None) -> bool:
    """`runlane tick`: one pass (with the queue check) unless a worker's lease runs
    (then nothing to do: True); False when a step failed (logged). The lease is taken for
    the pass and handed back after it."""
    maintenance = Maintenance(dsn, config or MaintenanceConfig(), "runlane-tick")
    async with await psycopg.AsyncConnection.connect(
        dsn, autocommit=True, application_name=maintenance.application_name
    ) as conn:
        if not await maintenance.renew(conn):
            log.get().info("maintenance.skipped", **{"maintenance.why": "leader_active"})
            return True
        try:
            return await maintenance.pass_once(conn, queue_check=True)
        finally:
            await maintenance.resign(conn)
