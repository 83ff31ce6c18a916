"""Durable commits: runlane's real workers against PgQueuer, and the wake-latency floor.

One throwaway cluster with durable settings (fsync, synchronous_commit and
full_page_writes on, the rest PostgreSQL's defaults but for the connection limit),
pg_stat_statements loaded (track = all: nested statements too) and track_functions = pl.

* drain, for 2 and 4 worker processes: runlane's `runlane worker --lane interactive
  --agent bench._noop_agent:agent --no-maintenance` processes (their defaults otherwise,
  --max-per-org 200 among them: with one organization the bound holds all along) drain
  N chat runs made by submit_message + publish_run (one organization, 20 agents, each run
  on its own thread; 500 per transaction); PgQueuer's worker as its CLI
  runs it (pgqueuer.run, what `pgq run bench._pgq_app:create_pgqueuer` calls; asyncpg;
  its defaults) drains N no-op jobs enqueued with Queries.enqueue (500 per call). Both
  queues are ANALYZEd with every job queued (what autovacuum does after such a burst),
  then the workers start. jobs/s is N over
  first start -> last finish as the database recorded them (runlane: runs.first_started_at
  and finished_at; PgQueuer: its log table's picked and successful rows). PostgreSQL CPU
  is utime + stime of every server process (the postmaster's cutime + cstime keep the
  backends that exited) from /proc, before the workers start and after the drain; worker
  CPU is utime + stime of the worker processes from /proc at the end of the drain (their
  start-up included, for both systems). --drains pairs (5) per worker count, one drain
  of each system back to back, the order alternating; the table shows each system's
  medians and the median of the pairs' jobs/s ratios (this shared machine moves between
  a fast and a slow state within minutes: one pair alone says little).
* client enqueue: messages/s, client time and PostgreSQL CPU per chat message a client
  (an API login, as an application's) accepts one call at a time: submit_message then
  publish_run (two commits), the same pipelined in pages, send_message (one round trip,
  one commit), send_message pipelined;
  against PgQueuer's Queries.enqueue, one job per call. --enqueue-repeat rounds, the modes
  rotated; accept_ratio_pgqueuer is the median of the rounds' send_message / PgQueuer,
  accept_ratio_pgqueuer_pipelined the same for send_message pipelined (a page of 50
  commits once: the goal's form; one by one, every message pays its own commit).
* top statements of runlane's drain (4 workers) by total_exec_time, nested statements
  included, and the PL/pgSQL functions by self time (pg_stat_user_functions).
* idle wake latency, one worker each, one job every --gap: publish -> the handler's start,
  both on this machine's clock. runlane: submit_message commits, publish_run commits, then
  the client reads time.time(); the agent's first step appends time.time().
  PgQueuer: time.time() after enqueue returns. The floor (bench/_floor_worker.py): a
  bare asyncpg script that LISTENs and on each notification claims one row of a
  one-table queue with one UPDATE ... FOR UPDATE SKIP LOCKED ... RETURNING, commits, then
  starts its handler; the publisher inserts the row and notifies in one commit. Beside
  it the floor with writes (`--with-writes`): the same worker whose one statement also
  makes the writes a durable, fenced, idempotent claim must make (a fence and a lease on
  the row, a run.claimed journal row, the claim's receipt), on small tables of its own;
  and the same writes on runlane's own tables (`--on-runlane`: runs, run_events,
  claim_receipts), on runs runlane's submit_message and publish_run published, so nothing
  but claim_runs' rules separates it from runlane's worker. And the floor with rules
  (`--with-rules`): the writes and the checks an idle chat claim must make (the receipt
  locked and compared with the claim's key, the worker's per-organization bound, the
  fence floor, the timing row) in one statement, on narrow tables built for that claim:
  the least any schema could make such a claim cost. The goals are against the bare
  floor; runlane against the three others is printed too: the first is the yardstick for
  any claim that keeps runlane's guarantees, the second for a claim on runlane's schema,
  the third for a claim that also keeps its rules.

Goals: runlane >= 1.0x PgQueuer's jobs/s at 2 and 4 workers; runlane's idle
p50 <= 1.25x the floor's and p99 <= 1.5x; send_message one by one >= 1.0x PgQueuer's
one-by-one enqueue. The load average is printed with the figures:
on a shared machine compare only figures taken back to back.

    python -m bench.durable_compare [--quick] [--runs N] [--workers 2,4] [--drains 5]
        [--enqueue N] [--enqueue-repeat 3] [--enqueue-only]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
import psycopg
from pgqueuer.db import AsyncpgDriver
from pgqueuer.queries import Queries

from bench import _common
from bench import _floor_worker as floor_worker_module
from runlane.pgcluster import LocalCluster
from runlane.worker.config import WorkerConfig

ROOT = Path(__file__).resolve().parent.parent
AGENTS = 20
TEMPLATE = "bench_durable_template"
BATCH = 500
P50_GOAL, P99_GOAL, RATE_GOAL = 1.25, 1.5, 1.0

DURABLE_SETTINGS = {
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "max_connections": "300",  # 4 runlane workers hold ~12 connections each
    "listen_addresses": "127.0.0.1",
    "log_min_messages": "warning",
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track": "all",
    "pg_stat_statements.max": "5000",
    "track_functions": "pl",
}
# LocalCluster starts from the test settings (fsync off, shared_buffers 256MB): the
# durable ones above override them, and shared_buffers goes back to PostgreSQL's default.
CLUSTER_SETTINGS = {**DURABLE_SETTINGS, "shared_buffers": "128MB"}


# -- the server's CPU ---------------------------------------------------------------------


def _ticks(pid: int) -> tuple[int, int, int]:
    """(ppid, utime + stime, cutime + cstime) of a process, in clock ticks."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[1]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def server_cpu_seconds(pg: LocalCluster) -> float:
    """CPU seconds of the postmaster and every process it forked so far: live children
    read directly, exited (and reaped) ones through the postmaster's cutime + cstime."""
    postmaster = int((pg.datadir / "postmaster.pid").read_text().split()[0])
    _, own, reaped = _ticks(postmaster)
    total = own + reaped
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid, used, _ = _ticks(int(entry.name))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        if ppid == postmaster:
            total += used
    return total / os.sysconf("SC_CLK_TCK")


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# -- processes ------------------------------------------------------------------------------


