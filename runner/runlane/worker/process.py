"""`runlane worker`: listen, scan, claim, execute agent steps, heartbeat, log timing.

One asyncio process. A dedicated connection LISTENs on `runlane_runs`; each lane has its
own dispatcher loop, its own connection for claims and its own connection pool for run
work, so lanes never wait on each other and a burst's run work never delays the next
claim. A
lane makes a pass at startup, after every (re)connect of the listener, when a
notification names it and at least every `scan_interval` seconds; a notification
arriving during a pass only marks the lane for one more pass (an asyncio.Event), it
never restarts the pass in progress. A pass claims in bounded pages (`claim_runs`),
each page admitted by memory first; a full page doubles the next page's size (up to
`claim_batch_max`), a short one ends the pass.

Every claimed run gets a supervisor task: the claim is its durable ownership; it starts
the run's heartbeat (every lease/3) and then the agent loop. A heartbeat returning false
or any RL001 cancels the agent task at once and nothing more is written for the run but
one finish as canceled, which the database accepts only for a run that was stopped
(runlane.cancel_run) and is still owned by this attempt. A Stop reaches the worker as a
`runlane_runs` hint ({"cancel": run_id, "lane": …}), confirmed by a heartbeat before
anything is stopped, or, when the hint is lost, by the run's next heartbeat.
There is no run-duration limit and no per-worker run cap. All rules about which run may
run live in the database; this module only calls its functions.

Commits per run are kept to what durability needs: a step's last outputs, its checkpoint
and the finish travel on its StepResult and are written by ONE statement (one round trip,
one commit); the run's messages are read once per attempt; pool connections are not
pinged before use (a broken one fails its statement, which is resent on a fresh one).
Across runs: a claimed page's messages are read in one run_messages_many call right after
the claim (a run missing from it reads its own), and the finishes of runs ending together
go as one finish_runs call (at once when no such call is in flight, else when it returns,
after finish_window or at finish_batch runs), each run in its own subtransaction, so a
run fenced out (RL001) is lost alone and a run refused otherwise is finished alone. A run
is queued for finishing only once its last step is done; a crash before the call commits
leaves it to the lease, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from typing import Any

import psycopg

from .. import log
from ..maintenance import Maintenance
from .config import WorkerConfig
from .db import Database
from .dispatcher import LaneDispatcher, admission_for
from .finisher import Finisher
from .listener import Listener
from .run_handle import RunHandle
from .supervisor import Supervisor

REGISTER = """
select runlane.register_worker(p_worker_id => %(worker)s::text, p_lanes => %(lanes)s::text[],
                               p_stopped => %(stopped)s::boolean)
"""
REGISTRY_INTERVAL = 30.0  # seconds; the contract step treats 2 minutes of silence as gone


class Worker:
    def __init__(self, config: WorkerConfig):
        self.config = config
        self.admission = admission_for(config)
        self.stopping = False
        self.stopped = asyncio.Event()
        self.signals = 0
        self.database = Database(config)
        self.db = self.database.call
        self.background: set[asyncio.Task] = set()  # tasks nobody awaits, kept referenced
        self.finisher = Finisher(config, self.database, self.timing, self._spawn)
        self.supervisor = Supervisor(config, self.database, self.finisher, self.timing,
                                     self._spawn, self.notify)
        self.dispatchers = {lane: LaneDispatcher(
            lane, config, self.database, self.admission, self.supervisor.start,
            self.timing, self._spawn) for lane in config.lanes}
        # What a notification sets: the lane's dispatcher makes one more pass.
        self.wake = {lane: d.wake for lane, d in self.dispatchers.items()}
        self.listener = Listener(config.dsn, self.database.conn_kwargs, config.worker_id,
                                 self.notify, self.stop_hint)
        self.maintenance = (Maintenance(config.dsn, config.maintenance,
                                        config.application_name)
                            if config.maintenance else None)

    @property
    def passes(self) -> dict[str, int]:
        """Passes made so far, by lane."""
        return {lane: d.passes for lane, d in self.dispatchers.items()}

    @property
    def claim_queries(self) -> dict[str, int]:
        """claim_runs calls made so far, by lane."""
        return {lane: d.claim_queries for lane, d in self.dispatchers.items()}

    @property
    def write_seqs(self) -> bool:
        return self.database.write_seqs

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
        await self.database.check_write_seqs()
        log.get().info("worker.started", **{
            "worker.id": self.config.worker_id, "worker.lanes": self.config.lanes,
            "worker.pid": os.getpid()})
        registry = asyncio.create_task(self._keep_registered(), name="registry")
        listener = (asyncio.create_task(self.listener.run(), name="listener")
                    if self.config.listen else None)
        lanes = [asyncio.create_task(d.run(), name=f"lane-{lane}")
                 for lane, d in self.dispatchers.items()]
        maintenance = (asyncio.create_task(self.maintenance.run_forever(self.stopped),
                                           name="maintenance")
                       if self.maintenance else None)
        metrics = (asyncio.create_task(self.config.metrics.run_forever(self.stopped),
                                       name="metrics")
                   if self.config.metrics is not None else None)
        await self.stopped.wait()
        await asyncio.gather(*lanes, return_exceptions=True)
        await self.supervisor.drain(wait=self.signals < 2)
        if maintenance is not None:  # a leader hands its lease back (a few ms) before it ends
            await asyncio.wait([maintenance], timeout=5.0)
        for task in (registry, listener, maintenance, metrics):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        await self._register(stopped=True)
        await self.database.close()
        for dispatcher in self.dispatchers.values():
            await dispatcher.close()
        log.get().info("worker.stopped", **{
            "worker.id": self.config.worker_id,
            "dispatch.passes": sum(self.passes.values()),
            "dispatch.claim_queries": sum(self.claim_queries.values())})

    async def _register(self, stopped: bool = False) -> None:
        """The worker registry is for operators: failing to write it never stops work."""
        lane = self.config.lanes[0]
        try:
            await self.db(lane, REGISTER, {"worker": self.config.worker_id,
                                           "lanes": self.config.lanes, "stopped": stopped},
                          fetch="none")
        except psycopg.Error as exc:
            log.get().warning("worker.register_failed", **log.error_fields(exc))

    async def _keep_registered(self) -> None:
        while not self.stopping:
            await self._register()
            if not self.write_seqs:
                await self.database.check_write_seqs()
            await asyncio.sleep(REGISTRY_INTERVAL)

    def request_stop(self) -> None:
        self.signals += 1
        if self.signals == 1:
            log.get().info("worker.stopping", **{
                "worker.id": self.config.worker_id, "worker.runs": len(self.runs),
                "worker.shutdown_grace_s": self.config.shutdown_grace})
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

    def _spawn(self, coro: Any) -> asyncio.Task:
        task = asyncio.create_task(coro)
        self.background.add(task)
        task.add_done_callback(self.background.discard)
        return task



async def serve(config: WorkerConfig) -> None:
    await Worker(config).run()
