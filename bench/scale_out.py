"""Scale-out of the worker side: 1, 2, 4 and 8 real worker processes against one database.

One throwaway cluster with durable_compare's durable settings (fsync, synchronous_commit
and full_page_writes on; pg_stat_statements loaded, track_functions = pl), one migrated
template with ORGS organizations (their cap never binds) and AGENTS agents spread over
them. For each worker count W, on a fresh database cloned from the template:

* W real `runlane worker --lane interactive --lane background --agent
  bench._noop_agent:agent` processes start with their defaults (maintenance on,
  --max-per-org 200, --pool-size 10: a deployment's worker), and the benchmark waits until
  every one has registered (runlane.workers) and is idle.
* One client submits N chat runs (submit_message, each on its own thread, round-robin over
  the agents and so over the organizations: N / ORGS runs per organization, so neither an
  organization's cap nor --max-per-org binds) and publishes each (publish_run), then
  ANALYZEs, all in ONE transaction; the server's and the workers' CPU and the WAL position
  are read, and the transaction commits: the workers see the whole burst at once.
* Until every run is finished, a monitor connection samples every 0.1 s the server's
  connections by application_name (a worker's are all named `runlane-worker:<id>`, its
  maintenance connection `…:maintenance`) and pg_notification_queue_usage().
* runs/s = N over first start -> last finish as the database recorded them
  (runs.first_started_at, finished_at). PostgreSQL CPU = utime + stime of every server
  process from /proc (durable_compare.server_cpu_seconds), worker CPU = the same of the W
  worker processes, both from just before the commit to the last finish; WAL bytes =
  pg_wal_lsn_diff over the same span; the workers' top-level statements (claim_runs,
  run_messages_many, finish_runs, …) from pg_stat_statements: time and WAL per run.

Then the application side, without workers (--publish-clients, 1, 4 and 16): each client
thread submits a chat message and publishes its run as an application does, two commits
per message, for --publish-seconds; publish_run notifies, and every transaction that
notifies takes one cluster-wide lock at commit and holds it through its commit's WAL flush
(PostgreSQL's async.c, PreCommit_Notify): a monitor counts the sessions waiting for it
every 20 ms. messages/s, PostgreSQL CPU and WAL per message.

Then what one primary carries with rows queued: claim_fairness's 100,000 queued runs over
1,000 organizations (--queued; quick 10,000) on the same durable cluster, p50 of
`claim_runs(p_limit => 10)` on the interactive lane and on both, rolled back each time.

The machine this was written on has 2 cores: with more worker processes than cores the
figures measure contention for those cores (workers and PostgreSQL share them), not the
capacity of more workers on more machines.

    python -m bench scale_out [--quick] [--runs N] [--workers 1,2,4,8] [--orgs N]
                              [--queued N] [--claims N] [--publish-clients 1,4,16]
                              [--publish-seconds S]
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid

import psycopg

from bench import _common, claim_fairness
from bench.durable_compare import (
    CLUSTER_SETTINGS,
    DURABLE_SETTINGS,
    Proc,
    _ticks,
    load_average,
    server_cpu_seconds,
    wait_until,
)
from runlane.pgcluster import LocalCluster

TEMPLATE = "bench_scale_template"
ORGS = 1_000
AGENTS = 2_000
WORKER_PREFIX = "scale"
SAMPLE_EVERY = 0.1

SUBMIT = """
select s.run_id
from generate_series(1, %(n)s::int) as g,
     lateral runlane.submit_message(
         'agent' || (g %% %(agents)s::int + 1), %(tag)s || '-' || g, 'bench') as s
"""

SAMPLE = """
select coalesce(application_name, ''), count(*)
from pg_stat_activity
where datname = current_database() and pid <> pg_backend_pid()
group by 1
"""

# The workers' top-level statements during the drain (pg_stat_statements, reset just
# before the commit; its counters are updated as each statement ends).
STATEMENTS = """
select regexp_replace(left(query, 120), '\\s+', ' ', 'g') as query, calls, rows,
       total_exec_time, wal_bytes
