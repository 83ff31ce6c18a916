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

Faults, at random intervals, each kind at least once (`--faults` selects kinds): kill -9
of a worker (restarted), SIGTERM of a worker (restarted once it exits),
pg_terminate_backend of every connection of a worker (application_name
runlane-worker:<id>), a PostgreSQL restart in fast and in immediate mode, and a window in
which submitted runs are not published (no NOTIFY). And windows that run beside the
others (the fault thread moves on; each ends on its own):

  sigstop_worker[_computer]  SIGSTOP of a worker holding runs (without / with a
                             computer-bound one) for lease + 0.3-1.5 s, then SIGCONT;
  sigstop_leader             SIGSTOP of the maintenance leader (_leader_worker_id: a leader
                             row if the schema has one, else the advisory-lock holder) for
                             `leader_stop_leases` leases, with a planted orphan (a chat run
                             claimed under a worker id nobody runs) that only a working
                             maintenance leader can reap;
  lost_ack                   the reply dropper (soak/reply_dropper.py), a loopback proxy in
                             front of `proxied_workers` slots, loses the reply to one
                             committed claim, one committed step write, one committed
                             output batch and one committed finish;
  notify_queue               a login with no runlane grant LISTENs and holds a transaction
                             open while another pushes `notify_fill_mb` MB of junk
                             notifications (pg_notification_queue_usage() is recorded);
  squat_locks                that login takes the advisory keys runlane used (recent
                             threads, every agent) and, after cutting the leader's
                             maintenance session, the maintenance key; an orphan is planted;
  forged_notify              that login sends malformed and hostile payloads on
                             runlane_runs and runlane_outputs;
  org_lock                   an API login limited to one organization holds put_org on
                             its own organization in an open transaction for 6-9 s (past
                             the 5 s lock_timeout), sending one message of its own from a
                             second session meanwhile;
  notify_half                a login with no runlane grant LISTENs in an open transaction
                             while the NOTIFY queue reads past half: simulated (a fixed
                             runlane.notify_queue_usage(), restored afterwards) or, with
                             --notify-half real, a real 4 GB fill once.

Stream readers (`runlane.stream`) follow fresh chat runs throughout, as a chat client.

Then the workers drain the queue, stop, and the database and the logs are checked
(`--checks` selects checks): every run has exactly one terminal state and one terminal
journal row; claims per run have fences 1, 2, 3… with one return to the queue between two
claims (never two live owners); every output was committed inside the attempt it names;
first_response_at never moved once seen; no organization ever ran more background runs
than its cap and no computer had two owners (sweeps over the attempts' commit-time
intervals); no routine occurrence fired twice; every interactive run started; no
acknowledged message was lost; no attempt was started twice in the logs and no log line
holds message text. And: no write (output, finish, retry, release) of an attempt
committed after another attempt claimed its computer (computer_fencing); no attempt wrote
the same output twice in a row (duplicate_outputs); every stream reader got each output
once, in the committed order, and none died (streams); no attempt whose claim, step,
output batch or finish reply the proxy lost ended by its lease or logged run.lease_lost
(lost_acks); the planted orphans were reaped before their window ended
(maintenance_continues); no
submission hung past the driver's statement_timeout or failed on a lock or a full queue
(submissions); no worker write failed with 54000 (notify_queue); chat start under forged
notifications stays near its median without them (forged_start); no Python traceback on
a worker's stderr (worker_tracebacks); no other organization's background run waits a
whole hold of an organization lock (org_lock); chat first response p99 outside faults
under 10 s, and reported over all and per fault kind (chat_first_response).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import json
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict, deque
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from runlane.agents import VISIBLE_KINDS
from runlane.migrate import migrate
from runlane.pgcluster import LocalCluster
from runlane.stream import stream as follow_stream

from .reply_dropper import ReplyDropper

# Durability is what is being tested: an immediate-mode restart must lose nothing that
# was acknowledged. Commit timestamps give the checks the order of visibility.
DURABLE_SETTINGS = {
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "track_commit_timestamp": "on",
    "max_connections": "300",
}

FAULT_KINDS = (
    "kill9",
    "sigterm",
    "terminate_backend",
    "restart_fast",
    "restart_immediate",
    "suppress_notify",
    "sigstop_worker",
    "sigstop_worker_computer",
    "sigstop_leader",
    "lost_ack",
    "notify_queue",
    "squat_locks",
    "forged_notify",
    "org_lock",
    "notify_half",
)
# Faults that run as a window beside the others (the fault thread moves on at once).
WINDOW_KINDS = {
    "sigstop_worker",
    "sigstop_worker_computer",
    "sigstop_leader",
    "lost_ack",
    "notify_queue",
    "squat_locks",
    "forged_notify",
    "org_lock",
    "notify_half",
}
# Windows that judge maintenance, and the faults that may not overlap them (an open
# organization lock holds up the leader's tick: 5 s per due agent of that organization).
JUDGED_KINDS = {"sigstop_leader", "squat_locks"}
DISTURBING_KINDS = {
    "kill9",
    "sigterm",
    "terminate_backend",
    "restart_fast",
    "restart_immediate",
    "sigstop_worker",
    "sigstop_worker_computer",
    "sigstop_leader",
    "squat_locks",
    "org_lock",
}
# Windows a judged window does not start beside (they stall maintenance themselves).
STALLING_KINDS = {"org_lock"}
# Every check by name; `attempts` and `logs` always run (the others read what they find).
CHECKS = (
    "outputs_within_attempts",
    "first_response",
    "org_caps",
    "computers",
    "schedules",
    "interactive_started",
    "messages",
    "computer_fencing",
    "duplicate_outputs",
    "streams",
    "lost_acks",
    "maintenance_continues",
    "submissions",
    "notify_queue",
    "forged_start",
    "worker_tracebacks",
    "org_lock",
    "chat_first_response",
)
# A login with no runlane grant at all: it squats locks, forges notifications, fills the
# NOTIFY queue. Nothing it does may stop or mislead runlane.
SQUATTER = "soak_squatter"
# API logins limited to one organization each (runlane.scope_api_login): soak_tenant_<o>
# for org-<o>. One of them holds its organization's settings row open (org_lock).
TENANT = "soak_tenant_{}"
# The real reading, restored after a simulated half-full NOTIFY queue (notify_half).
NOTIFY_USAGE_SQL = (
    Path(__file__).resolve().parents[1] / "sql" / "functions" / "notify" / "notify_queue_usage.sql"
)
SIMULATED_USAGE = """
create or replace function runlane.notify_queue_usage() returns double precision
language sql stable security definer set search_path = pg_catalog, pg_temp
as $$ select {}::float8 $$
"""
MAINTENANCE_LOCK = 7_317_002  # the advisory key a leader takes on a schema before migration 0005
FORGED_PAYLOADS = (
    '{"lane":[]}',
    '{"lane":{"a":1}}',
    '{"run_id":1e400}',
    "not json",
    '{"run_id":' + "9" * 400 + "}",
    '{"lane":5}',
    '{"run_id":"x"}',
    "[]",
    "null",
    '{"run_id":-1e400,"lane":null}',
)
WORKER_ID = re.compile(r"soak-w\d+-g\d+")
TERMINAL_STATES = {"succeeded", "failed", "canceled", "skipped"}
REQUEUE_EVENTS = {"run.lease_expired", "run.retry_scheduled", "run.released"}
# Placed in every message body and prompt: it must never reach a log line.
MARKER = f"soak-secret-{uuid.uuid4().hex}"


@dataclass
class SoakConfig:
    runs: int = 20_000  # runs to create (all triggers) before the load stops
    workers: int = 4
    duration: float = 240.0  # the fault phase lasts at least this many seconds
    seed: int = 20260301
    caps: tuple[int, ...] = (2, 3, 4, 6)  # one organization per cap
    chat_agents_per_org: int = 6
    background_agents_per_org: int = 8
    scheduled_per_org: int = 2  # of the background agents
    computers_per_org: int = 2  # each shared by several agents of both lanes
    background_share: float = 0.2  # of the submissions
    thread_reuse: float = 0.15  # a chat message on a recently used thread
    lease: float = 4.0
    scan_interval: float = 1.0
    tick_interval: float = 1.0
    leader_retry: float = 1.0
    leader_ttl: float = 4.0  # the leader lease, where the worker has --leader-ttl
    shutdown_grace: float = 2.0
    echo_delay: float = 0.05  # per chunk: runs are in flight when a fault hits
    echo_chunks: int = 3
    fault_gap: tuple[float, float] = (3.0, 7.0)
    suppress_window: tuple[float, float] = (2.0, 5.0)
    warp_interval: float = 3.0
    faults: tuple[str, ...] = FAULT_KINDS  # the kinds to inject (each at least once)
    checks: tuple[str, ...] = CHECKS  # the checks to run
    stop_past_lease: tuple[float, float] = (0.3, 1.5)  # SIGSTOP of a worker: lease + this
    leader_stop_leases: float = 3.0  # SIGSTOP of the maintenance leader: this many leases
    lost_ack_window: float = 6.0  # the proxy loses one claim, step, batch, finish reply
    notify_fill_mb: int = 256  # junk pushed into the NOTIFY queue a listener pins
    notify_window: tuple[float, float] = (3.0, 5.0)
    squat_window: tuple[float, float] = (8.0, 10.0)
    forge_window: tuple[float, float] = (3.0, 5.0)
    org_lock_hold: tuple[float, float] = (6.0, 9.0)  # longer than the 5 s lock_timeout
    org_lock_bound: float = 5.0  # org_lock: no other organization's run waits a
    # whole hold longer than this with a worker serving
    notify_half: str = "simulated"  # or "real": 4 GB of junk, once (about 45 s to fill)
    notify_half_window: tuple[float, float] = (3.0, 5.0)  # the queue held past half
    notify_half_usage: float = 0.6  # the simulated reading
    notify_half_fill_timeout: float = 600.0  # real: give up filling after this long
    chat_p99_bound: float = 10.0  # chat_first_response: a generous bound on the p99
    # of the messages no fault was acting on
    submit_timeout: float = 3.0  # statement_timeout of the driver's submissions
    stream_readers: int = 3  # runlane.stream followers of chat runs
    proxied_workers: int = 1  # worker slots whose DSN is the reply dropper's
    drain_timeout: float = 240.0
    workdir: str | None = None
    keep: bool = False  # keep the cluster and logs afterwards

    @property
    def rate(self) -> float:
        """Submissions per second: the runs spread over the fault phase."""
        return max(self.runs / max(self.duration, 1.0), 1.0)