class Proc:
    """A worker process, started from the repository root, output to a file."""

    def __init__(self, cmd: list[str], env: dict[str, str]):
        self.log = Path(tempfile.mkstemp(prefix="bench-durable-", suffix=".log")[1])
        self._out = open(self.log, "w")  # noqa: SIM115 - closed in stop()
        # PYTHONPATH: the caller's first (to measure another checkout's runlane), then ours.
        path = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(ROOT)) if p)
        self.proc = subprocess.Popen(
            cmd,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, **env, "PYTHONPATH": path},
        )

    def cpu_seconds(self) -> float:
        """CPU seconds this worker process (and any child it reaped) used so far, start-up
        included; 0 once it is gone."""
        try:
            _, own, reaped = _ticks(self.proc.pid)
        except (OSError, ValueError, IndexError):
            return 0.0
        return (own + reaped) / os.sysconf("SC_CLK_TCK")

    def check(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"a worker exited with {self.proc.returncode}; see {self.log}")

    def stop(self) -> None:
        crashed = self.proc.poll() not in (None, 0)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._out.close()
        if not crashed:  # a crashed worker's output stays for the error message
            self.log.unlink(missing_ok=True)


# runlane worker --max-per-org: "" (the default) passes none, so the workers run with
# their own default (100 per organization; this benchmark has one organization, so the
# bound is in force all through the drain). Set by main().
MAX_PER_ORG = ""


def runlane_worker(dsn: str, starts: str = "") -> Proc:
    bound = ["--max-per-org", MAX_PER_ORG] if MAX_PER_ORG else []
    return Proc(
        [
            sys.executable,
            "-m",
            "runlane",
            "worker",
            "--dsn",
            dsn,
            "--lane",
            "interactive",
            "--agent",
            "bench._noop_agent:agent",
            "--no-maintenance",
            *bound,
            "--worker-id",
            f"bench-{uuid.uuid4().hex[:8]}",
        ],
        {"RUNLANE_BENCH_STARTS": starts},
    )


def pgqueuer_worker(dsn: str, starts: str = "") -> Proc:
    return Proc(
        [sys.executable, "-m", "bench._pgq_app"], {"PGQ_BENCH_DSN": dsn, "PGQ_BENCH_STARTS": starts}
    )


def floor_worker(dsn: str, starts: str, mode: str = "") -> Proc:
    """bench/_floor_worker.py in `mode` ("", "--with-writes" or "--on-runlane")."""
    return Proc(
        [sys.executable, "-m", "bench._floor_worker", dsn, starts, *([mode] if mode else [])], {}
    )


def wait_until(
    check, what: str, procs: list[Proc], timeout: float = 900, every: float = 0.2
) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        for p in procs:
            p.check()
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(every)


def read_starts(path: str) -> dict[str, float]:
    starts = {}
    for line in Path(path).read_text().splitlines():
        key, at = line.split()
        starts[key] = float(at)
    return starts


# -- runlane --------------------------------------------------------------------------------


# The login an application accepts messages with: runlane_api, acting for every
# organization (runlane grant-login bench_durable_app --api).
APP_LOGIN = "bench_durable_app"


def runlane_template(pg: LocalCluster) -> None:
    dsn = _common.migrated_database(pg, TEMPLATE)
    with psycopg.connect(dsn, autocommit=True) as conn:
        _common.seed_agents(conn, agents=AGENTS, orgs=1)
        conn.execute(f"create role {APP_LOGIN} login in role runlane_api")
        conn.execute("select runlane.scope_api_login(%s, null)", (APP_LOGIN,))


def submit_batch(conn: psycopg.Connection, n: int) -> list[int]:
    """n chat runs (each on its own thread) by submit_message, then publish_run for each,
    one transaction."""
    tag = uuid.uuid4().hex
    with conn.transaction():
        ids = [
            r[0]
            for r in conn.execute(
                """
            select s.run_id
            from generate_series(1, %(n)s::int) as g,
                 lateral runlane.submit_message(
                     'agent' || (g %% %(agents)s::int + 1), %(tag)s || '-' || g, 'bench') as s
            """,
                {"n": n, "agents": AGENTS, "tag": tag},
            ).fetchall()
        ]
        conn.execute("select runlane.publish_run(r) from unnest(%s::bigint[]) as r", (ids,))
    return ids


SUBMIT = "select run_id from runlane.submit_message(%s, %s, 'bench')"
PUBLISH = "select runlane.publish_run(%s)"
SEND = "select run_id from runlane.send_message(%s, %s, 'bench')"
PIPELINE_PAGE = 50
# The ways a client accepts chat messages, each message its own call:
#   two_commits     submit_message, then publish_run, each its own commit (two round trips)
#   pipelined       psycopg pipeline mode, pages of PIPELINE_PAGE: the page's submits, then
#                   their publishes (a pipeline's statements commit together at its Sync:
#                   two commits per page; a message's publication needs its submit's answer,
#                   so one message alone cannot be pipelined)
#   send            send_message: one round trip, one commit
#   send_pipelined  send_message in pipeline pages (one commit per page)
#   pgqueuer        PgQueuer's Queries.enqueue, one job per call (asyncpg, one commit each)
ACCEPT_MODES = ("two_commits", "pipelined", "send", "send_pipelined", "pgqueuer")


