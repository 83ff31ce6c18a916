"""The Worker: one `runlane worker` process, wiring its parts and running them until a
signal; what each part guarantees is in its own module (see the package's docstring).

Start: the lane pools open, the schema's numbered writes are checked, LISTEN is proven to
work on the DSN (unless embedded or scan-only; a transaction-pooled PgBouncer is refused:
worker.listen_probe), then the registry, the listener and the NOTIFY queue watch (unless
embedded or scan-only: worker.scan_mode), one dispatcher per lane, maintenance and
metrics start. A scan-only worker (--scan-only) says so at start (worker.scan_only, a
warning) and scans every fast_scan_interval for as long as it runs.
Stop (SIGTERM/SIGINT or request_stop): no new claim and no reconnect; running runs get
`shutdown_grace` seconds to finish, then the rest are released (a second signal releases
at once); a maintenance leader hands its lease back; the registry row is marked stopped.
All rules about which run may run live in the database; the worker only calls its
functions.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Coroutine
from typing import Any

from .. import log
from ..maintenance import Maintenance
from .config import WorkerConfig
from .db import Database, DistributedSchema
from .dispatcher import LaneDispatcher, admission_for
from .finisher import Finisher
from .listen_probe import ListenUnavailable, prove_listen
from .listener import Listener
from .output_batcher import OutputBatcher
from .registry import Registry
from .run_handle import RunHandle
from .scan_mode import HOLDERS, USAGE, ScanMode
from .supervisor import Supervisor

# Seconds a stopping worker gives its registry row's last write (operators' view only).
DEREGISTER_WAIT = 5.0


class Worker:
    """One worker process: its parts, its start and its stop (see the module's docstring).
    Embedded mode drives it in-process through notify(), stop_hint() and request_stop()."""

    def __init__(self, config: WorkerConfig):
        self.config = config
        self.admission = admission_for(config)
        self.stopping = False
        self.stopped = asyncio.Event()
        self.signals = 0
        self.database = Database(config)
        self.background: set[asyncio.Task] = set()  # tasks nobody awaits, kept referenced
        self.finisher = Finisher(config, self.database, self.timing, self._spawn)
        self.supervisor = Supervisor(
            config, self.database, self.finisher, self.timing, self._spawn, self.notify
        )
        self.scan_mode = ScanMode(config, self.notify)
        self.outputs = OutputBatcher(self.database, config.lanes, config.output_window, self._spawn)
        self.dispatchers = {
            lane: LaneDispatcher(
                lane,
                config,
                self.database,
                self.admission,
                self.supervisor.start,
                self.timing,
                self._spawn,
                self.supervisor.bound,
                self.scan_mode,
                self.outputs,
            )
            for lane in config.lanes
        }
        # What a notification sets: the lane's dispatcher makes one more pass.
        self.wake = {lane: d.wake for lane, d in self.dispatchers.items()}
        self.registry = Registry(config, self.database)
        self.listener = Listener(
            config.dsn,
            self.database.conn_kwargs,
            config.worker_id,
            self.notify,
            self.stop_hint,
            self._connection_lost,
            self.database.connection_back,
        )
        self.maintenance = (
            Maintenance(
                config.dsn,
                config.maintenance,
                config.application_name,
                connect_kwargs=self.database.conn_kwargs,
            )
            if config.maintenance
            else None
        )

    @property
    def passes(self) -> dict[str, int]:
        """Passes made so far, by lane."""
        return {lane: d.passes for lane, d in self.dispatchers.items()}

    @property
    def claim_queries(self) -> dict[str, int]:
        """claim_runs calls made so far, by lane."""
        return {lane: d.claim_queries for lane, d in self.dispatchers.items()}

    def timing(self, event: str, row: Any, **extra: Any) -> None:
        """Log a timing row the database returned, and count it in the metrics."""
        log.timing(event, row, **extra)
        if self.config.metrics is not None:
            self.config.metrics.observe(event, row)

    # -- lifecycle ---------------------------------------------------------------------
    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        await self.database.open()
        try:
            await self._unless_stopped(self.database.check_distributed_schema())
        except DistributedSchema:
            await self.database.close()
            raise
        await self._unless_stopped(self.database.check_write_seqs())
        if self.config.listen:
            await self._prove_listen()
        log.get().info(
            "worker.started",
            **{
                "worker.id": self.config.worker_id,
                "worker.lanes": self.config.lanes,
                "worker.pid": os.getpid(),
            },
        )
        if self.config.scan_only:
            log.get().warning(
                "worker.scan_only",
                **{
                    "worker.id": self.config.worker_id,
                    "dispatch.fast_scan_interval_s": self.config.fast_scan_interval,
                },
            )
        registry = asyncio.create_task(self.registry.run_forever(self.stopped), name="registry")
        listener = (
            asyncio.create_task(self.listener.run(), name="listener")
            if self.config.listen
            else None
        )
        queue_watch = (
            asyncio.create_task(
                self.scan_mode.watch(self._queue_usage, self._queue_holders, self.stopped),
                name="queue-watch",
            )
            if self.config.listen
            else None
        )
        lanes = [
            asyncio.create_task(d.run(), name=f"lane-{lane}")
            for lane, d in self.dispatchers.items()
        ]
        maintenance = (
            asyncio.create_task(self.maintenance.run_forever(self.stopped), name="maintenance")
            if self.maintenance
            else None
        )
        metrics = (
            asyncio.create_task(self.config.metrics.run_forever(self.stopped), name="metrics")
            if self.config.metrics is not None
            else None
        )
        await self.stopped.wait()
        await asyncio.gather(*lanes, return_exceptions=True)
        await self.supervisor.drain(wait=self.signals < 2)
        if maintenance is not None:  # a leader hands its lease back (a few ms) before it ends
            await asyncio.wait([maintenance], timeout=5.0)
        for task in (registry, listener, queue_watch, maintenance, metrics):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        # The registry is for operators: a database out of reach must not hold the exit
        # (register would resend for half a lease, each try waiting out the pool).
        try:
            async with asyncio.timeout(DEREGISTER_WAIT):
                await self.registry.register(stopped=True)
        except TimeoutError:
            log.get().warning(
                "worker.register_failed",
                **{"worker.id": self.config.worker_id, "error.type": "TimeoutError"},
            )
        await self.database.close()
        for dispatcher in self.dispatchers.values():
            await dispatcher.close()
        log.get().info(
            "worker.stopped",
            **{
                "worker.id": self.config.worker_id,
                "dispatch.passes": sum(self.passes.values()),
                "dispatch.claim_queries": sum(self.claim_queries.values()),
            },
        )

    async def _unless_stopped(self, step: Coroutine[Any, Any, None]) -> None:
        """`step`, unless a stop comes first (then it is cancelled): a database out of
        reach at startup must not hold a worker that was told to stop."""
        task = asyncio.ensure_future(step)
        stopped = asyncio.create_task(self.stopped.wait())
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        for waiting in (task, stopped):
            waiting.cancel()
        await asyncio.gather(stopped, return_exceptions=True)
        try:
            await task
        except asyncio.CancelledError:
            if not task.cancelled():
                raise

    async def _prove_listen(self) -> None:
        """LISTEN must work on this DSN before anything starts (worker.listen_probe): raises
        ListenUnavailable, the pools closed, when it cannot. A stop meanwhile ends the wait."""
        probe = asyncio.create_task(
            prove_listen(
                self.config.dsn,
                self.database.conn_kwargs,
                self.database.pools[self.config.lanes[0]],
                self.config.worker_id,
            )
        )
        stopped = asyncio.create_task(self.stopped.wait())
        await asyncio.wait({probe, stopped}, return_when=asyncio.FIRST_COMPLETED)
        for task in (probe, stopped):
            task.cancel()
        await asyncio.gather(stopped, return_exceptions=True)
        try:
            await probe
        except asyncio.CancelledError:
            if not probe.cancelled():
                raise
        except ListenUnavailable:
            await self.database.close()
            raise

    async def _queue_usage(self) -> dict[str, Any] | None:
        """runlane.notify_queue_usage() and the cut-off from which runlane sends no
        notification, read on the first lane's pool (no write)."""
        return await self.database.call(self.config.lanes[0], USAGE, retries=0)

    async def _queue_holders(self) -> list[dict[str, Any]]:
        """runlane.notify_queue_holders(): who most likely holds the NOTIFY queue."""
        return await self.database.call(self.config.lanes[0], HOLDERS, fetch="all", retries=0)

    def request_stop(self) -> None:
        self.signals += 1
        if self.signals == 1:
            log.get().info(
                "worker.stopping",
                **{
                    "worker.id": self.config.worker_id,
                    "worker.runs": len(self.runs),
                    "worker.shutdown_grace_s": self.config.shutdown_grace,
                },
            )
        self.stopping = True
        self.stopped.set()
        self.listener.stop()
        for dispatcher in self.dispatchers.values():
            dispatcher.stop()
        if self.signals > 1:  # a second signal: release what runs now, do not wait
            self.supervisor.release_all()

    def stop_hint(self, run_id: int) -> None:
        """A Stop (runlane.cancel_run) may concern `run_id`: when this worker runs it, the
        database is asked (a heartbeat) and a stopped run's agent is stopped at once.
        Embedded mode calls it after its cancel_run commits; never raises."""
        self.supervisor.stop_hint(run_id)

    @property
    def runs(self) -> dict[int, RunHandle]:
        """The runs this worker holds now, by run id."""
        return self.supervisor.runs

    def notify(self, lane: str | None = None) -> None:
        """In-process notification: mark `lane` (every lane when None) for one more pass.
        Call it only after the run is committed; a lane this worker does not serve is
        ignored."""
        if lane in self.wake:
            self.wake[lane].set()
        elif lane is None:
            for event in self.wake.values():
                event.set()

    def _connection_lost(self) -> None:
        """The listener's connection broke (a failover, a restart): the other connections
        to that server are presumed dead (see Database and LaneDispatcher)."""
        self.database.connection_lost()
        for dispatcher in self.dispatchers.values():
            dispatcher.connection_lost()

    def _spawn(self, coro: Any) -> asyncio.Task:
        task = asyncio.create_task(coro)
        self.background.add(task)
        task.add_done_callback(self.background.discard)
        return task


async def serve(config: WorkerConfig) -> None:
    """Runs one worker until it is stopped (`runlane worker`)."""
    await Worker(config).run()
