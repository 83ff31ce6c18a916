"""The chaos soak: real `runlane worker` processes, a real PostgreSQL, faults at random.

    python -m soak.chaos                      # the full soak: >= 20,000 runs, 4 workers
    python -m soak.chaos --runs 1500 --workers 3 --duration 25 --seed 7   # a short one

A throwaway cluster (runlane.pgcluster.LocalCluster) runs with durability ON (fsync,
synchronous_commit, full_page_writes), since durability is what an immediate-mode restart
tests, and with track_commit_timestamp on: every check below orders the journal
(run_events) and the outputs by the commit time of the transaction that wrote them, the
order in which other transactions could see them.

Load: several organizations with different agent_max_concurrency caps; chat agents
(interactive lane: submit_message then publish_run, new and reused threads, so steering
and held messages happen); background agents (create_run 'reaction' and run_now; busy
agents give 'skipped' runs); computers shared by several agents of both lanes; scheduled
agents ('every hour') whose routine clock the driver moves one hour forward every few
seconds (schedule_anchor and next_run_at), so the workers' maintenance leader fires a new
occurrence each time through runlane.tick().

Faults, at random intervals, each kind at least once: kill -9 of a worker (restarted),
SIGTERM of a worker (restarted once it exits), pg_terminate_backend of every connection
of a worker (application_name runlane-worker:<id>), a PostgreSQL restart in fast and in
immediate mode, and a window in which submitted runs are not published (no NOTIFY).

Then the workers drain the queue, stop, and the database and the logs are checked:
every run has exactly one terminal state and one terminal journal row; claims per run
have fences 1, 2, 3… with one return to the queue between two claims (never two live
owners); every output was committed inside the attempt it names; first_response_at never
moved once seen; no organization ever ran more background runs than its cap and no
computer had two owners (sweeps over the attempts' commit-time intervals); no routine
occurrence fired twice; every interactive run started; no acknowledged message was lost;
no attempt was started twice in the logs and no log line holds message text.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from runlane.migrate import migrate
from runlane.pgcluster import LocalCluster

# Durability is what is being tested: an immediate-mode restart must lose nothing that
# was acknowledged. Commit timestamps give the checks the order of visibility.
DURABLE_SETTINGS = {
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "track_commit_timestamp": "on",
    "max_connections": "300",
}

FAULT_KINDS = ("kill9", "sigterm", "terminate_backend", "restart_fast", "restart_immediate",
               "suppress_notify")
TERMINAL_STATES = {"succeeded", "failed", "canceled", "skipped"}
REQUEUE_EVENTS = {"run.lease_expired", "run.retry_scheduled", "run.released"}
# Placed in every message body and prompt: it must never reach a log line.
MARKER = f"soak-secret-{uuid.uuid4().hex}"


@dataclass
class SoakConfig:
    runs: int = 20_000                 # runs to create (all triggers) before the load stops
    workers: int = 4
    duration: float = 240.0            # the fault phase lasts at least this many seconds
    seed: int = 20260301
    caps: tuple[int, ...] = (2, 3, 4, 6)   # one organization per cap
    chat_agents_per_org: int = 6
    background_agents_per_org: int = 8
    scheduled_per_org: int = 2         # of the background agents
    computers_per_org: int = 2         # each shared by several agents of both lanes
    background_share: float = 0.2      # of the submissions
    thread_reuse: float = 0.15         # a chat message on a recently used thread
    lease: float = 4.0
    scan_interval: float = 1.0
    tick_interval: float = 1.0
    leader_retry: float = 1.0
    shutdown_grace: float = 2.0
    echo_delay: float = 0.05           # per chunk: runs are in flight when a fault hits
    echo_chunks: int = 3
    fault_gap: tuple[float, float] = (3.0, 7.0)
    suppress_window: tuple[float, float] = (2.0, 5.0)
    warp_interval: float = 3.0
    drain_timeout: float = 240.0
    workdir: str | None = None
    keep: bool = False                 # keep the cluster and logs afterwards

    @property
    def rate(self) -> float:
        """Submissions per second: the runs spread over the fault phase."""
        return max(self.runs / max(self.duration, 1.0), 1.0)


@dataclass
class Fault:
    kind: str
    at: float                          # epoch seconds when injected
    target: str = ""
    ready_at: float | None = None      # restart: server accepting again; worker: replaced
    held_runs: list[int] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class Report:
    runs: int = 0
    by_lane_state: dict[str, int] = field(default_factory=dict)
    outputs: int = 0
    attempts: int = 0
    claims_after_first: int = 0
    messages_acknowledged: int = 0
    routine_fired: int = 0
    routine_coalesced: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    recoveries: dict[str, int] = field(default_factory=dict)
    max_recovery_s: dict[str, float] = field(default_factory=dict)
    max_orphan_recovery_s: dict[str, float] = field(default_factory=dict)
    orphaned_runs: dict[str, int] = field(default_factory=dict)
    max_unpublished_start_s: float = 0.0
    computer_handovers_after_expiry: int = 0
    worker_tracebacks: int = 0
    max_org_running: dict[str, list[int]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    fault_log: list[dict[str, Any]] = field(default_factory=list)   # faults and recoveries, timed
    settings: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        lines = [
            f"runs: {self.runs} ("
            + ", ".join(f"{k} {v}" for k, v in sorted(self.by_lane_state.items())) + ")",
            f"attempts: {self.attempts} (re-claims {self.claims_after_first}), "
            f"outputs: {self.outputs}, messages acknowledged: {self.messages_acknowledged}",
            f"routines: fired {self.routine_fired}, coalesced {self.routine_coalesced}",
            "faults injected: " + ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items())),
            "recoveries: " + ", ".join(f"{k} {v}" for k, v in sorted(self.recoveries.items())),
            "max recovery (fault -> next claim/finish), s: " + ", ".join(
                f"{k} {v:.2f}" for k, v in sorted(self.max_recovery_s.items())),
            "max orphan recovery (a victim's running run -> requeued/released/closed), s: "
            + ", ".join(f"{k} {v:.2f} ({self.orphaned_runs[k]} runs)"
                        for k, v in sorted(self.max_orphan_recovery_s.items())),
            f"max start of an unpublished chat run without a computer "
            f"(created -> first start), s: "
            f"{self.max_unpublished_start_s:.2f}",
            f"computer handovers after an expired lease (not violations): "
            f"{self.computer_handovers_after_expiry}",
            "max running background runs per org (seen/cap): " + ", ".join(
                f"{k} {v[0]}/{v[1]}" for k, v in sorted(self.max_org_running.items())),
            f"tracebacks on worker stderr: {self.worker_tracebacks}",
            "phases, s: " + ", ".join(f"{k} {v:.1f}" for k, v in self.seconds.items()),
            f"violations: {len(self.violations)}",
        ]
        lines += [f"  - {v}" for v in self.violations[:50]]
        return "\n".join(lines)


def _connection_error(exc: BaseException) -> bool:
    return isinstance(exc, psycopg.OperationalError)


class Db:
    """One autocommit connection that reconnects (the server restarts under us)."""

    def __init__(self, dsn: str, name: str):
        self.dsn = dsn
        self.name = name
        self.conn: psycopg.Connection | None = None

    def _connect(self, deadline: float) -> psycopg.Connection:
        while True:
            try:
                return psycopg.connect(self.dsn, autocommit=True, connect_timeout=3,
                                       application_name=f"soak-{self.name}")
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def execute(self, sql: str, params: Any = None, fetch: str = "all",
                retry: bool = True, timeout: float = 60.0) -> Any:
        """Run one statement; on a broken connection reconnect and, when `retry`, resend
        (only for statements that are safe to repeat)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.conn is None or self.conn.closed:
                    self.conn = self._connect(deadline)
                cur = self.conn.execute(sql, params)
                if fetch == "all":
                    return cur.fetchall()
                if fetch == "one":
                    return cur.fetchone()
                return None
            except psycopg.OperationalError:
                if self.conn is not None:
                    self.conn.close()
                self.conn = None
                if not retry or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


