"""Prometheus metrics of a worker (`runlane worker --metrics-port N`).

Per worker (what this process did, from the timing rows the database returned):
  runlane_runs_claimed_total{lane}                 runs this worker claimed
  runlane_runs_finished_total{lane,outcome}        runs this worker finished (or saw fail)
  runlane_run_queue_wait_seconds{lane}             histogram: creation -> first start
  runlane_run_first_response_seconds{lane}         histogram: origin -> first visible output,
                                                   one sample per run (its first response)
  runlane_run_total_seconds{lane,outcome}          histogram: origin -> end, one per run
Database-wide (read every `refresh` seconds; the same value on every worker, so
aggregate with max(), not sum()):
  runlane_runs_skipped_total{reason}               run.skipped journal rows
  runlane_routines_coalesced_total                 routine.coalesced journal rows
  runlane_queue_depth{lane,state}                  queued runs, state due|sleeping; running
  runlane_interactive_delayed_runs                 interactive runs due and queued >= 30 s
Per process:
  runlane_notifications_ignored_total{channel}     unreadable or forged notification
                                                   payloads ignored (runlane.hints)
  runlane_dispatch_fast_scan                       1 while the lanes scan every
                                                   fast_scan_interval (notifications cannot
                                                   be counted on: worker/scan_mode.py)
  runlane_dispatch_scan_only                       1 for a worker started --scan-only
  runlane_notify_queue_usage                       the worker's last reading of
                                                   notify_queue_usage() (0 when scan-only)
The journal (runlane.run_events) is never pruned, so its counts are true counters.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from . import eventloop, hints, log
from .rows import one

BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600)

# Only functions granted to runlane_worker: a worker login has no right to the tables.
JOURNAL = "select event, reason, n from runlane.journal_counts()"
LANES = "select lane, queued, due, running from runlane.lane_status()"
DELAYED = "select delayed_runs from runlane.queue_delay(p_threshold => interval '30 seconds')"


class _DatabaseCollector:
    """Serves the values the refresh loop last read; never queries at scrape time."""

    def __init__(self) -> None:
        self.skipped: dict[str, int] = {}
        self.coalesced = 0
        self.lanes: list[tuple[str, int, int, int]] = []
        self.delayed = 0

    def collect(self):
        skipped = CounterMetricFamily(
            "runlane_runs_skipped", "Skipped runs (journal), by reason", labels=["reason"]
        )
        for reason, n in sorted(self.skipped.items()):
            skipped.add_metric([reason], n)
        yield skipped
        yield CounterMetricFamily(
            "runlane_routines_coalesced",
            "Scheduler ticks coalesced into a pending timer run (journal)",
            value=self.coalesced,
        )
        depth = GaugeMetricFamily(
            "runlane_queue_depth", "Runs per lane and state", labels=["lane", "state"]
        )
        for lane, queued, due, running in self.lanes:
            depth.add_metric([lane, "due"], due)
            depth.add_metric([lane, "sleeping"], queued - due)
            depth.add_metric([lane, "running"], running)
        yield depth
        yield GaugeMetricFamily(
            "runlane_interactive_delayed_runs",
            "Interactive runs due and queued for 30 s or more",
            value=self.delayed,
        )
        ignored = CounterMetricFamily(
            "runlane_notifications_ignored",
            "Unreadable or forged notification payloads ignored",
            labels=["channel"],
        )
        for channel in (hints.RUNS, hints.OUTPUTS):
            ignored.add_metric([channel], hints.IGNORED[channel])
        yield ignored
        from .worker.scan_mode import STATE

        yield GaugeMetricFamily(
            "runlane_dispatch_fast_scan",
            "1 while the lanes scan at the fast interval (notifications cannot be counted on)",
            value=STATE["fast_scan"],
        )
        yield GaugeMetricFamily(
            "runlane_dispatch_scan_only",
            "1 for a worker running without LISTEN (--scan-only)",
            value=STATE["scan_only"],
        )
        yield GaugeMetricFamily(
            "runlane_notify_queue_usage",
            "Last reading of the server's NOTIFY queue usage (0 to 1)",
            value=STATE["notify_queue_usage"],
        )


class Metrics:
    def __init__(self, dsn: str, refresh: float = 5.0):
        self.dsn = dsn
        self.refresh = refresh
        self.registry = CollectorRegistry()
        r = self.registry
        self.claimed = Counter(
            "runlane_runs_claimed", "Runs claimed by this worker", ["lane"], registry=r
        )
        self.finished = Counter(
            "runlane_runs_finished", "Runs finished by this worker", ["lane", "outcome"], registry=r
        )
        self.queue_wait = Histogram(
            "runlane_run_queue_wait_seconds",
            "Run creation to first execution start",
            ["lane"],
            buckets=BUCKETS,
            registry=r,
        )
        self.first_response = Histogram(
            "runlane_run_first_response_seconds",
            "Origin to first visible output, one per run",
            ["lane"],
            buckets=BUCKETS,
            registry=r,
        )
        self.total = Histogram(
            "runlane_run_total_seconds",
            "Origin to the run's end",
            ["lane", "outcome"],
            buckets=BUCKETS,
            registry=r,
        )
        self.database = _DatabaseCollector()
        r.register(self.database)

    def serve(self, port: int, addr: str = "127.0.0.1") -> None:
        start_http_server(port, addr=addr, registry=self.registry)

    def observe(self, event: str, row: Any) -> None:
        """A timing row the database returned for `event`; never raises."""
        try:
            if not isinstance(row, dict):
                return
            lane = row.get("run.lane", "")
            if event == "run.execution_started":
                self.claimed.labels(lane).inc()
                if "run.queue_wait_ms" in row and row.get("run.attempt") == 1:
                    self.queue_wait.labels(lane).observe(row["run.queue_wait_ms"] / 1000)
            elif event == "run.first_response" and "run.first_response_ms" in row:
                self.first_response.labels(lane).observe(row["run.first_response_ms"] / 1000)
            elif event == "run.finished":
                outcome = row.get("run.outcome", "unknown")
                self.finished.labels(lane, outcome).inc()
                if "run.total_ms" in row:
                    self.total.labels(lane, outcome).observe(row["run.total_ms"] / 1000)
        except Exception as exc:  # noqa: BLE001 - metrics never fail a run
            log.get().warning("metrics.observe_failed", **log.error_fields(exc))

    async def read_database(self) -> None:
        async with await psycopg.AsyncConnection.connect(
            self.dsn, autocommit=True, application_name="runlane-metrics"
        ) as conn:
            rows = await (await conn.execute(JOURNAL)).fetchall()
            self.database.skipped = {
                reason or "unknown": n for event, reason, n in rows if event == "run.skipped"
            }
            self.database.coalesced = sum(
                n for event, _r, n in rows if event == "routine.coalesced"
            )
            self.database.lanes = list(await (await conn.execute(LANES)).fetchall())
            self.database.delayed = one(await (await conn.execute(DELAYED)).fetchone())[0]

    async def run_forever(self, stopped: asyncio.Event) -> None:
        while not stopped.is_set():
            try:
                await self.read_database()
            except psycopg.Error as exc:
                log.get().warning("metrics.refresh_failed", **log.error_fields(exc))
            await eventloop.wait_event(stopped, self.refresh)