@dataclass
class Fault:
    kind: str
    at: float  # epoch seconds when injected
    target: str = ""
    ready_at: float | None = None  # restart: server accepting again; worker: replaced
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
    lost_acks: dict[str, int] = field(default_factory=dict)  # replies lost, by kind
    streams: dict[str, int] = field(default_factory=dict)  # stream readers' tally
    streams_died_of: dict[str, int] = field(default_factory=dict)  # SQLSTATE or error -> readers
    duplicate_outputs: int = 0
    writes_without_computer: int = 0
    maintenance_reap_s: dict[str, float] = field(default_factory=dict)
    max_submit_s: float = 0.0
    driver_errors: dict[str, int] = field(default_factory=dict)
    failed_submissions: list[dict[str, Any]] = field(default_factory=list)  # JSON only
    notify_queue_usage_max: float = 0.0
    forged_start_s: dict[str, float] = field(default_factory=dict)
    org_lock: dict[str, Any] = field(default_factory=dict)  # holds and their effect
    notify_half: dict[str, Any] = field(default_factory=dict)  # the queue past half
    log_55p03: dict[str, int] = field(default_factory=dict)  # worker log event -> lines
    chat_first_response_p99_s: dict[str, float] = field(default_factory=dict)
    chat_first_response_runs: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    violations_by_check: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    fault_log: list[dict[str, Any]] = field(default_factory=list)  # faults and recoveries, timed
    lost_ack_log: list[dict[str, Any]] = field(default_factory=list)  # the proxy's drops
    settings: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        lines = [
            f"runs: {self.runs} ("
            + ", ".join(f"{k} {v}" for k, v in sorted(self.by_lane_state.items()))
            + ")",
            f"attempts: {self.attempts} (re-claims {self.claims_after_first}), "
            f"outputs: {self.outputs}, messages acknowledged: {self.messages_acknowledged}",
            f"routines: fired {self.routine_fired}, coalesced {self.routine_coalesced}",
            "faults injected: " + ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items())),
            "recoveries: " + ", ".join(f"{k} {v}" for k, v in sorted(self.recoveries.items())),
            "max recovery (fault -> next claim/finish), s: "
            + ", ".join(f"{k} {v:.2f}" for k, v in sorted(self.max_recovery_s.items())),
            "max orphan recovery (a victim's running run -> requeued/released/closed), s: "
            + ", ".join(
                f"{k} {v:.2f} ({self.orphaned_runs[k]} runs)"
                for k, v in sorted(self.max_orphan_recovery_s.items())
            ),
            f"max start of an unpublished chat run without a computer "
            f"(created -> first start), s: "
            f"{self.max_unpublished_start_s:.2f}",
            f"computer handovers after an expired lease (not violations): "
            f"{self.computer_handovers_after_expiry}",
            "max running background runs per org (seen/cap): "
            + ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in sorted(self.max_org_running.items())),
            f"tracebacks on worker stderr: {self.worker_tracebacks}",
            "replies lost after commit (proxy): "
            + ", ".join(f"{k} {v}" for k, v in sorted(self.lost_acks.items())),
            "stream readers: " + ", ".join(f"{k} {v}" for k, v in sorted(self.streams.items())),
            f"repeated output chunks: {self.duplicate_outputs}, writes accepted after the "
            f"computer changed hands: {self.writes_without_computer}",
            "maintenance while its leader was stopped or its lock squatted "
            "(planted orphan: lease expiry -> reaped), s: "
            + ", ".join(f"{k} {v:.2f}" for k, v in sorted(self.maintenance_reap_s.items())),
            f"max submission (submit_message/create_run/run_now), s: {self.max_submit_s:.2f}; "
            "driver errors: "
            + (", ".join(f"{k} {v}" for k, v in sorted(self.driver_errors.items())) or "none"),
            f"max NOTIFY queue usage (pg_notification_queue_usage): "
            f"{self.notify_queue_usage_max:.6f}",
            "chat start (created -> first start) under forged notifications, s: "
            + ", ".join(f"{k} {v:.3f}" for k, v in self.forged_start_s.items()),
            self._org_lock_text(),
            self._notify_half_text(),
            "worker log lines with 55P03 (lock timeout): "
            + (", ".join(f"{k} {v}" for k, v in sorted(self.log_55p03.items())) or "none"),
            "chat first response p99 (message -> first output), s: "
            + ", ".join(
                f"{k} {v:.2f} ({self.chat_first_response_runs.get(k, 0)} runs)"
                for k, v in self.chat_first_response_p99_s.items()
            ),
            "phases, s: " + ", ".join(f"{k} {v:.1f}" for k, v in self.seconds.items()),
            f"violations: {len(self.violations)}"
            + (
                " ("
                + ", ".join(f"{k} {v}" for k, v in sorted(self.violations_by_check.items()) if v)
                + ")"
                if any(self.violations_by_check.values())
                else ""
            ),
        ]
        lines += [f"  - {v}" for v in self.violations[:50]]
        return "\n".join(lines)

    def _org_lock_text(self) -> str:
        o = self.org_lock
        if not o.get("holds"):
            return "organization lock held open (org_lock): no hold"
        own = ", ".join(f"{k} {v}" for k, v in sorted(o.get("own_submissions", {}).items()))
        return (
            f"organization lock held open (org_lock): {o['holds']} holds ("
            + ", ".join(f"{h:.1f}" for h in o["hold_s"])
            + " s); other organizations' "
            f"background runs claimed during holds {o['other_claims']} (fewest in one "
            f"hold {o['other_claims_min']}); longest wait of another organization's "
            f"queued run inside a hold {o['longest_other_wait_s']:.2f} s (runs that "
            f"waited a whole hold: {o['whole_hold_waiters']}); the held organization's "
            f"own submissions: {own or 'none'}, slowest {o['own_submission_max_s']:.2f} "
            f"s; longest gap in tick journal rows across a hold "
            f"{o['tick_gap_max_s']:.2f} s"
        )

    def _notify_half_text(self) -> str:
        n = self.notify_half
        if not n.get("windows"):
            return "NOTIFY queue held past half (notify_half): no window"
        text = (
            f"NOTIFY queue held past half (notify_half, {n['mode']}): {n['windows']} "
            f"windows ({n['past_half_s']:.1f} s past half in all); notify.queue_usage "
            f"warnings during them {n['warnings']} (naming the holder: "
            f"{n['warnings_naming_holder']})"
        )
        if n.get("filled_mb"):
            text += (
                f"; filled {n['filled_mb']} MB in {n['fill_s']:.1f} s, usage max "
                f"{n['usage_max']:.3f}"
            )
        return text


def _leader_worker_id(db: Db) -> str | None:
    """The worker id of the current maintenance leader: from a leader lease row when the
    schema has one (any runlane table named like '%leader%' or '%maintenance%': the first
    soak worker id in its rows), else from the session holding the maintenance advisory
    key (its application_name is runlane-worker:<id>:maintenance)."""
    tables = db.execute(
        "select format('%I.%I', table_schema, table_name) from information_schema.tables "
        "where table_schema = 'runlane' and (table_name like '%leader%' "
        "or table_name like '%maintenance%') order by 1"
    )  # no parameters: % as it is
    for (table,) in tables:
        for (row,) in db.execute(f"select row_to_json(l)::text from {table} as l"):
            found = WORKER_ID.search(row or "")
            if found:
                return found.group(0)
    rows = db.execute(
        "select a.application_name from pg_locks as l join pg_stat_activity as a "
        "on a.pid = l.pid where l.locktype = 'advisory' and l.granted and l.classid = 0 "
        "and l.objid = %s and l.objsubid = 1",
        (MAINTENANCE_LOCK,),
    )
    for (name,) in rows:
        found = WORKER_ID.search(name or "")
        if found:
            return found.group(0)
    return None


def _connection_error(exc: BaseException) -> bool:
    return isinstance(exc, psycopg.OperationalError)


