"""The queue generation's delivery loop, kept to rehearse and run rolling upgrades.

It executes the older generation's own statements (`sql/legacy/*.sql`, shipped in the
package) and nothing else: it knows no fences, leases or wake times. Against schema
0002 the compatibility trigger turns its claims into fenced, leased claims, its
heartbeats into lease extensions and its requeues into wake times. The loop:

  register in runlane.workers (generation 1, legacy deliveries) and heartbeat there;
  take a due delivery (take_delivery); start its run (start_run): no row means someone
  else claimed, finished or cancelled it, so the delivery is dropped, never executed;
  run it (one visible output, 'legacy attempt N', and a heartbeat); complete it, or,
  with --fail-rate, fail the attempt (requeue_run + fail_delivery: retry backoff).

Memory admission is asked before each delivery is taken. SIGTERM/SIGINT stop the taking
of deliveries; the one in hand is finished, the worker marks itself stopped and exits 0.

    python -m runlane.legacy --dsn DSN --worker-id ID [--fail-rate 0.0] [--poll 0.05] [--work 0]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import threading
import time
from functools import cache
from importlib import resources

import psycopg
from psycopg.rows import dict_row

from . import log
from .admission import Admission, load_probe

STATEMENTS = (
    "register_worker",
    "worker_heartbeat",
    "worker_stopped",
    "take_delivery",
    "start_run",
    "heartbeat",
    "append_output",
    "complete_run",
    "complete_delivery",
    "requeue_run",
    "fail_delivery",
)
WORKER_HEARTBEAT_EVERY = 1.0  # seconds; the contract step treats 2 minutes of silence as gone
DEFAULT_BUFFER = 64 * 1024 * 1024


class SignalStop:
    """A stop flag that a signal handler may set.

    `threading.Event.set()` takes the event's lock, which the main thread holds for a moment
    inside every `wait()`: a signal arriving in that moment runs its handler on the same
    thread, which then waits for itself forever. Setting this flag takes no lock; `wait`
    sleeps in short slices and looks at the flag between them.
    """

    SLICE = 0.01  # seconds; how late a waiting loop notices the flag at most

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self._set:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(left, self.SLICE))
        return self._set


def stop_on_signals() -> SignalStop:
    """A SignalStop that SIGTERM and SIGINT set."""
    stop = SignalStop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    return stop


@cache
def statement(name: str) -> str:
    """The text of sql/legacy/<name>.sql, as the older generation ran it."""
    return (resources.files("runlane") / "sql" / "legacy" / f"{name}.sql").read_text()


class LegacyWorker:
    """One legacy delivery loop on one connection; `stop` ends it after the current delivery."""

    def __init__(
        self,
        conn: psycopg.Connection,
        worker_id: str,
        *,
        fail_rate: float = 0.0,
        poll: float = 0.05,
        work: float = 0.0,
        admission: Admission | None = None,
        stop: threading.Event | SignalStop | None = None,
        rng: random.Random | None = None,
    ):
        self.conn = conn
        self.worker_id = worker_id
        self.fail_rate = fail_rate
        self.poll = poll
        self.work = work
        self.admission = admission
        self.stop = stop or threading.Event()
        self.rng = rng or random.Random()
        self.registered = False
        self._last_beat = 0.0

    def _one(self, name: str, **params) -> dict | None:
        with self.conn.cursor(row_factory=dict_row) as cur:
            cur.execute(statement(name), params)
            return cur.fetchone()

    def register(self) -> None:
        # The registry exists from 0002 on; against 0001 the loop runs unregistered.
        try:
            with self.conn.transaction():
                self._one(
                    "register_worker",
                    worker_id=self.worker_id,
                    host=socket.gethostname(),
                    pid=os.getpid(),
                )
            self.registered = True
        except psycopg.errors.UndefinedTable:
            self.registered = False
        self._last_beat = time.monotonic()

    def beat(self) -> None:
        if self.registered and time.monotonic() - self._last_beat >= WORKER_HEARTBEAT_EVERY:
            with self.conn.transaction():
                self._one("worker_heartbeat", worker_id=self.worker_id)
            self._last_beat = time.monotonic()

    def deliver_one(self) -> bool:
        """Takes and handles one due delivery; False when none was due."""
        with self.conn.transaction():
            job = self._one("take_delivery", worker_id=self.worker_id)
        if job is None:
            return False
        run_id = job["payload"].get("run_id")
        with self.conn.transaction():
            run = self._one("start_run", run_id=run_id) if isinstance(run_id, int) else None
        if run is None:
            with self.conn.transaction():
                self._one("complete_delivery", job_id=job["id"])
            log.get().info("legacy.delivery_dropped", **{"job.id": job["id"], "run.id": run_id})
            return True
        attempt = run["attempts"]
        time.sleep(self.work)  # the agent's work, simulated
        self._one("heartbeat", run_id=run_id)
        self._one(
            "append_output",
            run_id=run_id,
            attempt=attempt,
            kind="text",
            body=f"legacy attempt {attempt}",
        )
        if self.fail_rate > 0 and self.rng.random() < self.fail_rate:
            with self.conn.transaction():
                requeued = self._one("requeue_run", run_id=run_id, error="attempt failed")
                if requeued is not None and requeued["state"] == "queued":
                    self._one(
                        "fail_delivery",
                        job_id=job["id"],
                        worker_id=self.worker_id,
                        error="attempt failed",
                    )
                else:
                    self._one("complete_delivery", job_id=job["id"])
            log.get().info("legacy.attempt_failed", **{"run.id": run_id, "run.attempt": attempt})
        else:
            with self.conn.transaction():
                self._one("complete_run", run_id=run_id)
                self._one("complete_delivery", job_id=job["id"])
            log.get().info("legacy.run_completed", **{"run.id": run_id, "run.attempt": attempt})
        return True

    def run(self) -> int:
        self.register()
        log.get().info("legacy.worker_started", **{"worker.id": self.worker_id})
        while not self.stop.is_set():
            self.beat()
            if self.admission is not None and not self.admission.admit("legacy"):
                self.stop.wait(self.poll)
                continue
            if not self.deliver_one():
                self.stop.wait(self.poll)
        if self.registered:
            with self.conn.transaction():
                self._one("worker_stopped", worker_id=self.worker_id)
        log.get().info("legacy.worker_stopped", **{"worker.id": self.worker_id})
        return 0


def run_legacy_worker(
    dsn: str,
    worker_id: str,
    *,
    fail_rate: float = 0.0,
    poll: float = 0.05,
    work: float = 0.0,
    admission: Admission | None = None,
    stop: threading.Event | SignalStop | None = None,
) -> int:
    """Runs the legacy delivery loop until `stop` is set; returns the exit code (0)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return LegacyWorker(
            conn,
            worker_id,
            fail_rate=fail_rate,
            poll=poll,
            work=work,
            admission=admission,
            stop=stop,
        ).run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m runlane.legacy", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--dsn", default=os.environ.get("RUNLANE_DSN"), required=False)
    parser.add_argument("--worker-id", required=True)
    parser.add_argument("--fail-rate", type=float, default=0.0)
    parser.add_argument("--poll", type=float, default=0.05)
    parser.add_argument(
        "--work", type=float, default=0.0, help="seconds each attempt 'runs' (rehearsals)"
    )
    parser.add_argument("--memory-probe", default=None, help="module:attr of a memory probe")
    parser.add_argument("--memory-buffer", type=int, default=DEFAULT_BUFFER)
    args = parser.parse_args(argv)
    if not args.dsn:
        parser.error("--dsn or $RUNLANE_DSN is required")
    if not 0.0 <= args.fail_rate <= 1.0:
        parser.error("--fail-rate is between 0 and 1")
    log.configure()
    stop = stop_on_signals()
    admission = Admission(load_probe(args.memory_probe), args.memory_buffer)
    return run_legacy_worker(
        args.dsn,
        args.worker_id,
        fail_rate=args.fail_rate,
        poll=args.poll,
        work=args.work,
        admission=admission,
        stop=stop,
    )


if __name__ == "__main__":
    raise SystemExit(main())
