"""Maintenance passes, run by exactly one leader at a time.

Leadership is a session advisory lock on a dedicated connection: the worker that holds
it runs the passes on that same connection, so when its session dies (process killed,
connection terminated) the lock goes with it and a follower, retrying every
`leader_retry` seconds, takes over. Each pass:
  1. `tick()` (commits new timer runs and advanced schedules), logging routine.fired,
     routine.coalesced and run.skipped;
  2. publication: `publish_run()` for each run the tick created, each in its own
     transaction; a failure is logged and loses nothing (the dispatchers' scan recovers);
  3. `reap_stale()`, then `cancel_redundant_timer_runs()` and `drain_legacy_deliveries()`;
and every `queue_delay_interval` seconds `queue_delay()`: `run.queue_delayed` while
interactive runs wait too long, one `run.queue_recovered` when they no longer do.
None of this runs on a dispatcher's connection, so it never blocks dispatch.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from . import log

MAINTENANCE_LOCK = 7_317_002  # pg_advisory_lock key of the maintenance leader

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
TRY_LOCK = "select pg_try_advisory_lock(%(key)s::bigint) as got"


@dataclass
class MaintenanceConfig:
    tick_interval: float = 5.0
    queue_delay_interval: float = 30.0
    queue_delay_threshold: float = 30.0
    leader_retry: float = 3.0


def _when(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


class Maintenance:
    def __init__(self, dsn: str, config: MaintenanceConfig, application_name: str):
        self.dsn = dsn
        self.config = config
        self.application_name = f"{application_name}:maintenance"[:63]
        self.delayed = False
        self.next_queue_check = 0.0

    async def _rows(self, conn: psycopg.AsyncConnection, sql: str,
                    params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
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
            log.get().warning("maintenance.step_failed",
                              **{"maintenance.step": name, **log.error_fields(exc)})
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
            fields = {"run.id": row["run_id"], "run.trigger": "scheduled",
                      "routine.occurrence": _when(row["occurrence"])}
            log.get().info(event, **fields)
            if event == "routine.fired" and row["run_id"] is not None:
                fired.append(row["run_id"])
        # Publication: the runs above are committed; each notification is its own
        # transaction, and a failure here loses nothing (the scan finds the run).
        for run_id in fired:
            try:
                await self.publish(conn, run_id)
            except psycopg.Error as exc:
                log.get().warning("run.publish_failed",
                                  **{"run.id": run_id, **log.error_fields(exc)})
                if conn.closed or conn.broken:
                    raise

    async def reap(self, conn: psycopg.AsyncConnection) -> None:
        for row in await self._rows(conn, REAP):
            log.get().warning("run.reaped", **{"run.id": row["run_id"],
                                               "run.state": row["state"],
                                               "run.reason": row["reason"]})
            if row["state"] in ("failed", "canceled", "succeeded"):
                try:
                    timing = (await self._rows(conn, RUN_TIMING, {"run_id": row["run_id"]}))
                    log.timing("run.finished", timing[0]["timing"] if timing else None)
                except psycopg.Error as exc:
                    log.get().warning("log.timing_failed",
                                      **{"run.id": row["run_id"], **log.error_fields(exc)})

    async def cancel_redundant(self, conn: psycopg.AsyncConnection) -> None:
        rows = await self._rows(conn, CANCEL_REDUNDANT)
        cancelled = rows[0]["cancelled"] if rows else 0
        if cancelled:
            log.get().info("routine.redundant_cancelled",
                           **{"routine.cancelled_runs": cancelled})

    async def drain_legacy(self, conn: psycopg.AsyncConnection) -> None:
        """Legacy run deliveries whose runs direct dispatch already handled."""
        rows = await self._rows(conn, DRAIN_LEGACY)
        drained = rows[0]["drained"] if rows else 0
        if drained:
            log.get().info("upgrade.deliveries_drained", **{"upgrade.drained": drained})

    async def queue_delay(self, conn: psycopg.AsyncConnection) -> None:
        rows = await self._rows(conn, QUEUE_DELAY, {
            "threshold": timedelta(seconds=self.config.queue_delay_threshold)})
        delayed = rows[0]["delayed_runs"] if rows else 0
        if delayed:
            self.delayed = True
            log.get().warning("run.queue_delayed", **{
                "queue.delayed_runs": delayed, "queue.oldest_wait_ms": rows[0]["oldest_wait_ms"],
                "queue.threshold_ms": int(self.config.queue_delay_threshold * 1000)})
        elif self.delayed:
            self.delayed = False
            log.get().info("run.queue_recovered", **{"queue.delayed_runs": 0})

    async def pass_once(self, conn: psycopg.AsyncConnection, queue_check: bool) -> bool:
        """Every step, whatever happened to the others; True when all succeeded."""
        ok = await self._step("tick", conn, self.tick_and_publish)
        ok = await self._step("reap_stale", conn, self.reap) and ok
        ok = await self._step("cancel_redundant_timer_runs", conn, self.cancel_redundant) and ok
        ok = await self._step("drain_legacy_deliveries", conn, self.drain_legacy) and ok
        if queue_check:
            ok = await self._step("queue_delay", conn, self.queue_delay) and ok
        return ok

    async def lead(self, conn: psycopg.AsyncConnection, stopped: asyncio.Event) -> None:
        while not stopped.is_set():
            now = time.monotonic()
            queue_check = now >= self.next_queue_check
            if queue_check:
                self.next_queue_check = now + self.config.queue_delay_interval
            await self.pass_once(conn, queue_check)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopped.wait(), self.config.tick_interval)

    async def run_forever(self, stopped: asyncio.Event) -> None:
        """Follow until the lock is ours, then lead until the session or process ends."""
        while not stopped.is_set():
            try:
                async with await psycopg.AsyncConnection.connect(
                        self.dsn, autocommit=True,
                        application_name=self.application_name) as conn:
                    while not stopped.is_set():
                        got = (await self._rows(conn, TRY_LOCK, {"key": MAINTENANCE_LOCK}))
                        if got[0]["got"]:
                            break
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(stopped.wait(), self.config.leader_retry)
                    else:
                        return
                    log.get().info("maintenance.leader_acquired")
                    self.next_queue_check = 0.0
                    await self.lead(conn, stopped)
            except psycopg.Error as exc:
                log.get().warning("maintenance.connection_lost", **log.error_fields(exc))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stopped.wait(), self.config.leader_retry)


async def one_pass(dsn: str, config: MaintenanceConfig | None = None) -> bool:
    """`runlane tick`: one pass (with the queue check) unless a leader holds the lock
    (then nothing to do: True); False when a step failed (logged)."""
    maintenance = Maintenance(dsn, config or MaintenanceConfig(), "runlane-tick")
    async with await psycopg.AsyncConnection.connect(
            dsn, autocommit=True, application_name=maintenance.application_name) as conn:
        got = await maintenance._rows(conn, TRY_LOCK, {"key": MAINTENANCE_LOCK})
        if not got[0]["got"]:
            log.get().info("maintenance.skipped", **{"maintenance.why": "leader_active"})
            return True
        return await maintenance.pass_once(conn, queue_check=True)