class WorkerSlot:
    """One of the N worker processes; each restart is a new generation (a new worker id)."""

    def __init__(self, chaos: Chaos, slot: int):
        self.chaos = chaos
        self.slot = slot
        self.generation = 0
        self.proc: subprocess.Popen | None = None
        self.worker_id = ""
        self.logs: list[Path] = []          # stdout: the JSON log lines
        self.stderr_logs: list[Path] = []   # stderr: library warnings, tracebacks
        self._out = None
        self._err = None

    def start(self) -> None:
        cfg = self.chaos.config
        self.generation += 1
        self.worker_id = f"soak-w{self.slot}-g{self.generation}"
        log_path = self.chaos.workdir / "logs" / f"{self.worker_id}.log"
        self.logs.append(log_path)
        self.stderr_logs.append(log_path.with_suffix(".stderr"))
        cmd = [sys.executable, "-m", "runlane", "worker", "--dsn", self.chaos.dsn,
               "--worker-id", self.worker_id, "--lane", "interactive", "--lane", "background",
               "--agent", "runlane.agents.echo:agent", "--lease", str(cfg.lease),
               "--scan-interval", str(cfg.scan_interval),
               "--tick-interval", str(cfg.tick_interval),
               "--leader-retry", str(cfg.leader_retry),
               "--shutdown-grace", str(cfg.shutdown_grace),
               "--memory-buffer-mb", "1"]
        env = {**os.environ, "PYTHONUNBUFFERED": "1",
               "RUNLANE_ECHO_DELAY": str(cfg.echo_delay),
               "RUNLANE_ECHO_CHUNKS": str(cfg.echo_chunks)}
        self._close_files()
        self._out = open(log_path, "w")  # noqa: SIM115 - closed on the next start/close
        self._err = open(self.stderr_logs[-1], "w")  # noqa: SIM115 - likewise
        self.proc = subprocess.Popen(cmd, stdout=self._out, stderr=self._err,
                                     env=env, start_new_session=True)

    def _close_files(self) -> None:
        for f in (self._out, self._err):
            if f is not None:
                f.close()
        self._out = self._err = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            self.proc.send_signal(sig)

    def wait(self, timeout: float) -> bool:
        try:
            self.proc.wait(timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def close(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self._close_files()


class Chaos:
    def __init__(self, config: SoakConfig):
        self.config = config
        self.rng = random.Random(config.seed)
        self.workdir = Path(config.workdir or tempfile.mkdtemp(prefix="runlane-soak-"))
        (self.workdir / "logs").mkdir(parents=True, exist_ok=True)
        self.cluster: LocalCluster | None = None
        self.dsn = ""
        self.slots: list[WorkerSlot] = []
        self.faults: list[Fault] = []
        self.recoveries: Counter[str] = Counter()
        self.acknowledged: list[int] = []           # message ids the API returned
        self.unpublished: list[int] = []            # runs created while notifications were off
        self.first_response: dict[int, Any] = {}    # run id -> first value seen
        self.violations: list[str] = []
        self.suppress_until = 0.0
        self.load_done = threading.Event()
        self.faults_done = threading.Event()
        self.stop_sampler = threading.Event()
        self.lock = threading.Lock()
        self.chat_agents: list[str] = []
        self.background_agents: list[str] = []
        self.scheduled_agents: list[str] = []
        self.created = 0
        self.errors: Counter[str] = Counter()

    # -- setup -----------------------------------------------------------------------
    def setup(self) -> None:
        # Its own temporary data directory: when we are root the server user must own it.
        self.cluster = LocalCluster(settings=DURABLE_SETTINGS)
        self.cluster.start()
        with psycopg.connect(self.cluster.dsn, autocommit=True) as conn:
            conn.execute("create database soak")
        self.dsn = self.cluster.dsn_for("soak")
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            migrate(conn)
            self._populate(conn)

    def _populate(self, conn: psycopg.Connection) -> None:
        cfg = self.config
        for o, cap in enumerate(cfg.caps):
            org = f"org-{o}"
            owner = f"owner-{o}"
            conn.execute("insert into runlane.platform_settings (org_id, agent_max_concurrency) "
                         "values (%s, %s)", (org, cap))
            conn.execute("insert into runlane.users (user_id, org_id, timezone) "
                         "values (%s, %s, %s)",
                         (owner, org, ["UTC", "Europe/Berlin", "America/New_York"][o % 3]))
            computers = [f"box-{o}-{c}" for c in range(cfg.computers_per_org)]
            agents = ([("chat", i) for i in range(cfg.chat_agents_per_org)]
                      + [("bg", i) for i in range(cfg.background_agents_per_org)])
            for n, (kind, i) in enumerate(agents):
                agent_id = f"{kind}-{o}-{i}"
                # Every third agent shares one of the organization's computers.
                computer = computers[n % len(computers)] if computers and n % 3 == 0 else None
                scheduled = kind == "bg" and i < cfg.scheduled_per_org
                conn.execute(
                    "insert into runlane.agents (agent_id, org_id, owner_id, model, prompt, "
                    "computer_id, schedule) values (%s, %s, %s, 'echo', %s, %s, %s)",
                    (agent_id, org, owner, f"Routine work {MARKER}", computer,
                     "every hour" if scheduled else ""))
                if kind == "chat":
                    self.chat_agents.append(agent_id)
                else:
                    self.background_agents.append(agent_id)
                if scheduled:
                    self.scheduled_agents.append(agent_id)

    # -- load ------------------------------------------------------------------------
    def _load(self) -> None:
        cfg = self.config
        rng = random.Random(cfg.seed + 1)
        db = Db(self.dsn, "load")
        threads: list[tuple[str, str]] = []
        interval = 1.0 / cfg.rate
        next_at = time.monotonic()
        next_warp = time.monotonic() + cfg.warp_interval
        n = 0
        try:
            while self.created < cfg.runs:
                now = time.monotonic()
                if now < next_at:
                    time.sleep(next_at - now)
                next_at += interval
                if time.monotonic() > next_at + 5:  # far behind (a restart): do not burst
                    next_at = time.monotonic()
                if time.monotonic() >= next_warp:
                    next_warp = time.monotonic() + cfg.warp_interval
                    self._warp(db)
                n += 1
                try:
                    if rng.random() < cfg.background_share:
                        self._background(db, rng)
                    else:
                        self._chat(db, rng, threads)
                except psycopg.OperationalError:
                    self.errors["load.connection"] += 1
                except psycopg.Error as exc:
                    self.errors[f"load.{exc.sqlstate}"] += 1
                if n % 200 == 0:
                    row = db.execute("select count(*) from runlane.runs", fetch="one")
                    self.created = row[0]
        finally:
            db.close()
            self.load_done.set()

    def _publish(self, db: Db, run_id: int) -> None:
        if time.time() < self.suppress_until:
            with self.lock:
                self.unpublished.append(run_id)
            return
        try:
            db.execute("select runlane.publish_run(%s)", (run_id,), fetch="none", retry=False)
        except psycopg.OperationalError:
            self.errors["publish.connection"] += 1  # harmless: the scan recovers the run

    def _chat(self, db: Db, rng: random.Random, threads: list[tuple[str, str]]) -> None:
        if threads and rng.random() < self.config.thread_reuse:
            agent, thread = rng.choice(threads[-50:])
        else:
            agent, thread = rng.choice(self.chat_agents), f"th-{uuid.uuid4().hex[:12]}"
            threads.append((agent, thread))
        body = f"hello {rng.randint(0, 10**6)} {MARKER}"
        # Not resent on a broken connection: the outcome of that commit is unknown.
        row = db.execute("select * from runlane.submit_message(%s, %s, %s)",
                         (agent, thread, body), fetch="one", retry=False)
        message_id, run_id, disposition = row
        with self.lock:
            self.acknowledged.append(message_id)
        if disposition == "created":
            self.created += 1
            self._publish(db, run_id)

    def _background(self, db: Db, rng: random.Random) -> None:
        agent = rng.choice(self.background_agents)
        if rng.random() < 0.5:
            run_id = db.execute("select runlane.create_run(%s, 'reaction')", (agent,),
                                fetch="one", retry=False)[0]
            state = None
        else:
            row = db.execute("select run_id, state from runlane.run_now(%s)", (agent,),
                             fetch="one", retry=False)
            run_id, state = row
        self.created += 1
        if state != "skipped":
            self._publish(db, run_id)

    def _warp(self, db: Db) -> None:
        """Move the scheduled agents' routine clock one hour on: the leader's next tick
        finds a new occurrence (a little before now) and fires, coalesces or skips."""
        try:
            db.execute(
                "update runlane.agents set schedule_anchor = now() - interval '1 hour 0.5 second', "
                "next_run_at = now() - interval '1 second' where agent_id = any(%s)",
                (self.scheduled_agents,), fetch="none", retry=False)
        except psycopg.OperationalError:
            self.errors["warp.connection"] += 1

    # -- sampling --------------------------------------------------------------------
    def _sample(self) -> None:
        db = Db(self.dsn, "sampler")
        try:
            while not self.stop_sampler.wait(1.0):
                try:
                    self._sample_once(db)
                except psycopg.Error:
                    self.errors["sampler"] += 1
        finally:
            db.close()

    def _sample_once(self, db: Db) -> None:
        rows = db.execute("select run_id, first_response_at from runlane.runs "
                          "where first_response_at is not null", retry=False)
        for run_id, value in rows:
            seen = self.first_response.setdefault(run_id, value)
            if seen != value:
                self.violations.append(
                    f"first_response_at of run {run_id} moved from {seen} to {value}")
                self.first_response[run_id] = value

    # -- faults ----------------------------------------------------------------------
    def _faults(self) -> None:
        cfg = self.config
        rng = self.rng
        db = Db(self.dsn, "driver")
        kinds = list(FAULT_KINDS)
        rng.shuffle(kinds)        # every kind once first, in a random order, then at random
        started = time.monotonic()
        try:
            while True:
                pending = kinds.pop() if kinds else None
                if pending is None and self.load_done.is_set() \
                        and time.monotonic() - started >= cfg.duration:
                    break
                time.sleep(rng.uniform(*cfg.fault_gap))
                kind = pending or rng.choice(FAULT_KINDS)
                try:
                    self._inject(kind, db)
                except psycopg.Error:
                    self.errors[f"fault.{kind}"] += 1  # the server was away; try another
        finally:
            db.close()
            self.faults_done.set()

    def _victim(self) -> WorkerSlot:
        alive = [s for s in self.slots if s.alive()]
        return self.rng.choice(alive or self.slots)

    def _held(self, db: Db, worker_id: str) -> list[int]:
        rows = db.execute("select run_id from runlane.runs where state = 'running' "
                          "and lease_owner = %s", (worker_id,))
        return [r[0] for r in rows]

    def _inject(self, kind: str, db: Db) -> None:
        cfg = self.config
        if kind in ("kill9", "sigterm"):
            slot = self._victim()
            fault = Fault(kind, time.time(), slot.worker_id,
                          held_runs=self._held(db, slot.worker_id))
            fault.at = time.time()
            slot.signal(signal.SIGKILL if kind == "kill9" else signal.SIGTERM)
            self.faults.append(fault)
            exited = slot.wait(cfg.shutdown_grace + 15)
            if not exited:
                slot.signal(signal.SIGKILL)
                slot.wait(10)
                fault.detail["forced"] = True
            fault.detail["exit_code"] = slot.proc.returncode
            time.sleep(self.rng.uniform(0.2, 1.0))
            slot.start()
            fault.ready_at = time.time()
            self.recoveries["worker_restarted"] += 1
        elif kind == "terminate_backend":
            slot = self._victim()
            fault = Fault(kind, time.time(), slot.worker_id,
                          held_runs=self._held(db, slot.worker_id))
            fault.at = time.time()
            rows = db.execute(
                "select count(*) filter (where pg_terminate_backend(pid)) from pg_stat_activity "
                "where application_name like %s", (f"runlane-worker:{slot.worker_id}%",))
            fault.detail["terminated"] = rows[0][0]
            fault.ready_at = fault.at
            self.faults.append(fault)
            self.recoveries["worker_reconnected"] += 1  # the worker itself reconnects
        elif kind in ("restart_fast", "restart_immediate"):
            mode = kind.split("_")[1]
            fault = Fault(kind, time.time(), mode)
            self.faults.append(fault)
            db.close()
            self.cluster.restart(mode)
            fault.ready_at = time.time()
            self.recoveries["postgres_restarted"] += 1
        elif kind == "suppress_notify":
            window = self.rng.uniform(*cfg.suppress_window)
            fault = Fault(kind, time.time(), detail={"window_s": round(window, 2)})
            self.suppress_until = fault.at + window
            fault.ready_at = fault.at  # service goes on; the scan starts what is not announced
            self.faults.append(fault)
            self.recoveries["notifications_resumed"] += 1
        else:
            raise ValueError(kind)

    # -- the soak --------------------------------------------------------------------
    def run(self) -> Report:
        report = Report(settings={k: v for k, v in asdict(self.config).items()
                                  if k not in ("workdir", "keep")})
        t0 = time.monotonic()
        try:
            self.setup()
            report.seconds["setup"] = time.monotonic() - t0
            self.slots = [WorkerSlot(self, i) for i in range(self.config.workers)]
            for slot in self.slots:
                slot.start()
            self._wait_ready()
            t1 = time.monotonic()
            threads = [threading.Thread(target=self._load, name="load", daemon=True),
                       threading.Thread(target=self._faults, name="faults", daemon=True),
                       threading.Thread(target=self._sample, name="sampler", daemon=True)]
            for t in threads:
                t.start()
            threads[0].join()
            threads[1].join()
            report.seconds["load_and_faults"] = time.monotonic() - t1
            t2 = time.monotonic()
            for slot in self.slots:      # every slot serves while the queue drains
                if not slot.alive():
                    slot.start()
            self.suppress_until = 0.0
            drained = self._drain()
            self.stop_sampler.set()
            threads[2].join()
            report.seconds["drain"] = time.monotonic() - t2
            for slot in self.slots:
                slot.signal(signal.SIGTERM)
            for slot in self.slots:
                if not slot.wait(self.config.shutdown_grace + 30):
                    slot.close()
            if not drained:
                self.violations.append("the queue did not drain: queued or running runs "
                                       f"remain after {self.config.drain_timeout:.0f} s")
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                self._sample_once(Db(self.dsn, "final"))
                Checks(self, conn, report).run()
            report.seconds["total"] = time.monotonic() - t0
            return report
        finally:
            for slot in self.slots:
                slot.close()
            if self.cluster is not None:
                if self.config.keep:
                    self.cluster.stop("fast")
                else:
                    self.cluster.destroy()
                    shutil.rmtree(self.workdir, ignore_errors=True)

    def _wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready = 0
            for slot in self.slots:
                text = slot.logs[-1].read_text() if slot.logs[-1].exists() else ""
                ready += text.count('"dispatch.ready"') >= 2
            if ready == len(self.slots):
                return
            time.sleep(0.1)
        raise RuntimeError("workers did not become ready")

    def _drain(self) -> bool:
        db = Db(self.dsn, "drain")
        deadline = time.monotonic() + self.config.drain_timeout
        try:
            while time.monotonic() < deadline:
                left = db.execute("select count(*) from runlane.runs "
                                  "where state in ('queued', 'running')", fetch="one")[0]
                if left == 0:
                    return True
                for slot in self.slots:
                    if not slot.alive():
                        slot.start()
                time.sleep(0.5)
            return False
        finally:
            db.close()


class Checks:
    """Every property, from the database (commit-time order) and the worker logs."""

    def __init__(self, chaos: Chaos, conn: psycopg.Connection, report: Report):
        self.chaos = chaos
        self.conn = conn
        self.report = report
        self.v = chaos.violations

    def run(self) -> None:
        conn = self.conn
        self.runs = {r[0]: r for r in conn.execute(
            "select run_id, org_id, lane, trigger, state, reason, computer_id, attempts, fence, "
            "first_started_at, first_response_at, extract(epoch from created_at), "
            "extract(epoch from first_started_at) from runlane.runs order by run_id")}
        self.events = defaultdict(list)
        for run_id, event_id, event, detail, ts in conn.execute(
                "select e.run_id, e.event_id, e.event, e.detail, "
                "extract(epoch from pg_xact_commit_timestamp(e.xmin))::float8 "
                "from runlane.run_events as e order by e.run_id, 5, e.event_id"):
            self.events[run_id].append((ts, event_id, event, detail or {}))
        self.outputs = conn.execute(
            "select o.run_id, o.attempt, "
            "extract(epoch from pg_xact_commit_timestamp(o.xmin))::float8 "
            "from runlane.run_outputs as o").fetchall()
        self.caps = dict(conn.execute(
            "select org_id, agent_max_concurrency from runlane.platform_settings").fetchall())
        rep = self.report
        rep.runs = len(self.runs)
        rep.by_lane_state = dict(Counter(f"{r[2]}/{r[4]}" for r in self.runs.values()))
        rep.outputs = len(self.outputs)
        rep.messages_acknowledged = len(self.chaos.acknowledged)
        rep.faults = dict(Counter(f.kind for f in self.chaos.faults))
        rep.recoveries = dict(self.chaos.recoveries)
        rep.fault_log = [{**asdict(f), "held_runs": f.held_runs} for f in self.chaos.faults]
        self.attempts()
        self.outputs_within_attempts()
        self.first_response()
        self.org_caps()
        self.computers()
        self.schedules()
        self.interactive_started()
        self.messages()
        self.logs()
        self.recovery_times()
        rep.violations = list(self.v)

    # exactly one terminal state; claims: fences 1, 2, 3… with one requeue between two
    def attempts(self) -> None:
        self.intervals: dict[tuple[int, int], list] = {}   # (run, attempt) -> [start, end, how]
        claims = 0
        for run_id, run in self.runs.items():
            state = run[4]
            if state not in TERMINAL_STATES:
                self.v.append(f"run {run_id} is still {state}")
            terminal = [e for e in self.events[run_id]
                        if e[2] == "run.skipped" or e[2] == "run.finished"]
            if len(terminal) != 1:
                self.v.append(f"run {run_id} has {len(terminal)} terminal journal rows")
            elif terminal[0][2] == "run.finished" and terminal[0][3].get("outcome") != state:
                self.v.append(f"run {run_id} is {state} but its journal says "
                              f"{terminal[0][3].get('outcome')}")
            elif terminal[0][2] == "run.skipped" and state != "skipped":
                self.v.append(f"run {run_id} was journaled skipped but is {state}")
            open_attempt = None
            last_fence = 0
            closed = False
            for ts, _eid, event, detail in self.events[run_id]:
                if event == "run.claimed":
                    claims += 1
                    fence, attempt = int(detail["fence"]), int(detail["attempt"])
                    if closed:
                        self.v.append(f"run {run_id} claimed (fence {fence}) after it ended")
                    if open_attempt is not None:
                        self.v.append(f"run {run_id} claimed at fence {fence} while attempt "
                                      f"{open_attempt} still owned it (two live owners)")
                    if fence != last_fence + 1:
                        self.v.append(f"run {run_id} fence {fence} after {last_fence}")
                    last_fence = fence
                    open_attempt = attempt
                    self.intervals[(run_id, attempt)] = [ts, None, None]
                elif event in REQUEUE_EVENTS or event == "run.finished":
                    if open_attempt is not None:
                        self.intervals[(run_id, open_attempt)][1:] = [ts, (event, detail)]
                        open_attempt = None
                    elif not (event == "run.finished" and detail.get("reason") == "redundant"):
                        self.v.append(f"run {run_id}: {event} without an owner")
                    if event == "run.finished":
                        closed = True
            if last_fence != run[8]:
                self.v.append(f"run {run_id} fence {run[8]} but {last_fence} claims journaled")
        self.report.attempts = claims
        self.report.claims_after_first = claims - len({k[0] for k in self.intervals})

    def outputs_within_attempts(self) -> None:
        bad = 0
        for run_id, attempt, ts in self.outputs:
            span = self.intervals.get((run_id, attempt))
            if span is None or ts < span[0] or (span[1] is not None and ts > span[1]):
                bad += 1
                if bad <= 5:
                    self.v.append(f"output of run {run_id} attempt {attempt} committed outside "
                                  f"that attempt's ownership")
        if bad > 5:
            self.v.append(f"... {bad} outputs outside their attempt in all")

    def first_response(self) -> None:
        for run_id, seen in self.chaos.first_response.items():
            now = self.runs[run_id][10]
            if now != seen:
                self.v.append(f"first_response_at of run {run_id} moved from {seen} to {now}")

    def _sweep(self, key_of) -> dict[Any, list[tuple[float, int, tuple[int, int]]]]:
        points = defaultdict(list)
        for (run_id, attempt), (start, end, _how) in self.intervals.items():
            key = key_of(self.runs[run_id])
            if key is None:
                continue
            points[key].append((start, 1, (run_id, attempt)))
            points[key].append((end if end is not None else float("inf"), 0, (run_id, attempt)))
        for key in points:
            points[key].sort()   # an end (0) before a start (1) at the same instant
        return points

    def org_caps(self) -> None:
        points = self._sweep(lambda r: r[1] if r[2] == "background" else None)
        for org, pts in points.items():
            running = peak = 0
            for ts, delta, who in pts:
                running += 1 if delta else -1
                if running > self.caps[org]:
                    self.v.append(f"{org} ran {running} background runs (cap {self.caps[org]}) "
                                  f"at {ts:.6f}, claim of run {who[0]}")
                peak = max(peak, running)
            self.report.max_org_running[org] = [peak, self.caps[org]]

    def computers(self) -> None:
        outputs_by_attempt = defaultdict(list)
        for run_id, attempt, ts in self.outputs:
            outputs_by_attempt[(run_id, attempt)].append(ts)
        for computer, pts in self._sweep(lambda r: r[6]).items():
            holders: set[tuple[int, int]] = set()
            for ts, delta, who in pts:
                if not delta:
                    holders.discard(who)
                    continue
                for other in holders:
                    how = self.intervals[other][2]
                    reaped = how is not None and (
                        how[0] == "run.lease_expired"
                        or (how[0] == "run.finished" and how[1].get("reason") == "stale"))
                    late_writes = [t for t in outputs_by_attempt[other] if t > ts]
                    if reaped and not late_writes:
                        self.report.computer_handovers_after_expiry += 1
                    else:
                        self.v.append(f"computer {computer}: run {who[0]} claimed it while run "
                                      f"{other[0]} attempt {other[1]} still held it "
                                      f"(ended by {how[0] if how else 'nothing'}, "
                                      f"{len(late_writes)} outputs after the takeover)")
                holders.add(who)

    def schedules(self) -> None:
        dup = self.conn.execute(
            "select count(*) from (select 1 from runlane.runs where timer_routine is not null "
            "group by timer_routine, timer_occurrence having count(*) > 1) as d").fetchone()[0]
        if dup:
            self.v.append(f"{dup} routine occurrences have more than one run")
        seen: Counter[tuple[str, str]] = Counter()
        for run_id, events in self.events.items():
            for _ts, _eid, event, detail in events:
                if event == "routine.fired":
                    self.report.routine_fired += 1
                elif event == "routine.coalesced":
                    self.report.routine_coalesced += 1
                else:
                    continue
                seen[(self._agent_of(run_id), detail["occurrence"])] += 1
        twice = [k for k, n in seen.items() if n > 1]
        if twice:
            self.v.append(f"{len(twice)} routine occurrences fired or coalesced twice")

    def _agent_of(self, run_id: int) -> str:
        if not hasattr(self, "_agents"):
            self._agents = dict(self.conn.execute(
                "select run_id, agent_id from runlane.runs").fetchall())
        return self._agents[run_id]

    def interactive_started(self) -> None:
        never = [r[0] for r in self.runs.values() if r[2] == "interactive" and r[9] is None]
        if never:
            self.v.append(f"{len(never)} interactive runs never started (e.g. {never[:5]})")

    def messages(self) -> None:
        acked = self.chaos.acknowledged
        found, unattached = self.conn.execute(
            "select count(*), count(*) filter (where run_id is null) from runlane.messages "
            "where message_id = any(%s)", (acked,)).fetchone()
        if found != len(acked):
            self.v.append(f"{len(acked) - found} acknowledged messages are missing")
        if unattached:
            self.v.append(f"{unattached} acknowledged messages never joined a run")

    def logs(self) -> None:
        started: Counter[tuple[int, int]] = Counter()
        for slot in self.chaos.slots:
            for path in slot.logs:
                lines = path.read_text(errors="replace").splitlines()
                for n, line in enumerate(lines):
                    if MARKER in line:
                        self.v.append(f"message text in a log line of {path.name}")
                    try:
                        record = json.loads(line)
                    except ValueError:
                        # A process killed mid-write may leave one partial last line;
                        # anything else on stdout (a traceback) is worth a look.
                        if n != len(lines) - 1:
                            self.v.append(f"{path.name}: a line that is not JSON: {line[:80]}")
                        continue
                    if record.get("message") == "run.execution_started":
                        started[(record.get("run.id"), record.get("run.attempt"))] += 1
            for path in slot.stderr_logs:
                text = path.read_text(errors="replace") if path.exists() else ""
                if MARKER in text:
                    self.v.append(f"message text on the stderr of {path.name}")
                self.report.worker_tracebacks += text.count("Traceback (most recent call last)")
        for key, n in started.items():
            if n > 1:
                self.v.append(f"run {key[0]} attempt {key[1]} started {n} times in the logs")
            if key not in self.intervals:
                self.v.append(f"run {key[0]} attempt {key[1]} started in a log, not in the journal")

    def recovery_times(self) -> None:
        rep = self.report
        marks = sorted(ts for events in self.events.values() for ts, _e, ev, _d in events
                       if ev in ("run.claimed", "run.finished"))
        for fault in self.chaos.faults:
            ready = fault.ready_at or fault.at
            i = bisect.bisect_right(marks, ready)
            if i < len(marks):
                took = marks[i] - fault.at
                rep.max_recovery_s[fault.kind] = max(rep.max_recovery_s.get(fault.kind, 0.0), took)
            for run_id in fault.held_runs:
                after = [ts for ts, _e, ev, _d in self.events[run_id]
                         if ts > fault.at and (ev in REQUEUE_EVENTS or ev in
                                               ("run.finished", "run.claimed"))]
                if after:
                    rep.orphaned_runs[fault.kind] = rep.orphaned_runs.get(fault.kind, 0) + 1
                    rep.max_orphan_recovery_s[fault.kind] = max(
                        rep.max_orphan_recovery_s.get(fault.kind, 0.0), after[0] - fault.at)
        for run_id in self.chaos.unpublished:
            run = self.runs.get(run_id)
            # Background runs may wait for their organization's cap or a computer, however
            # they were announced: only chat runs without a computer measure the scan.
            if run is not None and run[12] is not None and run[2] == "interactive" \
                    and run[6] is None:
                rep.max_unpublished_start_s = max(rep.max_unpublished_start_s,
                                                  float(run[12]) - float(run[11]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m soak.chaos",
                                     description=__doc__.split("\n")[0])
    defaults = SoakConfig()
    parser.add_argument("--runs", type=int, default=defaults.runs)
    parser.add_argument("--workers", type=int, default=defaults.workers)
    parser.add_argument("--duration", type=float, default=defaults.duration,
                        help="minimum seconds of the fault phase")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--json", dest="json_path", default=None, help="also write the report here")
    parser.add_argument("--keep", action="store_true", help="keep the cluster data and logs")
    args = parser.parse_args(argv)
    config = SoakConfig(runs=args.runs, workers=args.workers, duration=args.duration,
                        seed=args.seed, keep=args.keep)
    chaos = Chaos(config)
    print(f"soak: {config.runs} runs, {config.workers} workers, >= {config.duration:.0f} s of "
          f"faults, seed {config.seed}, work dir {chaos.workdir}", flush=True)
    report = chaos.run()
    print(report.text())
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(asdict(report), indent=2, default=str))
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