def _accept_runlane(conn: psycopg.Connection, mode: str, args: list[tuple[str, str]]) -> None:
    if mode == "two_commits":
        for agent, thread in args:
            run_id = conn.execute(SUBMIT, (agent, thread)).fetchone()[0]
            conn.execute(PUBLISH, (run_id,))
    elif mode == "pipelined":
        for k in range(0, len(args), PIPELINE_PAGE):
            with conn.pipeline():
                curs = [conn.execute(SUBMIT, a) for a in args[k : k + PIPELINE_PAGE]]
            ids = [c.fetchone()[0] for c in curs]
            with conn.pipeline():
                for run_id in ids:
                    conn.execute(PUBLISH, (run_id,))
    elif mode == "send":
        for agent, thread in args:
            conn.execute(SEND, (agent, thread)).fetchone()
    else:  # send_pipelined
        for k in range(0, len(args), PIPELINE_PAGE):
            with conn.pipeline():
                curs = [conn.execute(SEND, a) for a in args[k : k + PIPELINE_PAGE]]
            for c in curs:
                c.fetchone()


ACCEPT_CHUNK = 500  # messages per mode per turn (a multiple of PIPELINE_PAGE)


async def _pgq_queries(dsn: str) -> tuple[asyncpg.Connection, Queries]:
    conn = await asyncpg.connect(dsn)
    return conn, Queries(AsyncpgDriver(conn))


async def _accept_pgqueuer(queries: Queries, first: int, n: int) -> None:
    for i in range(first, first + n):
        await queries.enqueue("noop", str(i).encode())


def _accept_round(pg: LocalCluster, messages: int, turn: int) -> dict:
    """One round: every mode gets its own database and connection, then the modes take
    turns, ACCEPT_CHUNK messages each, the order rotating, until each sent `messages`:
    a shift of this shared machine's load falls on all of them alike. Per mode: client
    time and PostgreSQL CPU summed over its turns."""
    loop = asyncio.new_event_loop()
    dsns, conns, pgq = {}, {}, None
    spent = {m: [0.0, 0.0] for m in ACCEPT_MODES}  # seconds, server CPU seconds
    try:
        for mode in ACCEPT_MODES:
            name = f"bench_durable_accept_{mode}"
            dsns[mode] = _common.create_database(
                pg, name, template=None if mode == "pgqueuer" else TEMPLATE
            )
            if mode == "pgqueuer":
                asyncio.run(_pgq_install(dsns[mode]))
                pgq = loop.run_until_complete(_pgq_queries(dsns[mode]))
            else:
                conns[mode] = psycopg.connect(dsns[mode], user=APP_LOGIN, autocommit=True)
        args = [(f"agent{i % AGENTS + 1}", f"e-{uuid.uuid4().hex}") for i in range(messages)]
        for t, k in enumerate(range(0, messages, ACCEPT_CHUNK)):
            chunk = args[k : k + ACCEPT_CHUNK]
            shift = (turn + t) % len(ACCEPT_MODES)
            for mode in ACCEPT_MODES[shift:] + ACCEPT_MODES[:shift]:
                cpu = server_cpu_seconds(pg)
                started = time.perf_counter()
                if mode == "pgqueuer":
                    loop.run_until_complete(_accept_pgqueuer(pgq[1], k, len(chunk)))
                else:
                    _accept_runlane(conns[mode], mode, chunk)
                spent[mode][0] += time.perf_counter() - started
                spent[mode][1] += server_cpu_seconds(pg) - cpu
    finally:
        for c in conns.values():
            c.close()
        if pgq:
            loop.run_until_complete(pgq[0].close())
        loop.close()
        for mode in dsns:
            _common.drop_database(pg, f"bench_durable_accept_{mode}")
    return {
        mode: {
            "messages_per_s": round(messages / seconds, 1),
            "client_ms_per_message": round(seconds * 1000 / messages, 3),
            "pg_cpu_ms_per_message": round(cpu * 1000 / messages, 3),
        }
        for mode, (seconds, cpu) in spent.items()
    }


def client_enqueue(pg: LocalCluster, messages: int, repeats: int) -> dict:
    """What a client pays per chat message (per job for PgQueuer), sent one call at a time,
    in ACCEPT_MODES, `repeats` rounds (_accept_round). Each mode's figure is the median
    over rounds, and accept_ratio the median of the rounds' send / pgqueuer messages/s."""
    rounds = []
    for r in range(max(repeats, 1)):
        one = {"load_average": load_average(), **_accept_round(pg, messages, r)}
        for mode in ("send", "send_pipelined"):
            one[f"{mode}_vs_pgqueuer"] = round(
                one[mode]["messages_per_s"] / one["pgqueuer"]["messages_per_s"], 3
            )
        rounds.append(one)
        print(
            f"  accept round {r + 1} (load {one['load_average']}): "
            + ", ".join(f"{m} {one[m]['messages_per_s']:.0f}/s" for m in ACCEPT_MODES)
            + f"; send / PgQueuer {one['send_vs_pgqueuer']:.2f}x"
            + f", send pipelined / PgQueuer {one['send_pipelined_vs_pgqueuer']:.2f}x",
            flush=True,
        )
    medians = {
        mode: {
            k: round(statistics.median(o[mode][k] for o in rounds), 3)
            for k in ("messages_per_s", "client_ms_per_message", "pg_cpu_ms_per_message")
        }
        for mode in ACCEPT_MODES
    }
    return {
        "messages": messages,
        "page": PIPELINE_PAGE,
        "chunk": ACCEPT_CHUNK,
        "rounds": rounds,
        **medians,
        "accept_ratio": round(statistics.median(o["send_vs_pgqueuer"] for o in rounds), 3),
        "accept_ratio_pipelined": round(
            statistics.median(o["send_pipelined_vs_pgqueuer"] for o in rounds), 3
        ),
    }


