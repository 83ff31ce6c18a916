"""Whether this worker can count on notifications, and so how often its lanes scan.

Notifications are hints: the scan is what recovers a run nobody announced. Any login that
may CONNECT can fill the server's NOTIFY queue (LISTEN in a transaction it keeps open,
then pg_notify in a loop); from half full runlane sends no notification at all
(runlane._notify), so for as long as the filler wants, the scan is the only way work is
found. Guarantees:
- while the queue is at least `fast_scan_from` full (the warning level, 0.25 by default;
  never above runlane.notify_queue_cutoff(), read with each reading: from there runlane
  sends no notification at all) or the worker runs scan-only
  (--scan-only: no LISTEN), every lane scans every `fast_scan_interval` seconds (0.1 s
  by default) instead of every `scan_interval`; a chat message then waits at most that
  long for its claim;
- the queue is read with runlane.notify_queue_usage() (a read, no write) on a lane pool
  at most once every QUEUE_CHECK seconds; a failed read changes nothing (the mode stays
  as it was) and is logged once until a read succeeds again;
- entering the mode logs one `dispatch.fast_scan_started` (the reason, the reading and
  the backends most likely holding the queue, `notify.holders` from
  runlane.notify_queue_holders(): pid, login, application, database, state, wait
  event, transaction age; never query text) and wakes every lane at once; leaving it
  logs one `dispatch.fast_scan_stopped` (with how long it lasted). A scan-only worker is
  in the mode from start to stop. STATE holds what the metrics show
  (runlane_dispatch_fast_scan, runlane_dispatch_scan_only, runlane_notify_queue_usage).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg

from .. import eventloop, log
from ..maintenance import NOTIFY_HOLDERS, holder_fields
from .config import WorkerConfig

QUEUE_CHECK = 1.0  # seconds between two readings of the NOTIFY queue, at least
USAGE = "select runlane.notify_queue_usage() as usage, runlane.notify_queue_cutoff() as cutoff"
HOLDERS = NOTIFY_HOLDERS

# This process's mode, for the metrics (runlane.metrics): 1/0 flags and the last reading.
STATE: dict[str, float] = {"fast_scan": 0, "scan_only": 0, "notify_queue_usage": 0.0}


class ScanMode:
    """The lanes' scan interval, fast while notifications cannot be counted on."""

    def __init__(self, config: WorkerConfig, wake_lanes: Callable[[], None]):
        self.config = config
        self.scan_only = config.scan_only
        self.fast = config.scan_only
        self._wake_lanes = wake_lanes
        self._since = time.monotonic()
        self._read_failed = False
        self.threshold = config.fast_scan_from  # until a reading brings the cut-off
        STATE["scan_only"] = int(self.scan_only)
        STATE["fast_scan"] = int(self.fast)

    def interval(self, scan_interval: float) -> float:
        """Seconds until a lane's next scan."""
        if self.fast:
            return min(scan_interval, self.config.fast_scan_interval)
        return scan_interval

    def entering(self, usage: float) -> bool:
        """Whether this reading starts the fast scan."""
        return usage >= self.threshold and not self.fast

    def reading(self, usage: float, holders: list[dict[str, Any]] | None = None) -> None:
        """A reading of notify_queue_usage(): enter or leave the fast scan."""
        STATE["notify_queue_usage"] = usage
        high = usage >= self.threshold
        if high and not self.fast:
            self.fast, self._since = True, time.monotonic()
            STATE["fast_scan"] = 1
            log.get().warning(
                "dispatch.fast_scan_started",
                **{
                    "dispatch.reason": "notify_queue",
                    "notify.queue_usage": usage,
                    "notify.queue_warn": self.threshold,
                    "dispatch.fast_scan_interval_s": self.config.fast_scan_interval,
                    "notify.holders": holders,
                },
            )
            self._wake_lanes()  # whatever went unannounced is claimed now
        elif not high and self.fast and not self.scan_only:
            self.fast = False
            STATE["fast_scan"] = 0
            log.get().info(
                "dispatch.fast_scan_stopped",
                **{
                    "dispatch.reason": "notify_queue",
                    "notify.queue_usage": usage,
                    "dispatch.fast_scan_s": round(time.monotonic() - self._since, 1),
                },
            )

    async def watch(
        self,
        read: Callable[[], Awaitable[dict[str, Any] | None]],
        holders: Callable[[], Awaitable[list[dict[str, Any]]]],
        stopped: asyncio.Event,
    ) -> None:
        """Reads the queue every QUEUE_CHECK seconds until `stopped` (not when scan-only:
        the mode never ends then); on entering the fast scan, also who holds it."""
        if self.scan_only:
            return
        while not stopped.is_set():
            try:
                row = await read()
            except psycopg.Error as exc:
                if not self._read_failed:
                    self._read_failed = True
                    log.get().warning("dispatch.queue_check_failed", **log.error_fields(exc))
            else:
                self._read_failed = False
                usage = row["usage"] if row else None
                if row and row["cutoff"] is not None:
                    self.threshold = min(self.config.fast_scan_from, float(row["cutoff"]))
                if usage is not None:
                    suspects = None
                    if self.entering(float(usage)):
                        try:
                            suspects = holder_fields(await holders())
                        except psycopg.Error as exc:  # the mode does not wait for names
                            log.get().warning("notify.holders_failed", **log.error_fields(exc))
                    self.reading(float(usage), suspects)
            await eventloop.wait_event(stopped, QUEUE_CHECK)