from pg_stat_statements
where toplevel and dbid = (select oid from pg_database where datname = current_database())
  and query ~ 'runlane[.][a-z_]+[(]'
order by total_exec_time desc
limit 8
"""


def worker_proc(dsn: str, index: int) -> Proc:
    """A worker as a deployment runs it: both lanes, maintenance on, default bounds."""
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
            "--lane",
            "background",
            "--agent",
            "bench._noop_agent:agent",
            "--worker-id",
            f"{WORKER_PREFIX}{index}-{uuid.uuid4().hex[:6]}",
        ],
        {},
    )


def process_cpu_seconds(pids: list[int]) -> float:
    """utime + stime (and reaped children's) of these processes, in seconds."""
    ticks = 0
    for pid in pids:
        _, used, reaped = _ticks(pid)
        ticks += used + reaped
    return ticks / os.sysconf("SC_CLK_TCK")


def worker_of(application_name: str) -> str | None:
    """The worker id an application_name belongs to (its maintenance connection too)."""
    if not application_name.startswith(f"runlane-worker:{WORKER_PREFIX}"):
        return None
    return application_name.removeprefix("runlane-worker:").removesuffix(":maintenance")


class Sampler(threading.Thread):
    """Samples connections per worker and the NOTIFY queue's usage until stopped."""

    def __init__(self, dsn: str):
        super().__init__(daemon=True)
        self.dsn = dsn
        self.done = threading.Event()
        self.samples = 0
        self.max_per_worker: dict[str, int] = {}
        self.max_total = 0
        self.max_queue = 0.0
        self.error: BaseException | None = None

    def sample(self, conn: psycopg.Connection) -> None:
        per: dict[str, int] = {}
        total = 0
        for name, count in conn.execute(SAMPLE).fetchall():
            total += count
            worker = worker_of(name)
            if worker:
                per[worker] = per.get(worker, 0) + count
        for worker, count in per.items():
            self.max_per_worker[worker] = max(self.max_per_worker.get(worker, 0), count)
        self.max_total = max(self.max_total, total)
        usage = conn.execute("select pg_notification_queue_usage()").fetchone()[0]
        self.max_queue = max(self.max_queue, float(usage))
        self.samples += 1

    def run(self) -> None:
        try:
            with psycopg.connect(
                self.dsn, autocommit=True, application_name="bench-scale-monitor"
            ) as conn:
                while not self.done.is_set():
                    self.sample(conn)
                    self.done.wait(SAMPLE_EVERY)
                self.sample(conn)
        except BaseException as exc:  # reported by the caller
            self.error = exc


def template(pg: LocalCluster, orgs: int, agents: int) -> None:
    dsn = _common.migrated_database(pg, TEMPLATE)
    with psycopg.connect(dsn, autocommit=True) as conn:
        _common.seed_agents(conn, agents=agents, orgs=orgs)


def connections_of(conn: psycopg.Connection) -> dict[str, int]:
    per: dict[str, int] = {}
    for name, count in conn.execute(SAMPLE).fetchall():
        worker = worker_of(name)
        if worker:
            per[worker] = per.get(worker, 0) + count
    return per


def drain(pg: LocalCluster, workers: int, runs: int, agents: int, orgs: int) -> dict:
    name = f"bench_scale_{workers}"
    dsn = _common.create_database(pg, name, template=TEMPLATE)
    procs: list[Proc] = []
    try:
        with psycopg.connect(
            dsn, autocommit=True, application_name="bench-scale-submitter"
        ) as conn:
            conn.execute("create extension if not exists pg_stat_statements")
            procs = [worker_proc(dsn, i) for i in range(workers)]
            # Every worker registered (after its startup LISTEN check) and connected,
            # then a moment for their first passes to end.
            wait_until(
                lambda: (
                    conn.execute(
                        "select count(*) from runlane.workers "
                        "where stopped_at is null and worker_id like %s",
                        (f"{WORKER_PREFIX}%",),
                    ).fetchone()[0]
                    >= workers
                    and len(connections_of(conn)) >= workers
                ),
                "the workers' start",
                procs,
                timeout=120,
            )
            time.sleep(2.0)
            idle_connections = connections_of(conn)

            tag = uuid.uuid4().hex
            wal0 = conn.execute("select pg_current_wal_lsn()").fetchone()[0]
            cpu0 = server_cpu_seconds(pg)
            conn.execute("begin")
            ids = [
                r[0]
                for r in conn.execute(SUBMIT, {"n": runs, "agents": agents, "tag": tag}).fetchall()
            ]
            conn.execute("select runlane.publish_run(r) from unnest(%s::bigint[]) as r", (ids,))
            conn.execute("analyze runlane.runs")  # statistics with the burst queued
            conn.execute("select pg_stat_statements_reset()")
            cpu1 = server_cpu_seconds(pg)
            wal1 = conn.execute("select pg_current_wal_lsn()").fetchone()[0]
            pids = [p.proc.pid for p in procs]
            wcpu1 = process_cpu_seconds(pids)
            sampler = Sampler(dsn)
            sampler.start()
            load = load_average()
            began = time.monotonic()
            conn.execute("commit")
            committed = time.monotonic()
            try:
                wait_until(
                    lambda: (
                        conn.execute(
                            "select count(*) from runlane.runs where finished_at is null"
                        ).fetchone()[0]
                        == 0
                    ),
                    "the drain",
                    procs,
                    timeout=1800,
                    every=0.05,
                )
                drained = time.monotonic()
                cpu2 = server_cpu_seconds(pg)
                wcpu2 = process_cpu_seconds(pids)
                wal2 = conn.execute("select pg_current_wal_lsn()").fetchone()[0]
            finally:
                sampler.done.set()
                sampler.join(30)
            if sampler.error:
                raise sampler.error
            states = dict(
                conn.execute("select state, count(*) from runlane.runs group by state").fetchall()
            )
            if states != {"succeeded": runs}:  # a drain that lost or failed runs is no figure
                raise RuntimeError(f"expected {runs} succeeded runs, found {states}")
            first, last = conn.execute(
                "select extract(epoch from min(first_started_at)), "
                "extract(epoch from max(finished_at)) from runlane.runs"
            ).fetchone()
            statements = [
                {
                    "query": q,
                    "calls": c,
                    "rows": r,
                    "total_ms": round(t, 1),
                    "us_per_run": round(t * 1000 / runs, 1),
                    "wal_bytes_per_run": round(int(w) / runs),
                }
                for q, c, r, t, w in conn.execute(STATEMENTS).fetchall()
            ]
            enqueue_wal, drain_wal = conn.execute(
                "select pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)::bigint, "
                "pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)::bigint",
                (str(wal1), str(wal0), str(wal2), str(wal1)),
            ).fetchone()
    finally:
        for p in procs:
            p.stop()
        _common.drop_database(pg, name)
    seconds = float(last - first)
    per_worker = sorted(sampler.max_per_worker.values())
    return {
        "workers": workers,
        "runs": runs,
        "organizations": orgs,
        "agents": agents,
        "states": states,
        "seconds": round(seconds, 3),
        "runs_per_s": round(runs / seconds, 1),
        "commit_to_drained_s": round(drained - committed, 3),
        "commit_s": round(committed - began, 3),
        "pg_cpu_ms_per_run": round((cpu2 - cpu1) * 1000 / runs, 3),
        "worker_cpu_ms_per_run": round((wcpu2 - wcpu1) * 1000 / runs, 3),
        "pg_cpu_s": round(cpu2 - cpu1, 2),
        "worker_cpu_s": round(wcpu2 - wcpu1, 2),
        "wall_s": round(drained - committed, 2),
        "enqueue_pg_cpu_ms_per_run": round((cpu1 - cpu0) * 1000 / runs, 3),
        "enqueue_wal_bytes_per_run": round(enqueue_wal / runs),
        "drain_wal_bytes_per_run": round(drain_wal / runs),
        "notify_queue_usage_max": sampler.max_queue,
        "connections_per_worker_idle": sorted(idle_connections.values()),
        "connections_per_worker_max": per_worker,
        "connections_total_max": sampler.max_total,
        "samples": sampler.samples,
        "statements": statements,
        "load_average": load,
    }


# Waiters for the lock every notifying transaction takes at commit (PostgreSQL's async.c,
# PreCommit_Notify: a heavyweight lock on "database 0", held until the commit ends).
NOTIFY_LOCK_WAITERS = """
select count(*) from pg_locks
where locktype = 'object' and classid = 'pg_database'::regclass and objid = 0
  and database = 0 and not granted
"""


def publish(pg: LocalCluster, clients: int, seconds: float, agents: int) -> dict:
    """`clients` threads, each submitting a chat message and publishing its run as an
    application does (two commits; publish_run notifies), for `seconds`; no worker runs.
    A monitor counts the sessions waiting for NOTIFY's commit lock every 20 ms."""
    name = f"bench_scale_publish_{clients}"
    dsn = _common.create_database(pg, name, template=TEMPLATE)
    stop = threading.Event()
    counts = [0] * clients
    errors: list[BaseException] = []
    waiting: list[int] = []

    def client(i: int) -> None:
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                tag = uuid.uuid4().hex
                while not stop.is_set():
                    n = counts[i]
                    run_id = conn.execute(
                        "select run_id from runlane.submit_message(%s, %s, 'bench')",
                        (f"agent{(i * 7919 + n) % agents + 1}", f"{tag}-{n}"),
                    ).fetchone()[0]
                    conn.execute("select runlane.publish_run(%s)", (run_id,))
                    counts[i] = n + 1
        except BaseException as exc:  # reported below
            errors.append(exc)

    try:
        with psycopg.connect(dsn, autocommit=True) as mon:
            wal0 = mon.execute("select pg_current_wal_lsn()").fetchone()[0]
            cpu0 = server_cpu_seconds(pg)
            threads = [
                threading.Thread(target=client, args=(i,), daemon=True) for i in range(clients)
            ]
            began = time.monotonic()
            for t in threads:
                t.start()
            while time.monotonic() - began < seconds and not errors:
                waiting.append(mon.execute(NOTIFY_LOCK_WAITERS).fetchone()[0])
                time.sleep(0.02)
            stop.set()
            for t in threads:
                t.join(60)
            elapsed = time.monotonic() - began
            time.sleep(0.5)  # the clients' backends exited: counted once reaped
            cpu1 = server_cpu_seconds(pg)
            wal = mon.execute(
                "select pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)", (str(wal0),)
            ).fetchone()[0]
            published = mon.execute(
                "select count(*) from runlane.runs where state = 'queued'"
            ).fetchone()[0]
    finally:
        stop.set()
        _common.drop_database(pg, name)
    if errors:
        raise errors[0]
    messages = sum(counts)
    return {
        "clients": clients,
        "seconds": round(elapsed, 2),
        "messages": messages,
        "runs_queued": published,
        "messages_per_s": round(messages / elapsed, 1),
        "pg_cpu_ms_per_message": round((cpu1 - cpu0) * 1000 / max(messages, 1), 3),
        "wal_bytes_per_message": round(float(wal) / max(messages, 1)),
        "notify_lock_waiters_mean": round(sum(waiting) / max(len(waiting), 1), 2),
        "notify_lock_waiters_max": max(waiting, default=0),
        "notify_lock_samples_with_waiters": round(
            sum(1 for w in waiting if w) / max(len(waiting), 1), 3
        ),
        "load_average": load_average(),
    }


def queued_claims(pg: LocalCluster, queued: int, orgs: int, calls: int) -> dict:
    """claim_fairness's queue (queued runs over orgs organizations, vacuumed), p50 of
    claim_runs(p_limit => 10) per lane set, each claim rolled back."""
    _common.migrated_database(pg, claim_fairness.TEMPLATE)
    name = "bench_scale_queued"
    t0 = time.monotonic()
    dsn = claim_fairness.build(pg, name, queued, orgs)
    built = time.monotonic() - t0
    out = {"queued": queued, "organizations": orgs, "calls": calls, "build_s": round(built, 1)}
    try:
        with psycopg.connect(dsn) as conn:
            out["table_mb"] = round(
                conn.execute("select pg_total_relation_size('runlane.runs')").fetchone()[0] / 2**20,
                1,
            )
            for label, lanes in claim_fairness.LANES.items():
                for _ in range(30):  # plans cached, buffers hot
                    claim_fairness.one_claim(conn, lanes)
                ms = [claim_fairness.one_claim(conn, lanes)[0] * 1000 for _ in range(calls)]
                out[label] = {
                    "p50_ms": round(_common.percentile(ms, 0.5), 3),
                    "p99_ms": round(_common.percentile(ms, 0.99), 3),
                }
    finally:
        _common.drop_database(pg, name)
        _common.drop_database(pg, claim_fairness.TEMPLATE)
    return out


def parse(argv):
    ap = argparse.ArgumentParser(
        prog="python -m bench scale_out", description=__doc__.splitlines()[0]
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="1,000 runs per worker count and 10,000 queued instead of 20,000 and 100,000",
    )
    ap.add_argument("--runs", type=int, help="chat runs drained per worker count")
    ap.add_argument("--workers", default="1,2,4,8", help="worker process counts")
    ap.add_argument("--orgs", type=int, default=ORGS, help="organizations")
    ap.add_argument("--agents", type=int, default=AGENTS, help="agents (over the orgs)")
    ap.add_argument("--queued", type=int, help="queued runs for the claim measurement (0: skip it)")
    ap.add_argument("--claims", type=int, help="timed claims per lane set")
    ap.add_argument(
        "--publish-clients",
        default="1,4,16",
        help="concurrent submitting clients for the publish part ('': skip it)",
    )
    ap.add_argument(
        "--publish-seconds",
        type=float,
        help="seconds of submitting per client count (5; quick 1.5)",
    )
    args = ap.parse_args(argv)
    args.runs = args.runs or (1000 if args.quick else 20000)
    if args.queued is None:
        args.queued = 10_000 if args.quick else 100_000
    args.claims = args.claims or (50 if args.quick else 300)
    args.workers = [int(w) for w in str(args.workers).split(",") if w]
    args.publish_clients = [int(c) for c in str(args.publish_clients).split(",") if c]
    args.publish_seconds = args.publish_seconds or (1.5 if args.quick else 5.0)
    return args


def main(argv=None) -> list[str]:
    args = parse(argv)
    began = time.monotonic()
    drains, publishes = [], []
    queued = None
    pg = LocalCluster(settings=CLUSTER_SETTINGS)
    pg.start()
    try:
        template(pg, args.orgs, args.agents)
        for w in args.workers:
            d = drain(pg, w, args.runs, args.agents, args.orgs)
            drains.append(d)
            print(
                f"  {w} workers: {d['runs_per_s']:.0f} runs/s, PG CPU "
                f"{d['pg_cpu_ms_per_run']:.3f} ms/run, worker CPU "
                f"{d['worker_cpu_ms_per_run']:.3f} ms/run, WAL "
                f"{d['drain_wal_bytes_per_run']} B/run (load {d['load_average']})",
                flush=True,
            )
        for c in args.publish_clients:
            p = publish(pg, c, args.publish_seconds, args.agents)
            publishes.append(p)
            print(
                f"  publish, {c} clients: {p['messages_per_s']:.0f} messages/s, "
                f"{p['notify_lock_waiters_mean']:.2f} waiting for NOTIFY's commit lock "
                f"(load {p['load_average']})",
                flush=True,
            )
        if args.queued:
            queued = queued_claims(pg, args.queued, args.orgs, args.claims)
        info = _common.machine()
        with _common.admin(pg) as conn:
            info["postgres"] = conn.execute("show server_version").fetchone()[0]
            info["max_connections"] = conn.execute("show max_connections").fetchone()[0]
    finally:
        pg.destroy()
    info["settings"] = DURABLE_SETTINGS
    path = _common.write_result(
        "scale_out_quick" if args.quick else "scale_out",
        {
            "machine": info,
            "args": vars(args),
            "drains": drains,
            "publish": publishes,
            "queued_claims": queued,
        },
    )

    lines = [
        f"scale-out, durable commits, {info['cores']} cores, PostgreSQL "
        f"{info['postgres']}: {args.runs:,} chat runs over {args.orgs:,} organizations "
        f"({args.agents:,} agents) per worker count, committed at once:",
        f"  {'workers':>7} {'runs/s':>7} {'PG CPU ms/run':>14} {'worker CPU ms/run':>18} "
        f"{'WAL B/run':>10} {'enqueue WAL B/run':>18} {'conns/worker':>13} "
        f"{'NOTIFY max':>11}  load average",
    ]
    for d in drains:
        conns = d["connections_per_worker_max"]
        span = f"{min(conns)}-{max(conns)}" if conns else "?"
        lines.append(
            f"  {d['workers']:>7} {d['runs_per_s']:>7.0f} {d['pg_cpu_ms_per_run']:>14.3f} "
            f"{d['worker_cpu_ms_per_run']:>18.3f} {d['drain_wal_bytes_per_run']:>10} "
            f"{d['enqueue_wal_bytes_per_run']:>18} {span:>13} "
            f"{d['notify_queue_usage_max']:>11.1e}  {d['load_average']}"
        )
    if drains and drains[-1]["statements"]:
        d = drains[-1]
        lines.append(
            f"  the workers' top-level statements with {d['workers']} workers, per run (time, WAL):"
        )
        for st in d["statements"][:6]:
            lines.append(
                f"    {st['us_per_run']:>7.1f} us {st['wal_bytes_per_run']:>6} B "
                f"{st['calls']:>7} calls  {st['query'][:80]}"
            )
    if publishes:
        lines.append(
            "  publish (submit_message commit, then publish_run commit, per message; no worker):"
        )
        lines.append(
            f"  {'clients':>7} {'messages/s':>11} {'PG CPU ms/msg':>14} "
            f"{'WAL B/msg':>10} {'NOTIFY-lock waiters mean / max':>31}"
        )
        for p in publishes:
            lines.append(
                f"  {p['clients']:>7} {p['messages_per_s']:>11.0f} "
                f"{p['pg_cpu_ms_per_message']:>14.3f} {p['wal_bytes_per_message']:>10} "
                f"{p['notify_lock_waiters_mean']:>24.2f} / {p['notify_lock_waiters_max']}"
            )
    if queued:
        lines.append(
            f"  claim_runs(p_limit => 10) with {queued['queued']:,} queued runs over "
            f"{queued['organizations']:,} organizations ({queued['table_mb']} MB): "
            + ", ".join(
                f"{k} p50 {v['p50_ms']:.3f} ms (p99 {v['p99_ms']:.3f})"
                for k, v in queued.items()
                if isinstance(v, dict)
            )
        )
    if info["cores"] and max(args.workers, default=0) > info["cores"]:
        lines.append(
            f"  ({info['cores']} cores: beyond {info['cores']} worker processes the "
            f"figures measure contention for the cores, not capacity)"
        )
    lines.append(f"  ({time.monotonic() - began:.0f} s; {path})")
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main()