def reset_stats(conn: psycopg.Connection) -> None:
    conn.execute("select pg_stat_statements_reset()")
    conn.execute("select pg_stat_reset()")


TOP_STATEMENTS = """
select calls, round(total_exec_time::numeric, 1) as total_ms,
       round((total_exec_time / greatest(calls, 1))::numeric * 1000, 1) as mean_us,
       rows, shared_blks_hit, wal_bytes,
       regexp_replace(left(query, 400), '\\s+', ' ', 'g') as query
from pg_stat_statements
where dbid = (select oid from pg_database where datname = current_database())
order by total_exec_time desc
limit %(limit)s
"""

TOP_FUNCTIONS = """
select schemaname || '.' || funcname as function, calls,
       round(total_time::numeric, 1) as total_ms, round(self_time::numeric, 1) as self_ms
from pg_stat_user_functions
order by self_time desc
limit %(limit)s
"""


def runlane_drain(pg: LocalCluster, workers: int, runs: int, profile: bool) -> dict:
    name = f"bench_durable_runlane_{workers}"
    dsn = _common.create_database(pg, name, template=TEMPLATE)
    procs: list[Proc] = []
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("create extension if not exists pg_stat_statements")
            cpu = server_cpu_seconds(pg)
            started = time.monotonic()
            for done in range(0, runs, BATCH):
                submit_batch(conn, min(BATCH, runs - done))
            enqueue_s = time.monotonic() - started
            time.sleep(0.5)  # a backend that just exited is counted once reaped
            enqueue_cpu = server_cpu_seconds(pg) - cpu
            conn.execute("analyze")  # statistics taken with every run queued
            reset_stats(conn)
            load = load_average()
            cpu = server_cpu_seconds(pg)
            procs = [runlane_worker(dsn) for _ in range(workers)]
            # The poll is charged to the drain's server CPU: it stops at the first
            # unfinished run, where a count read every run (7.4 ms a poll, 4 % of the
            # drain's statement time). PgQueuer's is polled the same way.
            done_sql = (
                "select exists (select from runlane.runs where state in ('queued', 'running'))"
            )
            wait_until(lambda: not conn.execute(done_sql).fetchone()[0], "runlane's drain", procs)
            drain_cpu = server_cpu_seconds(pg) - cpu
            worker_cpu = sum(p.cpu_seconds() for p in procs)
            first, last, succeeded = conn.execute(
                "select extract(epoch from min(first_started_at)), "
                "extract(epoch from max(finished_at)), "
                "count(*) filter (where state = 'succeeded') from runlane.runs"
            ).fetchone()
            if succeeded != runs:
                raise RuntimeError(f"runlane: {succeeded} of {runs} runs succeeded")
            for p in procs:  # exiting backends flush their function statistics
                p.stop()
            procs = []
            top = functions = []
            if profile:
                time.sleep(1)
                top = [
                    dict(
                        zip(
                            (
                                "calls",
                                "total_ms",
                                "mean_us",
                                "rows",
                                "shared_blks_hit",
                                "wal_bytes",
                                "query",
                            ),
                            r,
                            strict=True,
                        )
                    )
                    for r in conn.execute(TOP_STATEMENTS, {"limit": 15}).fetchall()
                ]
                functions = [
                    dict(zip(("function", "calls", "total_ms", "self_ms"), r, strict=True))
                    for r in conn.execute(TOP_FUNCTIONS, {"limit": 15}).fetchall()
                ]
    finally:
        for p in procs:
            p.stop()
        _common.drop_database(pg, name)
    seconds = float(last - first)
    return {
        "system": "runlane",
        "workers": workers,
        "runs": runs,
        "seconds": round(seconds, 3),
        "jobs_per_s": round(runs / seconds, 1),
        "pg_cpu_ms_per_run": round(drain_cpu * 1000 / runs, 3),
        "worker_cpu_ms_per_run": round(worker_cpu * 1000 / runs, 3),
        "enqueue_pg_cpu_ms_per_run": round(enqueue_cpu * 1000 / runs, 3),
        "enqueue_per_s": round(runs / enqueue_s, 1),
        "load_average": load,
        "top_statements": top,
        "top_functions": functions,
    }


def _chat_publisher(conn: psycopg.Connection):
    """The i-th chat message as an application sends it (submit_message, then publish_run,
    each its own commit): (run id, the time the publish returned)."""

    def one(i: int) -> tuple[str, float]:
        run_id = conn.execute(
            "select run_id from runlane.submit_message(%s, %s, 'bench')",
            (f"agent{i % AGENTS + 1}", f"t-{uuid.uuid4().hex}"),
        ).fetchone()[0]
        conn.execute("select runlane.publish_run(%s)", (run_id,))
        return str(run_id), time.time()

    return one