class Db:
    """One autocommit connection that reconnects (the server restarts under us)."""

    def __init__(self, dsn: str, name: str, statement_timeout: float | None = None):
        self.dsn = dsn
        self.name = name
        self.conn: psycopg.Connection | None = None
        self.options = (
            f"-c statement_timeout={int(statement_timeout * 1000)}" if statement_timeout else ""
        )

    def _connect(self, deadline: float) -> psycopg.Connection:
        while True:
            try:
                return psycopg.connect(
                    self.dsn,
                    autocommit=True,
                    connect_timeout=3,
                    application_name=f"soak-{self.name}",
                    options=self.options,
                )
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def execute(
        self,
        sql: str,
        params: Any = None,
        fetch: str = "all",
        retry: bool = True,
        timeout: float = 60.0,
    ) -> Any:
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

    def __init__(self, chaos: Chaos, slot: int, dsn: str | None = None):
        self.chaos = chaos
        self.slot = slot
        self.dsn = dsn or chaos.dsn  # the reply dropper's port for a proxied slot
        self.proxied = dsn is not None
        self.stopped = False  # SIGSTOPped now
        self.generation = 0
        self.proc: subprocess.Popen | None = None
        self.worker_id = ""
        self.logs: list[Path] = []  # stdout: the JSON log lines
        self.stderr_logs: list[Path] = []  # stderr: library warnings, tracebacks
        self._out = None
        self._err = None

    def start(self) -> None:
        cfg = self.chaos.config
        self.generation += 1
        self.worker_id = f"soak-w{self.slot}-g{self.generation}"
        log_path = self.chaos.workdir / "logs" / f"{self.worker_id}.log"
        self.logs.append(log_path)
        self.stderr_logs.append(log_path.with_suffix(".stderr"))
        self.stopped = False
        cmd = [
            sys.executable,
            "-m",
            "runlane",
            "worker",
            "--dsn",
            self.dsn,
            "--worker-id",
            self.worker_id,
            "--lane",
            "interactive",
            "--lane",
            "background",
            "--agent",
            "runlane.agents.echo:agent",
            "--lease",
            str(cfg.lease),
            "--scan-interval",
            str(cfg.scan_interval),
            "--tick-interval",
            str(cfg.tick_interval),
            "--leader-retry",
            str(cfg.leader_retry),
            "--shutdown-grace",
            str(cfg.shutdown_grace),
            "--memory-buffer-mb",
            "1",
        ]
        if "--leader-ttl" in self.chaos.worker_help:  # leadership as a lease row
            cmd += ["--leader-ttl", str(cfg.leader_ttl)]
        env = {
            **os.environ,
            "PYTHONUNBUFFERED": "1",
            "RUNLANE_ECHO_DELAY": str(cfg.echo_delay),
            "RUNLANE_ECHO_CHUNKS": str(cfg.echo_chunks),
            # each attempt's first write goes through the worker's output batches
            "RUNLANE_ECHO_PROGRESS": "1",
        }
        self._close_files()
        self._out = open(log_path, "w")  # noqa: SIM115 - closed on the next start/close
        self._err = open(self.stderr_logs[-1], "w")  # noqa: SIM115 - likewise
        self.proc = subprocess.Popen(
            cmd, stdout=self._out, stderr=self._err, env=env, start_new_session=True
        )

    def _close_files(self) -> None:
        for f in (self._out, self._err):
            if f is not None:
                f.close()
        self._out = self._err = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """SIGSTOP: the process keeps its sessions, sockets and leases, and does nothing."""
        if self.alive():
            self.proc.send_signal(signal.SIGSTOP)
            self.stopped = True

    def cont(self) -> None:
        if self.stopped and self.alive():
            self.proc.send_signal(signal.SIGCONT)
        self.stopped = False

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
        self.cont()
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
        self.acknowledged: list[int] = []  # message ids the API returned
        self.unpublished: list[int] = []  # runs created while notifications were off
        self.first_response: dict[int, Any] = {}  # run id -> first value seen
        self.violations: list[str] = []
        self.suppress_until = 0.0
        self.load_done = threading.Event()
        self.faults_done = threading.Event()
        self.stop_sampler = threading.Event()
        self.lock = threading.Lock()
        self.chat_agents: list[str] = []
        self.background_agents: list[str] = []
        self.scheduled_agents: list[str] = []
        self.plain_chat_agents: list[str] = []  # chat agents without a computer
        self.threads: list[tuple[str, str]] = []  # chat threads the load used, in order
        self.created = 0
        self.errors: Counter[str] = Counter()
        self.max_submit_s = 0.0
        self.squat_dsn = ""  # the no-grant login's DSN
        self.proxy: ReplyDropper | None = None  # in front of the proxied slots
        self.windows: list[threading.Thread] = []  # window faults in progress or done
        self.active: set[str] = set()  # window kinds in progress
        self.orphans = 0
        self.stream_queue: deque[int] = deque(maxlen=20)  # chat runs to follow next
        self.streams: dict[int, dict[str, Any]] = {}  # run id -> what a reader saw
        self.notify_usage_max = 0.0
        self.worker_help = ""  # `runlane worker --help`: its options
        self.load_seconds = 0.0
        self.tenant_dsn: dict[str, str] = {}  # org -> its scoped API login's DSN
        self.held_orgs: frozenset[str] = frozenset()  # organizations held open (org_lock)
        self.notify_half_done = False  # real notify_half: once per soak
        self.submitting: tuple[str, str] = ("", "")  # the driver's call in flight, its agent
        self.failed_submissions: list[dict[str, Any]] = []

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
            conn.execute(f"create role {SQUATTER} login")  # and no grant of any kind
            for o in range(len(self.config.caps)):
                login = TENANT.format(o)
                conn.execute(f"create role {login} login")
                conn.execute(f"grant runlane_api to {login}")
                conn.execute("select runlane.scope_api_login(%s, %s)", (login, f"org-{o}"))
                self.tenant_dsn[f"org-{o}"] = (
                    f"postgresql://{login}@127.0.0.1:{self.cluster.port}/soak"
                )
        self.squat_dsn = f"postgresql://{SQUATTER}@127.0.0.1:{self.cluster.port}/soak"
        self.worker_help = subprocess.run(
            [sys.executable, "-m", "runlane", "worker", "--help"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        if "lost_ack" in self.config.faults and self.config.proxied_workers:
            cfg = self.config
            self.proxy = ReplyDropper(
                self.cluster.port, lifetime=(cfg.duration * 4 + cfg.drain_timeout + 600)
            )
            self.proxy.start()

    def _populate(self, conn: psycopg.Connection) -> None:
        cfg = self.config
        for o, cap in enumerate(cfg.caps):
            org = f"org-{o}"
            owner = f"owner-{o}"
            conn.execute(
                "insert into runlane.platform_settings (org_id, agent_max_concurrency) "
                "values (%s, %s)",
                (org, cap),
            )
            conn.execute(
                "insert into runlane.users (user_id, org_id, timezone) values (%s, %s, %s)",
                (owner, org, ["UTC", "Europe/Berlin", "America/New_York"][o % 3]),
            )
            computers = [f"box-{o}-{c}" for c in range(cfg.computers_per_org)]
            agents = [("chat", i) for i in range(cfg.chat_agents_per_org)] + [
                ("bg", i) for i in range(cfg.background_agents_per_org)
            ]
            for n, (kind, i) in enumerate(agents):
                agent_id = f"{kind}-{o}-{i}"
                # Every third agent shares one of the organization's computers.
                computer = computers[n % len(computers)] if computers and n % 3 == 0 else None
                scheduled = kind == "bg" and i < cfg.scheduled_per_org
                conn.execute(
                    "insert into runlane.agents (agent_id, org_id, owner_id, model, prompt, "
                    "computer_id, schedule) values (%s, %s, %s, 'echo', %s, %s, %s)",
                    (
                        agent_id,
                        org,
                        owner,
                        f"Routine work {MARKER}",
                        computer,
                        "every hour" if scheduled else "",
                    ),
                )
                if kind == "chat":
                    self.chat_agents.append(agent_id)
                    if computer is None:
                        self.plain_chat_agents.append(agent_id)
                else:
                    self.background_agents.append(agent_id)
                if scheduled:
                    self.scheduled_agents.append(agent_id)

    # -- load ------------------------------------------------------------------------
    def _load(self) -> None:
        cfg = self.config
        rng = random.Random(cfg.seed + 1)
        # A submission that waits on a lock someone squats fails here instead of hanging
        # the load (counted: "submissions").
        db = Db(self.dsn, "load", statement_timeout=cfg.submit_timeout)
        interval = 1.0 / cfg.rate
        next_at = time.monotonic()
        next_warp = time.monotonic() + cfg.warp_interval
        load_started = time.monotonic()
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
                began = time.monotonic()
                try:
                    if rng.random() < cfg.background_share:
                        self._background(db, rng)
                    else:
                        self._chat(db, rng, self.threads)
                    self.max_submit_s = max(self.max_submit_s, time.monotonic() - began)
                except psycopg.errors.QueryCanceled:
                    self.errors["load.57014"] += 1  # statement_timeout: a hang
                    self._failed_submission("57014", began)
                except psycopg.OperationalError:
                    self.errors["load.connection"] += 1
                except psycopg.Error as exc:
                    self.errors[f"load.{exc.sqlstate}"] += 1
                    self._failed_submission(exc.sqlstate, began)
                if n % 200 == 0:
                    row = db.execute("select count(*) from runlane.runs", fetch="one")
                    self.created = row[0]
        finally:
            db.close()
            self.load_seconds = time.monotonic() - load_started
            self.load_done.set()

    def _failed_submission(self, sqlstate: str | None, began: float) -> None:
        """What failed, for the report's JSON (the first 50)."""
        if len(self.failed_submissions) < 50:
            what, agent = self.submitting
            self.failed_submissions.append(
                {
                    "at": time.time() - (time.monotonic() - began),
                    "sqlstate": sqlstate,
                    "call": what,
                    "agent": agent,
                    "held_orgs": sorted(self.held_orgs),
                }
            )

    def _publish(self, db: Db, run_id: int) -> None:
        if time.time() < self.suppress_until:
            with self.lock:
                self.unpublished.append(run_id)
            return
        try:
            db.execute("select runlane.publish_run(%s)", (run_id,), fetch="none", retry=False)
        except psycopg.OperationalError:
            self.errors["publish.connection"] += 1  # harmless: the scan recovers the run

    @staticmethod
    def _org_of(agent: str) -> str:
        return "org-" + agent.split("-")[1]  # chat-<o>-<i>, bg-<o>-<i>

    def _pick(self, rng: random.Random, agents: list[str]) -> str:
        """An agent of an organization nobody holds open: while its tenant holds its
        settings row (org_lock) that organization sends nothing; its own submission
        during the hold is the fault's, measured there."""
        held = self.held_orgs
        choices = [a for a in agents if self._org_of(a) not in held] if held else agents
        return rng.choice(choices or agents)

    def _chat(self, db: Db, rng: random.Random, threads: list[tuple[str, str]]) -> None:
        reuse = threads[-50:]
        if self.held_orgs:
            reuse = [t for t in reuse if self._org_of(t[0]) not in self.held_orgs]
        if reuse and rng.random() < self.config.thread_reuse:
            agent, thread = rng.choice(reuse)
        else:
            agent, thread = self._pick(rng, self.chat_agents), f"th-{uuid.uuid4().hex[:12]}"
            threads.append((agent, thread))
        body = f"hello {rng.randint(0, 10**6)} {MARKER}"
        self.submitting = ("submit_message", agent)
        # Not resent on a broken connection: the outcome of that commit is unknown.
        row = db.execute(
            "select * from runlane.submit_message(%s, %s, %s)",
            (agent, thread, body),
            fetch="one",
            retry=False,
        )
        message_id, run_id, disposition = row
        with self.lock:
            self.acknowledged.append(message_id)
        if disposition == "created":
            self.created += 1
            self._publish(db, run_id)
            self.stream_queue.append(run_id)

    def _background(self, db: Db, rng: random.Random) -> None:
        agent = self._pick(rng, self.background_agents)
        self.submitting = ("create_run" if rng.random() < 0.5 else "run_now", agent)
        if self.submitting[0] == "create_run":
            run_id = db.execute(
                "select runlane.create_run(%s, 'reaction')", (agent,), fetch="one", retry=False
            )[0]
            state = None
        else:
            row = db.execute(
                "select run_id, state from runlane.run_now(%s)", (agent,), fetch="one", retry=False
            )
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
                (self.scheduled_agents,),
                fetch="none",
                retry=False,
            )
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
        rows = db.execute(
            "select run_id, first_response_at from runlane.runs "
            "where first_response_at is not null",
            retry=False,
        )
        for run_id, value in rows:
            seen = self.first_response.setdefault(run_id, value)
            if seen != value:
                self.violations.append(
                    f"first_response_at of run {run_id} moved from {seen} to {value}"
                )
                self.first_response[run_id] = value

    # -- stream readers ----------------------------------------------------------------
    def _stream_readers(self) -> None:
        """`runlane.stream` followers of fresh chat runs, as a chat client would run them;
        what each yielded is checked against the committed rows ("streams")."""

        async def reader() -> None:
            while not self.stop_sampler.is_set():
                try:
                    run_id = self.stream_queue.pop()
                except IndexError:
                    await asyncio.sleep(0.1)
                    continue
                seen: dict[str, Any] = {
                    "rows": [],
                    "complete": False,
                    "reconnects": 0,
                    "died": None,
                }
                self.streams[run_id] = seen
                await self._follow(run_id, seen)

        async def main() -> None:
            await asyncio.gather(*(reader() for _ in range(self.config.stream_readers)))

        asyncio.run(main())

    async def _follow(self, run_id: int, seen: dict[str, Any]) -> None:
        last = 0
        while not self.stop_sampler.is_set():
            try:
                async with contextlib.aclosing(
                    follow_stream(self.dsn, run_id, after=last, poll=self.config.scan_interval)
                ) as rows:
                    async for row in rows:
                        seen["rows"].append(
                            (row["output_id"], row["attempt"], row["kind"], row["body"])
                        )
                        last = row["output_id"]
                        if self.stop_sampler.is_set():
                            return
                seen["complete"] = True
                return
            except psycopg.OperationalError:
                seen["reconnects"] += 1  # a restart or a terminated backend: resume
                await asyncio.sleep(0.2)
            except Exception as exc:  # noqa: BLE001 - a reader that dies is the finding
                seen["died"] = getattr(exc, "sqlstate", None) or type(exc).__name__
                return

    # -- faults ----------------------------------------------------------------------
    def _faults(self) -> None:
        cfg = self.config
        rng = self.rng
        db = Db(self.dsn, "driver")
        kinds = list(cfg.faults)
        rng.shuffle(kinds)  # every kind once first, in a random order, then at random
        started = time.monotonic()
        try:
            while True:
                if (
                    not kinds
                    and self.load_done.is_set()
                    and time.monotonic() - started >= cfg.duration
                ):
                    break
                time.sleep(rng.uniform(*cfg.fault_gap))
                allowed = [
                    k
                    for k in (reversed(kinds) if kinds else cfg.faults)
                    if self._allowed(k)
                    # the load is over: no new window to wait for at the end
                    and (kinds or not self.load_done.is_set() or k not in WINDOW_KINDS)
                ]
                if not allowed:
                    continue  # what is left waits for a window to end
                kind = allowed[0] if kinds else rng.choice(allowed)
                if kinds:
                    kinds.remove(kind)
                try:
                    self._inject(kind, db)
                except psycopg.Error:
                    self.errors[f"fault.{kind}"] += 1  # the server was away; try another
        finally:
            db.close()
            for t in self.windows:  # every window ends (stopped workers continue) first
                t.join()
            self.faults_done.set()

    def _allowed(self, kind: str) -> bool:
        """One window of a kind at a time; while a window judges maintenance (a stopped
        leader, squatted locks) nothing else that stops workers or the server starts,
        so whether maintenance went on is down to that fault alone."""
        if kind in self.active:
            return False
        if kind == "lost_ack" and not any(s.proxied for s in self._victims()):
            return False  # nobody behind the proxy is running now
        if kind == "notify_half" and self.notify_half_done:
            return False  # a real fill: once per soak
        if kind in JUDGED_KINDS and self.active & STALLING_KINDS:
            return False
        return not (self.active & JUDGED_KINDS and kind in DISTURBING_KINDS)

    def _victims(self) -> list[WorkerSlot]:
        """Slots a fault may hit now: running, not stopped, and not behind the proxy
        while it is losing replies (a lost reply is judged on its own)."""
        spare_proxied = "lost_ack" in self.active
        return [
            s
            for s in self.slots
            if s.alive() and not s.stopped and not (spare_proxied and s.proxied)
        ]

    def _victim(self) -> WorkerSlot:
        alive = self._victims()
        return self.rng.choice(alive or self.slots)

    def _window(self, fault: Fault, body) -> None:
        """A fault that lasts: `body(fault)` runs in its own thread (the fault thread
        moves on); its end is the fault's ready_at."""
        self.active.add(fault.kind)
        self.faults.append(fault)

        def run() -> None:
            try:
                body(fault)
            except Exception as exc:  # noqa: BLE001 - recorded; the soak goes on
                fault.detail["error"] = getattr(exc, "sqlstate", None) or type(exc).__name__
            finally:
                fault.ready_at = time.time()
                fault.detail["window_s"] = round(fault.ready_at - fault.at, 2)
                self.recoveries[f"{fault.kind}_ended"] += 1
                self.active.discard(fault.kind)

        t = threading.Thread(target=run, name=f"window-{fault.kind}", daemon=True)
        self.windows.append(t)
        t.start()

    def _stop_worker(self, fault: Fault) -> None:
        """SIGSTOP a worker past its lease (holding a computer-bound run, or runs without
        one), then SIGCONT: what it writes afterwards must be refused."""
        cfg = self.config
        want_computer = fault.kind == "sigstop_worker_computer"
        db = Db(self.dsn, "sigstop")
        try:
            deadline = time.monotonic() + 5
            while True:
                holders = dict(
                    db.execute(
                        "select lease_owner, bool_or(computer_id is not null) from runlane.runs "
                        "where state = 'running' group by lease_owner"
                    )
                )
                fits = [
                    s
                    for s in self._victims()
                    if s.worker_id in holders and holders[s.worker_id] == want_computer
                ]
                if fits or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            slot = self.rng.choice(fits) if fits else self._victim()
            fault.detail["fallback"] = not fits
            fault.target = slot.worker_id
            fault.held_runs = self._held(db, slot.worker_id)
            fault.detail["computer_runs"] = [
                r[0]
                for r in db.execute(
                    "select run_id from runlane.runs where state = 'running' and lease_owner = %s "
                    "and computer_id is not null",
                    (slot.worker_id,),
                )
            ]
        finally:
            db.close()
        fault.at = time.time()
        slot.stop()
        stopped = cfg.lease + self.rng.uniform(*cfg.stop_past_lease)
        fault.detail["stopped_s"] = round(stopped, 2)
        time.sleep(stopped)
        slot.cont()

    def _plant_orphan(self, db: Db, fault: Fault) -> None:
        """Claim one chat run under a worker id nobody runs, with the soak's lease: once
        that lease expires, only a working maintenance leader brings it back (checked:
        "maintenance_continues")."""
        cfg = self.config
        self.orphans += 1
        owner = f"soak-orphan-{self.orphans}"
        for _ in range(20):
            message_id, _run, _disp = db.execute(
                "select * from runlane.submit_message(%s, %s, %s)",
                (
                    self.rng.choice(self.plain_chat_agents),
                    f"th-orphan-{uuid.uuid4().hex[:8]}",
                    f"orphan {MARKER}",
                ),
                fetch="one",
                retry=False,
            )
            with self.lock:
                self.acknowledged.append(message_id)
            rows = db.execute(
                "select c.run_id, c.attempt from runlane.claim_runs(%s, array['interactive'], "
                "1, %s) as c",
                (owner, timedelta(seconds=cfg.lease)),
                retry=False,
            )
            if rows:
                fault.detail["orphan"] = {
                    "run_id": rows[0][0],
                    "attempt": rows[0][1],
                    "owner": owner,
                }
                return
            time.sleep(0.05)

    def _stop_leader(self, fault: Fault) -> None:
        """SIGSTOP the maintenance leader for several leases: its session (and whatever
        it holds) stays, the process does nothing. Recovery must go on without it."""
        cfg = self.config
        db = Db(self.dsn, "leader")
        try:
            slot = None
            deadline = time.monotonic() + 5
            while slot is None and time.monotonic() < deadline:
                leader = _leader_worker_id(db)
                slot = next((s for s in self._victims() if s.worker_id == leader), None)
                if slot is None:
                    time.sleep(0.2)
            if slot is None:
                fault.detail["leader"] = None
                return
            fault.target = fault.detail["leader"] = slot.worker_id
            fault.held_runs = self._held(db, slot.worker_id)
            fault.at = time.time()
            slot.stop()
            self._plant_orphan(db, fault)
            time.sleep(max(cfg.lease * cfg.leader_stop_leases - (time.time() - fault.at), 0))
            slot.cont()
        finally:
            db.close()

    def _lose_acks(self, fault: Fault) -> None:
        """The proxy in front of the proxied slots loses the reply to one committed claim,
        one committed step write, one committed output batch and one committed finish
        (whichever come first)."""
        proxy = self.proxy
        before = len(proxy.drops)
        for kind in ("claim", "step", "outputs", "finish"):
            proxy.arm(kind)
        end = fault.at + self.config.lost_ack_window
        while time.time() < end and proxy.armed():
            time.sleep(0.05)
        fault.detail["unmet"] = proxy.disarm()
        fault.detail["lost"] = [d.kind for d in proxy.drops[before:]]

    def _fill_notify_queue(self, fault: Fault) -> None:
        """The feasible version of a full NOTIFY queue: a no-grant login LISTENs and
        leaves a transaction open (so the queue cannot be truncated past it) while another
        pushes `notify_fill_mb` MB of junk notifications; runlane must go on committing.
        PostgreSQL 15's queue takes 8 GB before it refuses: this fills a bounded part."""
        cfg = self.config
        window = self.rng.uniform(*cfg.notify_window)
        holder = psycopg.connect(
            self.squat_dsn, autocommit=True, application_name="soak-notify-holder"
        )
        filler = psycopg.connect(
            self.squat_dsn, autocommit=True, application_name="soak-notify-filler"
        )
        db = Db(self.dsn, "notify-usage")
        usage = 0.0
        try:
            holder.execute("listen soak_junk")
            holder.autocommit = False
            holder.execute("select 1")  # idle in transaction from here on
            filled = 0
            for mb in range(cfg.notify_fill_mb):
                # ~1 MB per statement: 132 distinct notifications of 7,900 bytes (a payload
                # must stay under 8,000).
                filler.execute(
                    "select count(pg_notify('soak_junk', lpad(%s || ':' || g, "
                    "7900, 'x'))) from generate_series(1, 132) as g",
                    (str(mb),),
                )
                filled += 1
                if mb % 8 == 0:
                    usage = max(
                        usage, db.execute("select pg_notification_queue_usage()", fetch="one")[0]
                    )
            fault.detail["filled_mb"] = filled
            while time.time() < fault.at + window:
                usage = max(
                    usage, db.execute("select pg_notification_queue_usage()", fetch="one")[0]
                )
                time.sleep(0.25)
        finally:
            fault.detail["queue_usage_max"] = usage
            self.notify_usage_max = max(self.notify_usage_max, usage)
            with contextlib.suppress(psycopg.Error):
                holder.rollback()  # the queue drains from here
            for conn in (holder, filler):
                conn.close()
            db.close()

    def _squat_locks(self, fault: Fault) -> None:
        """A no-grant login takes the advisory locks runlane used: the keys of the
        recent chat threads and of every agent, and the maintenance leader's key (it
        cuts the leader's maintenance session so the key is up for grabs, then polls
        for it). Submissions must not hang; maintenance must go on. A lost session (a
        restart) squats again."""
        cfg = self.config
        window = self.rng.uniform(*cfg.squat_window)
        db = Db(self.dsn, "squat")
        keys = [f"runlane.thread:{a}/{t}" for a, t in list(self.threads[-50:])] + [
            f"runlane.agent:{a}" for a in self.chat_agents + self.background_agents
        ]
        fault.detail["keys_wanted"] = len(keys)
        conn: psycopg.Connection | None = None
        got = False
        planted = False
        try:
            while time.time() < fault.at + window:
                try:
                    if conn is None or conn.closed:
                        conn = psycopg.connect(
                            self.squat_dsn, autocommit=True, application_name="soak-squatter"
                        )
                        fault.detail["keys_held"] = conn.execute(
                            "select count(*) filter (where pg_try_advisory_lock("
                            "hashtextextended(k, 0))) from unnest(%s::text[]) as k",
                            (keys,),
                        ).fetchone()[0]
                        fault.detail["squats"] = fault.detail.get("squats", 0) + 1
                        got = False
                    if "leader" not in fault.detail:
                        leader = fault.detail["leader"] = _leader_worker_id(db)
                        if leader:
                            fault.detail["leader_sessions_cut"] = db.execute(
                                "select count(*) filter (where pg_terminate_backend(pid)) "
                                "from pg_stat_activity where application_name = %s",
                                (f"runlane-worker:{leader}:maintenance",),
                                fetch="one",
                            )[0]
                    if not got:
                        got = conn.execute(
                            "select pg_try_advisory_lock(%s)", (MAINTENANCE_LOCK,)
                        ).fetchone()[0]
                        fault.detail["maintenance_key_squatted"] = got or fault.detail.get(
                            "maintenance_key_squatted", False
                        )
                    else:
                        conn.execute("select 1")  # notice a lost session at once
                    if not planted and (got or time.time() > fault.at + 2):
                        planted = True
                        self._plant_orphan(db, fault)
                except psycopg.OperationalError:
                    if conn is not None:
                        conn.close()
                    conn = None
                time.sleep(0.02)
        finally:
            if conn is not None and not conn.closed:
                with contextlib.suppress(psycopg.Error):
                    conn.execute("select pg_advisory_unlock_all()")
                conn.close()
            db.close()

    def _forge(self, fault: Fault) -> None:
        """A no-grant login sends malformed and hostile payloads on runlane's channels."""
        window = self.rng.uniform(*self.config.forge_window)
        fault.detail["until"] = fault.at + window
        conn = psycopg.connect(self.squat_dsn, autocommit=True, application_name="soak-forger")
        sent = 0
        pairs = [(c, p) for c in ("runlane_runs", "runlane_outputs") for p in FORGED_PAYLOADS]
        try:
            while time.time() < fault.at + window:
                # One notification per transaction, in a new order each round: a reader
                # that gives up on the rest of a batch still meets every payload.
                self.rng.shuffle(pairs)
                for channel, payload in pairs:
                    conn.execute("select pg_notify(%s, %s)", (channel, payload))
                    sent += 1
                time.sleep(0.05)
        finally:
            fault.detail["sent"] = sent
            conn.close()

    def _hold_org(self, fault: Fault) -> None:
        """An API login limited to one organization (soak_tenant_<o>) opens a transaction,
        calls put_org on its own organization (which locks the organization's settings
        row) and keeps the transaction open past the 5 s lock_timeout, then rolls back.
        From a second session it sends one chat message of its own meanwhile (what its
        own organization's writes meet); the driver sends nothing for that organization
        during the hold. Other organizations' runs must go on (checked: org_lock)."""
        cfg = self.config
        org = self.rng.choice(sorted(self.tenant_dsn))
        hold = self.rng.uniform(*cfg.org_lock_hold)
        fault.target = fault.detail["org"] = org
        self.held_orgs = self.held_orgs | {org}
        time.sleep(0.2)  # the driver's submission in flight ends first
        holder = psycopg.connect(
            self.tenant_dsn[org], connect_timeout=3, application_name="soak-org-holder"
        )
        own = psycopg.connect(
            self.tenant_dsn[org],
            autocommit=True,
            connect_timeout=3,
            application_name="soak-org-own",
            options="-c statement_timeout=15000",
        )
        try:
            holder.execute("select runlane.put_org(%s, '{}'::jsonb)", (org,))
            start = fault.at = time.time()  # held from here: the transaction is open
            fault.detail["hold_start"] = start
            time.sleep(0.5)
            agent = self.rng.choice([a for a in self.plain_chat_agents if self._org_of(a) == org])
            began = time.monotonic()
            try:
                message_id, run_id, disposition = own.execute(
                    "select * from runlane.submit_message(%s, %s, %s)",
                    (agent, f"th-held-{uuid.uuid4().hex[:8]}", f"held {MARKER}"),
                ).fetchone()
                outcome = "ok"
                with self.lock:
                    self.acknowledged.append(message_id)
                if disposition == "created":
                    own.execute("select runlane.publish_run(%s)", (run_id,))
            except psycopg.Error as exc:
                outcome = exc.sqlstate or type(exc).__name__
            fault.detail["own_submission"] = {
                "outcome": outcome,
                "s": round(time.monotonic() - began, 3),
            }
            while time.time() < start + hold:
                try:
                    holder.execute("select 1")  # notice a lost session (a restart)
                except psycopg.OperationalError:
                    fault.detail["broken"] = True
                    break
                time.sleep(0.2)
        finally:
            with contextlib.suppress(psycopg.Error):
                holder.rollback()
            if "hold_start" in fault.detail:
                fault.detail["hold_end"] = time.time()
                fault.detail["hold_s"] = round(
                    fault.detail["hold_end"] - fault.detail["hold_start"], 2
                )
            self.held_orgs = self.held_orgs - {org}
            for conn in (holder, own):
                conn.close()

    def _notify_half(self, fault: Fault) -> None:
        """The NOTIFY queue held past half by a stranger: a login with no runlane grant
        LISTENs and stays idle in a transaction for the window. "simulated" (the default)
        replaces runlane.notify_queue_usage() in the soak's database by a fixed reading
        (notify_half_usage) and restores the real function afterwards; "real" (once per
        soak) pushes 7,999-byte junk notifications until pg_notification_queue_usage()
        reaches 0.5 (4 GB on PostgreSQL 15, about 45 s on a quiet 2-core machine). Either
        way runlane stops notifying and its workers start runs on their scan."""
        cfg = self.config
        window = self.rng.uniform(*cfg.notify_half_window)
        fault.detail["mode"] = cfg.notify_half
        holder = psycopg.connect(
            self.squat_dsn, autocommit=True, application_name="soak-notify-half-holder"
        )
        db = Db(self.dsn, "notify-half")
        replaced = False
        try:
            holder.execute("listen soak_half")
            fault.detail["holder_pid"] = holder.info.backend_pid
            holder.autocommit = False
            holder.execute("select 1")  # idle in transaction from here on
            if cfg.notify_half == "real":
                self.notify_half_done = True
                self._fill_past_half(fault)
            else:
                replaced = True
                db.execute(SIMULATED_USAGE.format(float(cfg.notify_half_usage)), fetch="none")
            fault.detail["past_half_at"] = time.time()
            readings = []
            while time.time() < fault.detail["past_half_at"] + window:
                readings.append(db.execute("select runlane.notify_queue_usage()", fetch="one")[0])
                time.sleep(0.25)
            fault.detail["reading_min"] = min(readings, default=None)
        finally:
            if "past_half_at" in fault.detail:
                fault.detail["past_half_end"] = time.time()
            if replaced:  # the real reading again, whatever happened meanwhile
                db.execute(NOTIFY_USAGE_SQL.read_text(), fetch="none", timeout=120)
            holder.close()  # its LISTEN goes with the session: the queue drains
            db.close()

    def _fill_past_half(self, fault: Fault) -> None:
        filler = psycopg.connect(
            self.squat_dsn, autocommit=True, application_name="soak-notify-half-filler"
        )
        began = time.monotonic()
        batches = 0
        usage = 0.0
        try:
            while usage < 0.5:
                if time.monotonic() - began > self.config.notify_half_fill_timeout:
                    raise TimeoutError("the NOTIFY queue did not reach half")
                # 1,000 distinct notifications of 7,999 bytes (a payload stays under 8,000)
                filler.execute(
                    "select count(pg_notify('soak_half', lpad(%s || ':' || g, "
                    "7999, 'x'))) from generate_series(1, 1000) as g",
                    (str(batches),),
                )
                batches += 1
                usage = filler.execute("select pg_notification_queue_usage()").fetchone()[0]
        finally:
            fault.detail["filled_mb"] = batches * 8
            fault.detail["fill_s"] = round(time.monotonic() - began, 1)
            fault.detail["usage_max"] = usage
            self.notify_usage_max = max(self.notify_usage_max, usage)
            filler.close()

    def _held(self, db: Db, worker_id: str) -> list[int]:
        rows = db.execute(
            "select run_id from runlane.runs where state = 'running' and lease_owner = %s",
            (worker_id,),
        )
        return [r[0] for r in rows]

    def _inject(self, kind: str, db: Db) -> None:
        cfg = self.config
        if kind in ("kill9", "sigterm"):
            slot = self._victim()
            fault = Fault(
                kind, time.time(), slot.worker_id, held_runs=self._held(db, slot.worker_id)
            )
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
            fault = Fault(
                kind, time.time(), slot.worker_id, held_runs=self._held(db, slot.worker_id)
            )
            fault.at = time.time()
            rows = db.execute(
                "select count(*) filter (where pg_terminate_backend(pid)) from pg_stat_activity "
                "where application_name like %s",
                (f"runlane-worker:{slot.worker_id}%",),
            )
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
        elif kind in WINDOW_KINDS:
            if kind == "lost_ack" and self.proxy is None:
                return
            body = {
                "sigstop_worker": self._stop_worker,
                "sigstop_worker_computer": self._stop_worker,
                "sigstop_leader": self._stop_leader,
                "lost_ack": self._lose_acks,
                "notify_queue": self._fill_notify_queue,
                "squat_locks": self._squat_locks,
                "forged_notify": self._forge,
                "org_lock": self._hold_org,
                "notify_half": self._notify_half,
            }[kind]
            self._window(Fault(kind, time.time()), body)
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
        report = Report(
            settings={k: v for k, v in asdict(self.config).items() if k not in ("workdir", "keep")}
        )
        t0 = time.monotonic()
        try:
            self.setup()
            report.seconds["setup"] = time.monotonic() - t0
            n = self.config.workers
            proxied = min(self.config.proxied_workers, n) if self.proxy is not None else 0
            proxy_dsn = (
                f"postgresql://postgres@127.0.0.1:{self.proxy.port}/soak"
                "?sslmode=disable&gssencmode=disable"
                if proxied
                else None
            )
            self.slots = [
                WorkerSlot(self, i, proxy_dsn if i >= n - proxied else None) for i in range(n)
            ]
            for slot in self.slots:
                slot.start()
            self._wait_ready()
            t1 = time.monotonic()
            threads = [
                threading.Thread(target=self._load, name="load", daemon=True),
                threading.Thread(target=self._faults, name="faults", daemon=True),
                threading.Thread(target=self._sample, name="sampler", daemon=True),
                threading.Thread(target=self._stream_readers, name="streams", daemon=True),
            ]
            for t in threads:
                t.start()
            threads[0].join()
            threads[1].join()
            for slot in self.slots:
                slot.cont()
            report.seconds["load_and_faults"] = time.monotonic() - t1
            report.seconds["load"] = self.load_seconds
            t2 = time.monotonic()
            for slot in self.slots:  # every slot serves while the queue drains
                if not slot.alive():
                    slot.start()
            self.suppress_until = 0.0
            drained = self._drain()
            self.stop_sampler.set()
            threads[2].join()
            threads[3].join(30)
            report.seconds["drain"] = time.monotonic() - t2
            for slot in self.slots:
                slot.signal(signal.SIGTERM)
            for slot in self.slots:
                if not slot.wait(self.config.shutdown_grace + 30):
                    slot.close()
            if not drained:
                self.violations.append(
                    "the queue did not drain: queued or running runs "
                    f"remain after {self.config.drain_timeout:.0f} s"
                )
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                self._sample_once(Db(self.dsn, "final"))
                Checks(self, conn, report).run()
            report.seconds["total"] = time.monotonic() - t0
            return report
        finally:
            self.stop_sampler.set()
            for slot in self.slots:
                slot.close()
            if self.proxy is not None:
                self.proxy.close()
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
                left = db.execute(
                    "select count(*) from runlane.runs where state in ('queued', 'running')",
                    fetch="one",
                )[0]
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
        self.runs = {
            r[0]: r
            for r in conn.execute(
                "select run_id, org_id, lane, trigger, state, reason, computer_id, attempts, "
                "fence, first_started_at, first_response_at, extract(epoch from created_at), "
                "extract(epoch from first_started_at) from runlane.runs order by run_id"
            )
        }
        self.events = defaultdict(list)
        for run_id, event_id, event, detail, ts in conn.execute(
            "select e.run_id, e.event_id, e.event, e.detail, "
            "extract(epoch from pg_xact_commit_timestamp(e.xmin))::float8 "
            "from runlane.run_events as e order by e.run_id, 5, e.event_id"
        ):
            self.events[run_id].append((ts, event_id, event, detail or {}))
        self.outputs = conn.execute(
            "select o.run_id, o.attempt, "
            "extract(epoch from pg_xact_commit_timestamp(o.xmin))::float8 "
            "from runlane.run_outputs as o"
        ).fetchall()
        self.output_rows = conn.execute(
            "select o.output_id, o.run_id, o.attempt, o.kind, o.body from runlane.run_outputs "
            "as o order by o.run_id, o.output_id"
        ).fetchall()
        self.caps = dict(
            conn.execute(
                "select org_id, agent_max_concurrency from runlane.platform_settings"
            ).fetchall()
        )
        rep = self.report
        rep.runs = len(self.runs)
        rep.by_lane_state = dict(Counter(f"{r[2]}/{r[4]}" for r in self.runs.values()))
        rep.outputs = len(self.outputs)
        rep.messages_acknowledged = len(self.chaos.acknowledged)
        rep.faults = dict(Counter(f.kind for f in self.chaos.faults))
        rep.recoveries = dict(self.chaos.recoveries)
        rep.fault_log = [{**asdict(f), "held_runs": f.held_runs} for f in self.chaos.faults]
        rep.lost_acks = dict(Counter(d.kind for d in self._drops()))
        rep.lost_ack_log = [asdict(d) for d in self._drops()]
        rep.driver_errors = dict(self.chaos.errors)
        rep.failed_submissions = list(self.chaos.failed_submissions)
        rep.max_submit_s = self.chaos.max_submit_s
        rep.notify_queue_usage_max = self.chaos.notify_usage_max
        self.attempts()
        self.logs()
        for name in CHECKS:
            if name in self.chaos.config.checks:
                before = len(self.v)
                getattr(self, name)()
                rep.violations_by_check[name] = len(self.v) - before
        self.recovery_times()
        self.notify_half_figures()
        rep.violations = list(self.v)

    def _drops(self) -> list[Any]:
        proxy = self.chaos.proxy
        return list(proxy.drops) if proxy is not None else []

    # exactly one terminal state; claims: fences 1, 2, 3… with one requeue between two
    def attempts(self) -> None:
        self.intervals: dict[tuple[int, int], list] = {}  # (run, attempt) -> [start, end, how]
        self.fence_attempt: dict[tuple[int, int], int] = {}
        claims = 0
        for run_id, run in self.runs.items():
            state = run[4]
            if state not in TERMINAL_STATES:
                self.v.append(f"run {run_id} is still {state}")
            terminal = [
                e for e in self.events[run_id] if e[2] == "run.skipped" or e[2] == "run.finished"
            ]
            if len(terminal) != 1:
                self.v.append(f"run {run_id} has {len(terminal)} terminal journal rows")
            elif terminal[0][2] == "run.finished" and terminal[0][3].get("outcome") != state:
                self.v.append(
                    f"run {run_id} is {state} but its journal says {terminal[0][3].get('outcome')}"
                )
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
                        self.v.append(
                            f"run {run_id} claimed at fence {fence} while attempt "
                            f"{open_attempt} still owned it (two live owners)"
                        )
                    # +1 per claim; a promoted server's first claim of a run jumps to its
                    # timeline's floor (runlane._fence_floor: a multiple of 2^32)
                    if fence != last_fence + 1 and not (fence > last_fence and fence % 2**32 == 0):
                        self.v.append(f"run {run_id} fence {fence} after {last_fence}")
                    last_fence = fence
                    open_attempt = attempt
                    self.fence_attempt[(run_id, fence)] = attempt
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
                    self.v.append(
                        f"output of run {run_id} attempt {attempt} committed outside "
                        f"that attempt's ownership"
                    )
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
            points[key].sort()  # an end (0) before a start (1) at the same instant
        return points

    def org_caps(self) -> None:
        points = self._sweep(lambda r: r[1] if r[2] == "background" else None)
        for org, pts in points.items():
            running = peak = 0
            for ts, delta, who in pts:
                running += 1 if delta else -1
                if running > self.caps[org]:
                    self.v.append(
                        f"{org} ran {running} background runs (cap {self.caps[org]}) "
                        f"at {ts:.6f}, claim of run {who[0]}"
                    )
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
                        or (how[0] == "run.finished" and how[1].get("reason") == "stale")
                    )
                    late_writes = [t for t in outputs_by_attempt[other] if t > ts]
                    if reaped and not late_writes:
                        self.report.computer_handovers_after_expiry += 1
                    else:
                        self.v.append(
                            f"computer {computer}: run {who[0]} claimed it while run "
                            f"{other[0]} attempt {other[1]} still held it "
                            f"(ended by {how[0] if how else 'nothing'}, "
                            f"{len(late_writes)} outputs after the takeover)"
                        )
                holders.add(who)

    def schedules(self) -> None:
        dup = self.conn.execute(
            "select count(*) from (select 1 from runlane.runs where timer_routine is not null "
            "group by timer_routine, timer_occurrence having count(*) > 1) as d"
        ).fetchone()[0]
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
            self._agents = dict(
                self.conn.execute("select run_id, agent_id from runlane.runs").fetchall()
            )
        return self._agents[run_id]

    def interactive_started(self) -> None:
        never = [r[0] for r in self.runs.values() if r[2] == "interactive" and r[9] is None]
        if never:
            self.v.append(f"{len(never)} interactive runs never started (e.g. {never[:5]})")

    def messages(self) -> None:
        acked = self.chaos.acknowledged
        found, unattached = self.conn.execute(
            "select count(*), count(*) filter (where run_id is null) from runlane.messages "
            "where message_id = any(%s)",
            (acked,),
        ).fetchone()
        if found != len(acked):
            self.v.append(f"{len(acked) - found} acknowledged messages are missing")
        if unattached:
            self.v.append(f"{unattached} acknowledged messages never joined a run")

    def logs(self) -> None:
        # (run, attempt, fence): after an asynchronous failover the promoted server counts
        # attempts again from its own history, but under higher fences
        started: Counter[tuple[int, int, int | None]] = Counter()
        self.lease_lost: Counter[tuple[int, int]] = Counter()
        self.log_sqlstates: Counter[str] = Counter()
        self.log_55p03: Counter[str] = Counter()
        self.queue_usage_lines: list[tuple[float, dict]] = []  # (time, the log record)
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
                        started[
                            (
                                record.get("run.id"),
                                record.get("run.attempt"),
                                record.get("run.fence"),
                            )
                        ] += 1
                    elif record.get("message") == "run.lease_lost":
                        self.lease_lost[(record.get("run.id"), record.get("run.attempt"))] += 1
                    if record.get("error.sqlstate"):
                        self.log_sqlstates[record["error.sqlstate"]] += 1
                        if record["error.sqlstate"] == "55P03":
                            self.log_55p03[str(record.get("message"))] += 1
                    if record.get("message") == "notify.queue_usage":
                        self.queue_usage_lines.append(
                            (datetime.fromisoformat(str(record.get("time"))).timestamp(), record)
                        )
            for path in slot.stderr_logs:
                text = path.read_text(errors="replace") if path.exists() else ""
                if MARKER in text:
                    self.v.append(f"message text on the stderr of {path.name}")
                self.report.worker_tracebacks += text.count("Traceback (most recent call last)")
        self.report.log_55p03 = dict(self.log_55p03)
        for (run_id, attempt, fence), n in started.items():
            if n > 1:
                self.v.append(
                    f"run {run_id} attempt {attempt} started {n} times in the logs"
                    if fence is None
                    else f"run {run_id} attempt {attempt} fence {fence} started {n} "
                    "times in the logs"
                )
            journaled = (
                (run_id, attempt) in self.intervals
                if fence is None
                else self.fence_attempt.get((run_id, fence)) == attempt
            )
            if not journaled:
                self.v.append(
                    f"run {run_id} attempt {attempt} started in a log, not in the journal"
                )

    # -- the faults of round two ------------------------------------------------------
    @staticmethod
    def _reaped(how: Any) -> bool:
        return how is not None and (
            how[0] == "run.lease_expired"
            or (how[0] == "run.finished" and how[1].get("reason") == "stale")
        )

    @staticmethod
    def _by_worker(how: Any) -> bool:
        """The attempt's end was written by its own worker (not the reaper, not a
        maintenance cancel): a write like its outputs."""
        return how is not None and (
            how[0] in ("run.retry_scheduled", "run.released")
            or (how[0] == "run.finished" and how[1].get("reason") not in ("stale", "redundant"))
        )

    def computer_fencing(self) -> None:
        """No write accepted from a run that did not hold its computer at that moment: no
        output, finish, retry or release of an attempt commits after another attempt
        claimed the same computer."""
        claims = defaultdict(list)
        for (run_id, attempt), (start, _end, _how) in self.intervals.items():
            computer = self.runs[run_id][6]
            if computer is not None:
                claims[computer].append((start, run_id, attempt))
        writes = defaultdict(list)
        for run_id, attempt, ts in self.outputs:
            writes[(run_id, attempt)].append((ts, "output"))
        for key, (_start, end, how) in self.intervals.items():
            if self._by_worker(how):
                writes[key].append((end, how[0]))
        bad = 0
        for computer, seq in claims.items():
            seq.sort()
            for i, (start, run_id, attempt) in enumerate(seq):
                later = next((c for c in seq[i + 1 :] if c[0] > start), None)
                if later is None:
                    continue
                late = sorted(w for w in writes[(run_id, attempt)] if w[0] > later[0])
                if late:
                    bad += len(late)
                    if bad - len(late) < 5:
                        self.v.append(
                            f"computer {computer}: run {run_id} attempt {attempt} wrote "
                            f"{len(late)} times ({', '.join(sorted({w[1] for w in late}))}) "
                            f"after run {later[1]} attempt {later[2]} claimed the computer"
                        )
        self.report.writes_without_computer = bad
        if bad > 5:
            self.v.append(f"... {bad} writes accepted without the computer in all")

    def duplicate_outputs(self) -> None:
        """No output written twice: within one attempt, the echo agent never emits the
        same chunk (or run of up to 3 chunks) twice in a row, so a repeat is a resent
        write the database accepted again (a lost acknowledgement)."""
        per_attempt = defaultdict(list)
        for _oid, run_id, attempt, kind, body in self.output_rows:
            per_attempt[(run_id, attempt)].append((kind, body))
        bad = 0
        for (run_id, attempt), seq in per_attempt.items():
            for i in range(1, len(seq)):
                if any(i >= k and seq[i - k : i] == seq[i : i + k] for k in (1, 2, 3)):
                    bad += 1
                    if bad <= 5:
                        self.v.append(
                            f"run {run_id} attempt {attempt}: output {i + 1} "
                            f"repeats what the attempt had just written"
                        )
                    break
        self.report.duplicate_outputs = bad
        if bad > 5:
            self.v.append(f"... {bad} attempts with repeated outputs in all")

    def streams(self) -> None:
        """No output delivered twice to a stream reader, none skipped, and no reader
        killed by what it read (runlane.stream over chat runs during the soak)."""
        visible = defaultdict(list)
        for oid, run_id, _attempt, kind, body in self.output_rows:
            if kind in VISIBLE_KINDS:
                visible[run_id].append((oid, kind, body))
        tally: Counter[str] = Counter()
        died_of: Counter[str] = Counter()  # what killed the readers that died
        for run_id, seen in self.chaos.streams.items():
            tally["followed"] += 1
            tally["complete"] += seen["complete"]
            tally["reconnects"] += seen["reconnects"]
            if seen["died"]:
                tally["died"] += 1
                died_of[seen["died"]] += 1
                if tally["died"] <= 5:
                    self.v.append(f"a stream reader of run {run_id} died ({seen['died']})")
            got = [(oid, kind, body) for oid, _a, kind, body in seen["rows"]]
            ids = [g[0] for g in got]
            if len(set(ids)) != len(ids):
                tally["duplicated"] += 1
                self.v.append(f"a stream reader got an output of run {run_id} twice")
            want = visible.get(run_id, [])
            if (seen["complete"] and got != want) or got != want[: len(got)]:
                tally["mismatched"] += 1
                if tally["mismatched"] <= 5:
                    self.v.append(
                        f"the stream of run {run_id} differs from its committed "
                        f"outputs ({len(got)} read, {len(want)} committed)"
                    )
        if tally["died"] > 5:
            self.v.append(
                f"... {tally['died']} stream readers died in all ("
                + ", ".join(f"{k} {n}" for k, n in died_of.most_common())
                + ")"
            )
        if tally["mismatched"] > 5:
            self.v.append(
                f"... {tally['mismatched']} streams differed from their committed outputs in all"
            )
        self.report.streams = dict(tally)
        self.report.streams_died_of = dict(died_of)

    def _attempt_at(self, run_id: int, at: float) -> int | None:
        found = None
        for (rid, attempt), (start, _e, _h) in self.intervals.items():
            if rid == run_id and start <= at + 1.0 and (found is None or attempt > found):
                found = attempt
        return found

    def lost_acks(self) -> None:
        """No run failed only because an acknowledgement was lost: for each reply the
        proxy lost after commit, the attempt it concerned ends by its own worker (not by
        its lease running out), and no `run.lease_lost` is logged for it."""
        disturbing = [
            f
            for f in self.chaos.faults
            if f.kind
            in (
                "kill9",
                "sigterm",
                "terminate_backend",
                "restart_fast",
                "restart_immediate",
                "sigstop_worker",
                "sigstop_worker_computer",
                "sigstop_leader",
            )
        ]
        for drop in self._drops():
            worker = WORKER_ID.search(drop.client or "")
            worker = worker.group(0) if worker else ""
            for run_id, fence, attempt in zip(
                drop.run_ids, drop.fences, drop.attempts, strict=True
            ):
                if run_id is None or run_id not in self.runs:
                    continue
                if attempt is None:
                    attempt = (
                        self.fence_attempt.get((run_id, fence))
                        if fence is not None
                        else self._attempt_at(run_id, drop.at)
                    )
                span = self.intervals.get((run_id, attempt))
                if span is None:
                    continue
                end = span[1] if span[1] is not None else float("inf")
                if any(
                    drop.at - 1 <= f.at <= end
                    and (f.target in ("", worker) or f.kind.startswith("restart"))
                    for f in disturbing
                ):
                    continue  # another fault hit that worker or the server meanwhile
                if self._reaped(span[2]):
                    how = span[2][0] + (
                        f" {span[2][1].get('reason')}" if span[2][1].get("reason") else ""
                    )
                    self.v.append(
                        f"run {run_id} attempt {attempt} ended by its lease "
                        f"({how}) after the reply to its {drop.kind} was "
                        f"lost: a lost acknowledgement failed it"
                    )
                elif self.lease_lost[(run_id, attempt)]:
                    self.v.append(
                        f"run {run_id} attempt {attempt}: run.lease_lost logged "
                        f"after the reply to its {drop.kind} was lost, though it "
                        f"ended {span[2][0] if span[2] else 'nowhere'}"
                    )

    def maintenance_continues(self) -> None:
        """While the leader is stopped or its lock is squatted, maintenance goes on: the
        run planted with an expiring lease is reaped before the window ends."""
        lease = self.chaos.config.lease
        for fault in self.chaos.faults:
            orphan = fault.detail.get("orphan")
            if not orphan or fault.ready_at is None:
                continue
            span = self.intervals.get((orphan["run_id"], orphan["attempt"]))
            if span is None:
                continue
            expiry = span[0] + lease
            reaped = span[1] if self._reaped(span[2]) else None
            if reaped is not None and reaped <= fault.ready_at:
                self.report.maintenance_reap_s[fault.kind] = max(
                    self.report.maintenance_reap_s.get(fault.kind, 0.0), reaped - expiry
                )
            else:
                self.v.append(
                    f"{fault.kind}: maintenance stopped: run {orphan['run_id']} (lease "
                    f"expired {expiry - fault.at:.1f} s in) was not reaped before the "
                    f"window ended ({fault.ready_at - fault.at:.1f} s in)"
                )

    def submissions(self) -> None:
        """No submission hangs on a lock (the driver's statement_timeout) or fails for a
        lock or a full NOTIFY queue."""
        errors = self.chaos.errors
        for code, what in (
            ("57014", "hung until the driver's statement_timeout"),
            ("55P03", "failed on a lock timeout"),
            ("54000", "failed on a full NOTIFY queue"),
        ):
            n = errors.get(f"load.{code}", 0)
            if n:
                self.v.append(f"{n} submissions {what} ({code})")

    def notify_queue(self) -> None:
        """No runlane write failed because a notification could not be queued."""
        n = self.log_sqlstates.get("54000", 0)
        if n:
            self.v.append(f"{n} worker log lines report 54000 (NOTIFY queue full)")

    def forged_start(self) -> None:
        """Forged notifications do not collapse chat first-start latency: the median of
        chat runs (no computer, announced) created during forged windows against the
        median of those created outside them."""
        windows = [
            (f.at, f.ready_at)
            for f in self.chaos.faults
            if f.kind == "forged_notify" and f.ready_at is not None
        ]
        if not windows:
            return
        unpublished = set(self.chaos.unpublished)
        inside, outside = [], []
        for r in self.runs.values():
            if r[2] != "interactive" or r[6] is not None or r[12] is None or r[0] in unpublished:
                continue
            created, took = float(r[11]), float(r[12]) - float(r[11])
            (inside if any(a <= created <= b for a, b in windows) else outside).append(took)
        if not inside or not outside:
            return
        p50, base = statistics.median(inside), statistics.median(outside)
        self.report.forged_start_s = {
            "p50": p50,
            "max": max(inside),
            "baseline_p50": base,
            "runs": float(len(inside)),
        }
        if p50 > max(0.5, 10 * base):
            self.v.append(
                f"chat start under forged notifications: median {p50:.3f} s "
                f"against {base:.3f} s without them"
            )

    def _room(self, org: str, a: float, b: float) -> float:
        """Seconds within [a, b] in which `org` ran fewer background runs than its cap
        (its attempts' commit-time intervals)."""
        if b <= a:
            return 0.0
        if not hasattr(self, "_org_points"):
            self._org_points = self._sweep(lambda r: r[1] if r[2] == "background" else None)
        cap, running, t, room = self.caps[org], 0, a, 0.0
        for ts, delta, _who in self._org_points.get(org, []):
            if ts > t:
                if ts >= b:
                    break
                if running < cap:
                    room += ts - t
                t = ts
            running += 1 if delta else -1
        return room + (b - t if running < cap else 0.0)

    def org_lock(self) -> None:
        """While a tenant holds its organization's settings row open (put_org in an open
        transaction), other organizations' background runs are still claimed. A
        violation: a hold longer than org_lock_bound in which some run of another
        organization could have been claimed for longer than org_lock_bound and was not.
        Such a run is a background run without a computer (a computer's wait is its
        own), counted from its creation (from a scan interval + 0.5 s later when it was
        committed unannounced) to its first claim, inside the hold, only while its
        organization was below its cap. Workers take runs without a slot limit (memory
        admission only) and at most one is stopped or restarting at a time, so a serving
        worker was idle for it; holds that overlap a server restart are not judged."""
        cfg = self.chaos.config
        holds = [f for f in self.chaos.faults if f.kind == "org_lock" and "hold_end" in f.detail]
        if not holds:
            return
        restarts = [
            (f.at, f.ready_at or f.at + 60)
            for f in self.chaos.faults
            if f.kind.startswith("restart")
        ]
        unpublished = set(self.chaos.unpublished)
        taken: dict[int, float] = {}
        ticks = []
        for run_id, events in self.events.items():
            for ts, _eid, ev, _d in events:
                if ev in ("run.claimed", "run.skipped") and run_id not in taken:
                    taken[run_id] = ts
                if ev in ("routine.fired", "routine.coalesced"):
                    ticks.append(ts)
        ticks.sort()
        claims = sorted(
            (ts, self.runs[run_id][1])
            for (run_id, _a), (ts, _e, _h) in self.intervals.items()
            if self.runs[run_id][2] == "background"
        )
        per_hold, longest, whole, tick_gap = [], 0.0, 0, 0.0
        own: Counter[str] = Counter()
        own_max = 0.0
        for fault in holds:
            hs, he, org = fault.detail["hold_start"], fault.detail["hold_end"], fault.detail["org"]
            sub = fault.detail.get("own_submission")
            if sub:
                own[sub["outcome"]] += 1
                own_max = max(own_max, sub["s"])
            per_hold.append(sum(1 for ts, o in claims if hs <= ts <= he and o != org))
            for a, b in zip(ticks, ticks[1:], strict=False):
                if b > hs and a < he:
                    tick_gap = max(tick_gap, b - a)
            judged = he - hs > cfg.org_lock_bound and not any(
                a <= he and b >= hs for a, b in restarts
            )
            for r in self.runs.values():
                if r[2] != "background" or r[1] == org or r[6] is not None:
                    continue
                ready = float(r[11]) + ((cfg.scan_interval + 0.5) if r[0] in unpublished else 0)
                end = min(taken.get(r[0], float("inf")), he)
                if end <= hs or ready >= end:
                    continue
                waited = self._room(r[1], max(ready, hs), end)
                longest = max(longest, waited)
                if judged and waited > cfg.org_lock_bound:
                    whole += 1
                    if whole <= 5:
                        self.v.append(
                            f"org_lock: run {r[0]} of {r[1]} waited {waited:.1f} s unclaimed "
                            f"with room under its cap while {org} was held open "
                            f"({he - hs:.1f} s hold)"
                        )
        if whole > 5:
            self.v.append(f"... {whole} runs of other organizations waited through a hold")
        spans = [f.detail["hold_end"] - f.detail["hold_start"] for f in holds]
        self.report.org_lock = {
            "holds": len(holds),
            "hold_s": spans,
            "other_claims": sum(per_hold),
            "other_claims_min": min(per_hold),
            "longest_other_wait_s": longest,
            "whole_hold_waiters": whole,
            "own_submissions": dict(own),
            "own_submission_max_s": own_max,
            "tick_gap_max_s": tick_gap,
        }

    def _fault_spans(self) -> dict[str, list[tuple[float, float]]]:
        """When each fault was acting: a window from its start to its end (the queue
        past half: from the moment it was; a hold: while held), a suppressed-notify
        window for its length, a point fault (kill, restart, terminated sessions) to the
        later of its recovery and one second after it."""
        spans = defaultdict(list)
        for f in self.chaos.faults:
            d = f.detail
            if f.kind == "notify_half" and "past_half_end" in d:
                spans[f.kind].append((d["past_half_at"], d["past_half_end"]))
            elif f.kind == "org_lock" and "hold_end" in d:
                spans[f.kind].append((d["hold_start"], d["hold_end"]))
            elif f.kind == "suppress_notify":
                spans[f.kind].append((f.at, f.at + d.get("window_s", 0.0)))
            elif f.kind not in ("notify_half", "org_lock"):
                spans[f.kind].append((f.at, max(f.ready_at or f.at, f.at + 1.0)))
        return spans

    def chat_first_response(self) -> None:
        """Chat first response (the message's created_at -> the run's first_response_at,
        as runlane.run_timing measures it), p99 over every chat run, over those whose wait
        (message -> first response) overlapped each kind of fault (planted orphans left
        out), over those whose wait overlapped none, and over the runs without a
        computer: reported figures. A violation only when the p99 of the runs without a
        computer whose wait overlapped no fault exceeds chat_p99_bound (10 s by default,
        a generous bound: the soak's scan interval is 1 s). Under a fault the p99 is that
        fault's cost, not a failure, and a computer's queue is its own: one run at a time,
        and while notifications are off the next one starts on a scan, so a backlog a
        fault left on a computer outlives the fault."""
        orphans = {
            f.detail["orphan"]["run_id"] for f in self.chaos.faults if f.detail.get("orphan")
        }
        rows = [
            (origin, took, computer)
            for run_id, origin, took, computer in self.conn.execute(
                "select r.run_id, "
                "extract(epoch from coalesce(m.created_at, r.created_at))::float8, "
                "extract(epoch from r.first_response_at - coalesce(m.created_at, r.created_at))"
                "::float8, r.computer_id from runlane.runs as r "
                "left join runlane.messages as m on m.message_id = r.source_message_id "
                "where r.lane = 'interactive' and r.source_message_id is not null "
                "and r.first_response_at is not null"
            )
            if run_id not in orphans
        ]
        if not rows:
            return
        spans = self._fault_spans()
        head = ("all", "outside_faults", "no_computer", "no_computer_outside_faults")
        groups: dict[str, list[float]] = {k: [] for k in head}
        for origin, took, computer in rows:
            inside = False
            for kind, windows in spans.items():
                if any(origin <= b and origin + took >= a for a, b in windows):
                    groups.setdefault(kind, []).append(took)
                    inside = True
            names = ["all"] + ([] if inside else ["outside_faults"])
            if computer is None:
                names += ["no_computer"] + ([] if inside else ["no_computer_outside_faults"])
            for name in names:
                groups[name].append(took)
        rep = self.report
        for name in [*head, *sorted(k for k in groups if k not in head)]:
            values = sorted(groups[name])
            if values:
                rep.chat_first_response_p99_s[name] = values[
                    max(0, -(-99 * len(values) // 100) - 1)
                ]
                rep.chat_first_response_runs[name] = len(values)
        p99 = rep.chat_first_response_p99_s.get("no_computer_outside_faults", 0.0)
        if p99 > self.chaos.config.chat_p99_bound:
            self.v.append(
                f"chat first response p99 outside faults (runs without a computer) "
                f"{p99:.2f} s, over {self.chaos.config.chat_p99_bound:.0f} s"
            )

    def notify_half_figures(self) -> None:
        """What the queue held past half looked like: its windows, and the leader's
        notify.queue_usage warnings during them (and whether they named the holder)."""
        windows = [
            f for f in self.chaos.faults if f.kind == "notify_half" and "past_half_end" in f.detail
        ]
        if not windows:
            return

        def names(value: Any, pid: int) -> bool:
            """The record names the holder: its login, its application_name or its pid."""
            if isinstance(value, dict):
                return any(names(v, pid) for v in value.values())
            if isinstance(value, list):
                return any(names(v, pid) for v in value)
            if isinstance(value, str):
                return SQUATTER in value or "soak-notify-half-holder" in value or value == str(pid)
            return value == pid and not isinstance(value, bool)

        spans = [
            (f.detail["past_half_at"], f.detail["past_half_end"], f.detail.get("holder_pid", -1))
            for f in windows
        ]
        during = []
        for ts, record in self.queue_usage_lines:
            window = next((w for w in spans if w[0] <= ts <= w[1] + 1.0), None)
            if window is not None:
                during.append(names({k: v for k, v in record.items() if k != "time"}, window[2]))
        fill = [f.detail for f in windows if f.detail.get("filled_mb")]
        self.report.notify_half = {
            "mode": self.chaos.config.notify_half,
            "windows": len(windows),
            "past_half_s": sum(b - a for a, b, _pid in spans),
            "warnings": len(during),
            "warnings_naming_holder": sum(during),
            **(
                {
                    "filled_mb": fill[0]["filled_mb"],
                    "fill_s": fill[0]["fill_s"],
                    "usage_max": fill[0]["usage_max"],
                }
                if fill
                else {}
            ),
        }

    def worker_tracebacks(self) -> None:
        """A worker never lets an exception escape to its stderr (a forged payload that
        raises in the listener's callback shows up here)."""
        if self.report.worker_tracebacks:
            self.v.append(f"{self.report.worker_tracebacks} tracebacks on worker stderr")

    def recovery_times(self) -> None:
        rep = self.report
        marks = sorted(
            ts
            for events in self.events.values()
            for ts, _e, ev, _d in events
            if ev in ("run.claimed", "run.finished")
        )
        for fault in self.chaos.faults:
            ready = fault.ready_at or fault.at
            i = bisect.bisect_right(marks, ready)
            if i < len(marks):
                took = marks[i] - fault.at
                rep.max_recovery_s[fault.kind] = max(rep.max_recovery_s.get(fault.kind, 0.0), took)
            for run_id in fault.held_runs:
                after = [
                    ts
                    for ts, _e, ev, _d in self.events[run_id]
                    if ts > fault.at
                    and (ev in REQUEUE_EVENTS or ev in ("run.finished", "run.claimed"))
                ]
                if after:
                    rep.orphaned_runs[fault.kind] = rep.orphaned_runs.get(fault.kind, 0) + 1
                    rep.max_orphan_recovery_s[fault.kind] = max(
                        rep.max_orphan_recovery_s.get(fault.kind, 0.0), after[0] - fault.at
                    )
        for run_id in self.chaos.unpublished:
            run = self.runs.get(run_id)
            # Background runs may wait for their organization's cap or a computer, however
            # they were announced: only chat runs without a computer measure the scan.
            if (
                run is not None
                and run[12] is not None
                and run[2] == "interactive"
                and run[6] is None
            ):
                rep.max_unpublished_start_s = max(
                    rep.max_unpublished_start_s, float(run[12]) - float(run[11])
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m soak.chaos", description=__doc__.split("\n")[0]
    )
    defaults = SoakConfig()
    parser.add_argument("--runs", type=int, default=defaults.runs)
    parser.add_argument("--workers", type=int, default=defaults.workers)
    parser.add_argument(
        "--duration",
        type=float,
        default=defaults.duration,
        help="minimum seconds of the fault phase",
    )
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--json", dest="json_path", default=None, help="also write the report here")
    parser.add_argument("--keep", action="store_true", help="keep the cluster data and logs")
    parser.add_argument(
        "--faults",
        default=",".join(FAULT_KINDS),
        help="comma-separated fault kinds to inject (default: all): " + ", ".join(FAULT_KINDS),
    )
    parser.add_argument(
        "--checks",
        default=",".join(CHECKS),
        help="comma-separated checks to run (default: all; attempts and "
        "logs always run): " + ", ".join(CHECKS),
    )
    parser.add_argument(
        "--notify-half",
        choices=("simulated", "real"),
        default=defaults.notify_half,
        help="the NOTIFY queue past half (notify_half): a replaced reading "
        "(default), or a real 4 GB fill, once per soak (about 45 s on a "
        "quiet 2-core machine)",
    )
    args = parser.parse_args(argv)
    faults = tuple(k for k in args.faults.split(",") if k)
    checks = tuple(k for k in args.checks.split(",") if k)
    unknown = sorted((set(faults) - set(FAULT_KINDS)) | (set(checks) - set(CHECKS)))
    if unknown:
        parser.error(f"unknown fault kinds or checks: {', '.join(unknown)}")
    config = SoakConfig(
        runs=args.runs,
        workers=args.workers,
        duration=args.duration,
        seed=args.seed,
        keep=args.keep,
        faults=faults,
        checks=checks,
        notify_half=args.notify_half,
    )
    chaos = Chaos(config)
    print(
        f"soak: {config.runs} runs, {config.workers} workers, >= {config.duration:.0f} s of "
        f"faults, seed {config.seed}, work dir {chaos.workdir}",
        flush=True,
    )
    report = chaos.run()
    print(report.text())
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(asdict(report), indent=2, default=str))
    return 1 if report.violations else 0


if __name__ == "__main__":
    sys.exit(main())