def runlane_latency(pg: LocalCluster, idle: int, warmup: int, gap: float) -> dict:
    name = "bench_durable_runlane_latency"
    dsn = _common.create_database(pg, name, template=TEMPLATE)
    starts = tempfile.mkstemp(prefix="bench-starts-", suffix=".txt")[1]
    worker = runlane_worker(dsn, starts)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            return _idle_loop(_chat_publisher(conn), starts, [worker], idle, warmup, gap)
    finally:
        worker.stop()
        Path(starts).unlink(missing_ok=True)
        _common.drop_database(pg, name)


def _idle_loop(publish, starts: str, procs: list[Proc], idle: int, warmup: int, gap: float) -> dict:
    """Publish `warmup` then `idle` jobs one every `gap` s; latency = start - publish."""
    warm = [publish(i)[0] for i in range(warmup)]
    wait_until(
        lambda: all(k in read_starts(starts) for k in warm),
        "the warm-up",
        procs,
        timeout=120,
        every=0.05,
    )
    published = {}
    origin = time.monotonic()
    for i in range(idle):
        key, at = publish(warmup + i)
        published[key] = at
        pause = origin + (i + 1) * gap - time.monotonic()
        if pause > 0:
            time.sleep(pause)
    wait_until(
        lambda: all(k in read_starts(starts) for k in published),
        "the idle jobs",
        procs,
        timeout=120,
        every=0.05,
    )
    found = read_starts(starts)
    return stats([(found[k] - at) * 1000 for k, at in published.items()])


# -- PgQueuer -------------------------------------------------------------------------------


async def _pgq_install(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await Queries(AsyncpgDriver(conn)).install()
        await conn.execute("create extension if not exists pg_stat_statements")
    finally:
        await conn.close()


async def _pgq_enqueue(dsn: str, runs: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        queries = Queries(AsyncpgDriver(conn))
        for done in range(0, runs, BATCH):
            n = min(BATCH, runs - done)
            await queries.enqueue(["noop"] * n, [None] * n, [0] * n)
    finally:
        await conn.close()


def pgqueuer_drain(pg: LocalCluster, workers: int, runs: int) -> dict:
    name = f"bench_durable_pgqueuer_{workers}"
    dsn = _common.create_database(pg, name)
    procs: list[Proc] = []
    try:
        asyncio.run(_pgq_install(dsn))
        with psycopg.connect(dsn, autocommit=True) as conn:
            cpu = server_cpu_seconds(pg)
            started = time.monotonic()
            asyncio.run(_pgq_enqueue(dsn, runs))
            enqueue_s = time.monotonic() - started
            time.sleep(0.5)  # a backend that just exited is counted once reaped
            enqueue_cpu = server_cpu_seconds(pg) - cpu
            conn.execute("analyze")
            reset_stats(conn)
            load = load_average()
            cpu = server_cpu_seconds(pg)
            procs = [pgqueuer_worker(dsn) for _ in range(workers)]
            queued_sql = "select exists (select from pgqueuer)"
            wait_until(
                lambda: not conn.execute(queued_sql).fetchone()[0], "PgQueuer's drain", procs
            )
            # The completion log is written in buffered batches: wait for all of it.
            log_sql = "select count(*) from pgqueuer_log where status = 'successful'"
            wait_until(
                lambda: conn.execute(log_sql).fetchone()[0] >= runs,
                "PgQueuer's log",
                procs,
                timeout=60,
            )
            drain_cpu = server_cpu_seconds(pg) - cpu
            worker_cpu = sum(p.cpu_seconds() for p in procs)
            first, last = conn.execute(
                "select extract(epoch from min(created) filter (where status = 'picked')), "
                "extract(epoch from max(created) filter (where status = 'successful')) "
                "from pgqueuer_log"
            ).fetchone()
    finally:
        for p in procs:
            p.stop()
        _common.drop_database(pg, name)
    seconds = float(last - first)
    return {
        "system": "pgqueuer",
        "workers": workers,
        "runs": runs,
        "seconds": round(seconds, 3),
        "jobs_per_s": round(runs / seconds, 1),
        "pg_cpu_ms_per_run": round(drain_cpu * 1000 / runs, 3),
        "worker_cpu_ms_per_run": round(worker_cpu * 1000 / runs, 3),
        "enqueue_pg_cpu_ms_per_run": round(enqueue_cpu * 1000 / runs, 3),
        "enqueue_per_s": round(runs / enqueue_s, 1),
        "load_average": load,
    }


def pgqueuer_latency(pg: LocalCluster, idle: int, warmup: int, gap: float) -> dict:
    name = "bench_durable_pgqueuer_latency"
    dsn = _common.create_database(pg, name)
    starts = tempfile.mkstemp(prefix="bench-starts-", suffix=".txt")[1]
    asyncio.run(_pgq_install(dsn))
    worker = pgqueuer_worker(dsn, starts)
    try:

        async def client() -> dict:
            conn = await asyncpg.connect(dsn)
            queries = Queries(AsyncpgDriver(conn))
            loop = asyncio.get_running_loop()

            def one(i: int) -> tuple[str, float]:
                fut = asyncio.run_coroutine_threadsafe(
                    queries.enqueue("noop", str(i).encode()), loop
                )
                fut.result()
                return str(i), time.time()

            try:
                return await asyncio.to_thread(_idle_loop, one, starts, [worker], idle, warmup, gap)
            finally:
                await conn.close()

        time.sleep(1)  # its listener is up (the warm-up would also find the jobs)
        return asyncio.run(client())
    finally:
        worker.stop()
        Path(starts).unlink(missing_ok=True)
        _common.drop_database(pg, name)


# -- the floor ------------------------------------------------------------------------------


def floor_latency(
    pg: LocalCluster, idle: int, warmup: int, gap: float, mode: str = "", prepare=None, inspect=None
) -> dict:
    """The floor's idle latency. mode "--with-writes": the floor's claim also makes the
    writes a durable, fenced, idempotent claim must make, on small tables of its own;
    "--on-runlane": it makes them on runlane's tables, on runs runlane's own submit_message
    and publish_run published; "--with-rules": the writes and the rules an idle chat claim
    checks, on narrow tables built for the claim; "--hot-on-runlane": --on-runlane's writes
    on tables `prepare(conn)` reshaped (bench/hot_claim.py). `inspect(conn)`, after the
    wake-ups, returns figures added to the result (bench/_floor_worker.py)."""
    name = "bench_durable_floor" + mode.replace("--", "_").replace("-", "_")
    on_runlane = mode in ("--on-runlane", "--hot-on-runlane")
    dsn = _common.create_database(pg, name, template=TEMPLATE if on_runlane else None)
    starts = tempfile.mkstemp(prefix="bench-starts-", suffix=".txt")[1]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            {
                "": floor_worker_module.TABLE,
                "--with-writes": floor_worker_module.WRITES_TABLES,
                "--on-runlane": floor_worker_module.RUNLANE_RECEIPT,
                "--with-rules": floor_worker_module.RULES_TABLES,
                "--hot-on-runlane": floor_worker_module.RUNLANE_RECEIPT,
            }[mode]
        )
        if prepare:
            prepare(conn)
    worker = floor_worker(dsn, starts, mode)
    try:
        time.sleep(1)  # LISTEN is issued (the warm-up waits for its rows anyway)
        with psycopg.connect(dsn, autocommit=True) as conn:
            if on_runlane:
                one = _chat_publisher(conn)
            else:
                insert = {
                    "": "insert into floor_queue (payload) values ('bench')",
                    "--with-writes": "insert into floor_writes_queue default values",
                    "--with-rules": "insert into floor_rules_queue (org) values (1)",
                }[mode]

                def one(i: int) -> tuple[str, float]:
                    row = conn.execute(
                        f"with q as ({insert} returning id) "
                        "select q.id, pg_notify('floor', '') from q"
                    ).fetchone()
                    return str(row[0]), time.time()

            result = _idle_loop(one, starts, [worker], idle, warmup, gap)
            return {**result, **inspect(conn)} if inspect else result
    finally:
        worker.stop()
        Path(starts).unlink(missing_ok=True)
        _common.drop_database(pg, name)


# -- figures --------------------------------------------------------------------------------


def drain_summary(drains: list[dict], workers: list[int]) -> list[dict]:
    """Per worker count: each system's medians over its drains, and the median of the
    pairs' runlane / PgQueuer ratios (a pair's two drains ran back to back)."""
    keys = ("jobs_per_s", "pg_cpu_ms_per_run", "worker_cpu_ms_per_run", "enqueue_pg_cpu_ms_per_run")
    rows = []
    for w in workers:
        mine = [d for d in drains if d["workers"] == w]
        medians = {
            system: {
                k: round(statistics.median(d[k] for d in mine if d["system"] == system), 3)
                for k in keys
            }
            for system in ("runlane", "pgqueuer")
        }
        pairs = sorted({d["pair"] for d in mine})
        ratios = [
            round(
                next(d["jobs_per_s"] for d in mine if d["pair"] == p and d["system"] == "runlane")
                / next(
                    d["jobs_per_s"] for d in mine if d["pair"] == p and d["system"] == "pgqueuer"
                ),
                3,
            )
            for p in pairs
        ]
        rows.append(
            {
                "workers": w,
                **medians,
                "ratios": ratios,
                "ratio_median": round(statistics.median(ratios), 3),
            }
        )
    return rows


def stats(ms: list[float]) -> dict:
    return {
        "n": len(ms),
        "p50_ms": round(_common.percentile(ms, 0.5), 3),
        "p90_ms": round(_common.percentile(ms, 0.9), 3),
        "p99_ms": round(_common.percentile(ms, 0.99), 3),
        "max_ms": round(max(ms), 3),
        "negative": sum(1 for m in ms if m < 0),
    }


def parse(argv):
    ap = argparse.ArgumentParser(
        prog="python -m bench.durable_compare", description=__doc__.splitlines()[0]
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="2,000 runs and 100 idle jobs instead of 20,000 and 300",
    )
    ap.add_argument("--runs", type=int, help="runs (jobs) drained per system and worker count")
    ap.add_argument("--workers", default="2,4", help="worker process counts, comma-separated")
    ap.add_argument("--idle", type=int, help="idle jobs per system, one every --gap")
    ap.add_argument("--gap", type=float, default=0.02, help="seconds between idle jobs")
    ap.add_argument("--warmup", type=int, default=20, help="unmeasured idle jobs first")
    ap.add_argument("--no-latency", action="store_true", help="the drains only")
    ap.add_argument(
        "--enqueue",
        type=int,
        help="messages (jobs) a client accepts in each way, per round (20,000; quick 2,000)",
    )
    ap.add_argument(
        "--enqueue-repeat", type=int, default=3, help="client enqueue rounds, the ways rotated"
    )
    ap.add_argument(
        "--enqueue-only", action="store_true", help="client enqueue only: no drain, no latency"
    )
    ap.add_argument("--repeat", type=int, help="latency rounds, the six in turn (3; quick 1)")
    ap.add_argument(
        "--drains",
        type=int,
        help="drain pairs (runlane, PgQueuer) per worker count, the order "
        "alternating; the table shows medians (5; quick 1)",
    )
    ap.add_argument(
        "--max-per-org",
        default="",
        help="runlane worker --max-per-org (unset: the worker's default, "
        f"{WorkerConfig.max_per_org}; 0: no bound)",
    )
    args = ap.parse_args(argv)
    args.runs = args.runs or (2000 if args.quick else 20000)
    args.idle = args.idle or (100 if args.quick else 300)
    args.enqueue = args.enqueue or (2000 if args.quick else 20000)
    args.workers = [int(w) for w in str(args.workers).split(",") if w]
    args.repeat = args.repeat or (1 if args.quick else 3)
    args.drains = args.drains or (1 if args.quick else 5)
    return args


def _lat(name: str, s: dict) -> str:
    return (
        f"  {name:<34} p50 {s['p50_ms']:>7.2f}  p90 {s['p90_ms']:>7.2f}  "
        f"p99 {s['p99_ms']:>7.2f}  max {s['max_ms']:>7.2f} ms (n={s['n']})"
    )


def main(argv=None) -> list[str]:
    global MAX_PER_ORG
    args = parse(argv)
    MAX_PER_ORG = str(args.max_per_org)
    began = time.monotonic()
    drains, latency, enqueue = [], {}, {}
    pg = LocalCluster(settings=CLUSTER_SETTINGS)
    pg.start()
    try:
        runlane_template(pg)
        # Pairs, the order alternating: this machine moves between a fast and a slow state
        # within minutes (one system's drain read 30-40 % apart an hour later), so a
        # single pair's ratio says little; the summary takes the median of the pairs'.
        for pair in range(0 if args.enqueue_only else max(args.drains, 1)):
            for w in args.workers:
                profile = pair == 0 and w == max(args.workers)
                if pair % 2 == 0:
                    ours = runlane_drain(pg, w, args.runs, profile=profile)
                    theirs = pgqueuer_drain(pg, w, args.runs)
                else:
                    theirs = pgqueuer_drain(pg, w, args.runs)
                    ours = runlane_drain(pg, w, args.runs, profile=profile)
                ours["pair"] = theirs["pair"] = pair + 1
                drains += [ours, theirs]
                print(
                    f"  pair {pair + 1}, {w} workers: runlane {ours['jobs_per_s']:.0f}/s "
                    f"({ours['pg_cpu_ms_per_run']:.3f} ms PG CPU/run, "
                    f"load {ours['load_average']}), PgQueuer {theirs['jobs_per_s']:.0f}/s "
                    f"({theirs['pg_cpu_ms_per_run']:.3f} ms, load {theirs['load_average']}): "
                    f"{ours['jobs_per_s'] / theirs['jobs_per_s']:.2f}x",
                    flush=True,
                )
        summary = drain_summary(drains, args.workers) if drains else []
        enqueue = client_enqueue(pg, args.enqueue, args.enqueue_repeat)
        if not (args.no_latency or args.enqueue_only):
            # Rounds, the six in turn each round: one round's ratio moves with the load of
            # the moment (the floor's own p50 ranged 0.3-6.5 ms between runs here), so the
            # goals are judged on the median of the per-round ratios. The goals are against
            # the bare floor (the issue's); the floor making a claim's required writes
            # (--with-writes) is measured beside it, as the yardstick a claim that keeps
            # fences, a journal and idempotent resends can be held to.
            latency["rounds"] = []
            for r in range(max(args.repeat, 1)):
                one = {
                    "load_average": load_average(),
                    "floor": floor_latency(pg, args.idle, args.warmup, args.gap),
                    "floor_writes": floor_latency(
                        pg, args.idle, args.warmup, args.gap, mode="--with-writes"
                    ),
                    "floor_runlane": floor_latency(
                        pg, args.idle, args.warmup, args.gap, mode="--on-runlane"
                    ),
                    "floor_rules": floor_latency(
                        pg, args.idle, args.warmup, args.gap, mode="--with-rules"
                    ),
                    "runlane": runlane_latency(pg, args.idle, args.warmup, args.gap),
                    "pgqueuer": pgqueuer_latency(pg, args.idle, args.warmup, args.gap),
                }
                one["ratios"] = {
                    f"{key}_{q}": round(one[key][f"{q}_ms"] / one["floor"][f"{q}_ms"], 2)
                    for key in (
                        "runlane",
                        "pgqueuer",
                        "floor_writes",
                        "floor_runlane",
                        "floor_rules",
                    )
                    for q in ("p50", "p99")
                }
                one["ratios"].update(
                    {
                        f"runlane_vs_{floor}_{q}": round(
                            one["runlane"][f"{q}_ms"] / one[floor][f"{q}_ms"], 2
                        )
                        for floor in ("floor_writes", "floor_runlane", "floor_rules")
                        for q in ("p50", "p99")
                    }
                )
                latency["rounds"].append(one)
                print(
                    f"  latency round {r + 1} (load {one['load_average']}): p50 floor "
                    f"{one['floor']['p50_ms']:.2f}, floor with writes "
                    f"{one['floor_writes']['p50_ms']:.2f}, on runlane's tables "
                    f"{one['floor_runlane']['p50_ms']:.2f}, with rules "
                    f"{one['floor_rules']['p50_ms']:.2f}, runlane "
                    f"{one['runlane']['p50_ms']:.2f}, PgQueuer "
                    f"{one['pgqueuer']['p50_ms']:.2f} ms",
                    flush=True,
                )
            latency["median_ratios"] = {
                k: round(statistics.median(o["ratios"][k] for o in latency["rounds"]), 2)
                for k in latency["rounds"][0]["ratios"]
            }
        info = _common.machine()
        with _common.admin(pg) as conn:
            info["postgres"] = conn.execute("show server_version").fetchone()[0]
    finally:
        pg.destroy()
    from importlib.metadata import version

    info["settings"] = DURABLE_SETTINGS
    info["pgqueuer"] = version("pgqueuer")
    info["asyncpg"] = version("asyncpg")
    path = _common.write_result(
        "durable_compare",
        {
            "machine": info,
            "args": vars(args),
            "drains": drains,
            "drain_summary": summary,
            "latency": latency,
            "client_enqueue": enqueue,
            "accept_ratio_pgqueuer": enqueue["accept_ratio"],
            "accept_ratio_pgqueuer_pipelined": enqueue["accept_ratio_pipelined"],
            "goals": {
                "jobs_per_s_ratio_min": RATE_GOAL,
                "p50_vs_floor_max": P50_GOAL,
                "p99_vs_floor_max": P99_GOAL,
                # send_message pipelined in pages (a page commits once); one by one, each
                # message its own commit, is reported beside it
                "accept_ratio_pgqueuer_pipelined_min": RATE_GOAL,
            },
        },
    )

    lines = [
        f"durable commits (fsync, synchronous_commit, full_page_writes on), "
        f"{info['cores']} cores, PostgreSQL {info['postgres']}, "
        f"PgQueuer {info['pgqueuer']} (asyncpg {info['asyncpg']}), {args.runs} jobs, "
        f"medians of {max(args.drains, 1)} drain pair(s):",
        f"  {'system':<9} {'workers':>7} {'jobs/s':>8} {'PG CPU ms/job':>14} "
        f"{'worker CPU ms/job':>18} {'enqueue PG CPU ms/job':>22} "
        f"{'vs PgQueuer (pairs)':>26}",
    ]
    for row in summary:
        for system in ("runlane", "pgqueuer"):
            m = row[system]
            ratio = ""
            if system == "runlane":
                ratio = (
                    f"{row['ratio_median']:.2f}x ("
                    + ", ".join(f"{r:.2f}" for r in row["ratios"])
                    + ")"
                )
            lines.append(
                f"  {system:<9} {row['workers']:>7} {m['jobs_per_s']:>8.0f} "
                f"{m['pg_cpu_ms_per_run']:>14.3f} {m['worker_cpu_ms_per_run']:>18.3f} "
                f"{m['enqueue_pg_cpu_ms_per_run']:>22.3f} {ratio:>26}"
            )
    if latency:
        last = latency["rounds"][-1]
        lines.append(
            f"  idle publish -> handler start, one worker each, "
            f"{args.gap * 1000:.0f} ms gap, last of {len(latency['rounds'])} rounds "
            f"(load {last['load_average']}):"
        )
        lines.append(_lat("floor (LISTEN + one UPDATE)", last["floor"]))
        lines.append(_lat("floor with writes (--with-writes)", last["floor_writes"]))
        lines.append(_lat("on runlane's tables (--on-runlane)", last["floor_runlane"]))
        lines.append(_lat("with rules, narrow (--with-rules)", last["floor_rules"]))
        for key in ("runlane", "pgqueuer"):
            lines.append(_lat(key, last[key]))
        m = latency["median_ratios"]
        for key in ("runlane", "pgqueuer"):
            lines.append(
                f"  {key} vs floor, median over rounds: p50 {m[key + '_p50']:.2f}x, "
                f"p99 {m[key + '_p99']:.2f}x (goal for runlane <= {P50_GOAL}x / "
                f"<= {P99_GOAL}x)"
            )
        for floor, what in (
            ("floor_writes", "the floor with writes"),
            ("floor_runlane", "the floor with writes on runlane's tables"),
            ("floor_rules", "the floor with rules on narrow tables"),
        ):
            lines.append(
                f"  {what} vs floor, median over rounds: p50 "
                f"{m[floor + '_p50']:.2f}x, p99 {m[floor + '_p99']:.2f}x"
            )
            lines.append(
                f"  runlane vs {what}, median over rounds: p50 "
                f"{m['runlane_vs_' + floor + '_p50']:.2f}x, p99 "
                f"{m['runlane_vs_' + floor + '_p99']:.2f}x"
            )
    lines.append(
        f"  client accepting chat messages one call at a time, {args.enqueue} per way, "
        f"medians of {len(enqueue['rounds'])} round(s): "
        + ", ".join(
            f"{m} {enqueue[m]['messages_per_s']:.0f}/s "
            f"({enqueue[m]['pg_cpu_ms_per_message']:.3f} ms PG CPU)"
            for m in ACCEPT_MODES
        )
    )
    lines.append(
        f"  send_message vs PgQueuer enqueue, median of the rounds: one by one "
        f"{enqueue['accept_ratio']:.2f}x, pipelined {enqueue['accept_ratio_pipelined']:.2f}x "
        f"(goal >= {RATE_GOAL}x)"
    )
    profiled = [d for d in drains if d["system"] == "runlane" and d["top_statements"]]
    if profiled:
        d = profiled[0]
        lines.append(
            f"  runlane's drain with {d['workers']} workers, top statements by "
            f"total_exec_time (nested included), per run:"
        )
        for s in d["top_statements"][:10]:
            lines.append(
                f"    {s['total_ms'] * 1000 / d['runs']:>7.1f} us/run "
                f"{s['calls']:>7} calls  {s['query'][:90]}"
            )
        lines.append("  PL/pgSQL functions by self time, per run:")
        for f in d["top_functions"][:8]:
            lines.append(
                f"    {f['self_ms'] * 1000 / d['runs']:>7.1f} us/run "
                f"{f['calls']:>7} calls  {f['function']}"
            )
    lines.append(f"  ({time.monotonic() - began:.0f} s; {path})")
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
