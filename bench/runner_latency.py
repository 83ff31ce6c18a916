"""Publish → run start latency of a real `runlane worker`, and its memory, against procrastinate.

One throwaway cluster (bench/_common.py settings). runlane: ONE worker process
(`python -m runlane worker --lane interactive --agent runlane.agents.echo:agent
--no-maintenance`, JSON logs to a file, RUNLANE_ECHO_CHUNKS=1 and RUNLANE_ECHO_DELAY=0).
procrastinate (PyPI): ONE worker process (`App.run_worker_async`, listen/notify on,
concurrency = runlane's --pool-size) running an async task that records time.time().

* idle: IDLE runs, one every 20 ms. runlane: `submit_message` commits, then
  `publish_run` commits, then the client takes time.time(); the start is the run's
  `first_started_at` (set in the claiming transaction). procrastinate: time.time() after
  `defer_async` returns (committed, notified); the start is time.time() inside the task.
  Both clocks are this machine's clock.
* burst: BURST runs made visible in one commit (runlane: submit_message + publish_run
  for each in one transaction; procrastinate: batch_defer_async), latency from that commit.
* RSS (VmRSS of /proc/<pid>/status) of the runlane worker idle, and with MANY runs in
  flight at once (a separate worker whose echo agent sleeps RUNLANE_ECHO_DELAY=120 s).

WARMUP runs of each system go first and are not measured. The idle measurement is made
REPEAT times, the two systems alternating (fresh database and worker each round): one
round's ratio moves with the other system's noise (procrastinate's idle p50 ranged
1.46-1.9 ms between rounds here while runlane's stayed within 0.73-0.82 ms), so the
goals are judged on the median of the per-round ratios. Goals: idle p50 at most 0.5x
procrastinate's, idle p99 at most procrastinate's.

    python -m bench.runner_latency [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import procrastinate
import psycopg

from bench import _common

AGENTS = 20
POOL = 10  # runlane --pool-size and --claim-batch (defaults) = procrastinate concurrency
P50_GOAL, P99_GOAL = 0.5, 1.0
TEMPLATE = "bench_runner_template"
QUEUE = "latency"

# -- runlane workers ----------------------------------------------------------------------


def runlane_template(pg) -> None:
    """A migrated database with one organization (cap never binds) and AGENTS agents."""
    dsn = _common.migrated_database(pg, TEMPLATE)
    with psycopg.connect(dsn, autocommit=True) as conn:
        _common.seed_agents(conn, agents=AGENTS, orgs=1)


class Worker:
    """One real `runlane worker` process; stdout (JSON logs) goes to a file."""

    def __init__(
        self, dsn: str, chunks: int = 1, delay: float = 0.0, *args: str, maintenance: bool = False
    ):
        self.log = Path(tempfile.mkstemp(prefix="bench-worker-", suffix=".log")[1])
        cmd = [
            sys.executable,
            "-m",
            "runlane",
            "worker",
            "--dsn",
            dsn,
            "--lane",
            "interactive",
            "--agent",
            "runlane.agents.echo:agent",
            *([] if maintenance else ["--no-maintenance"]),
            "--worker-id",
            f"bench-{uuid.uuid4().hex[:8]}",
            *args,
        ]
        env = {**os.environ, "RUNLANE_ECHO_CHUNKS": str(chunks), "RUNLANE_ECHO_DELAY": str(delay)}
        self._out = open(self.log, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, stdout=self._out, stderr=subprocess.DEVNULL, env=env)
        self.started = time.monotonic()

    def events(self, message: str) -> list[dict]:
        found = []
        for line in self.log.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("message") == message:
                found.append(record)
        return found

    def wait_for(self, *messages: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not all(self.events(m) for m in messages):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"runlane worker never logged {messages}; see {self.log}")
            time.sleep(0.05)

    def wait_ready(self, timeout: float = 60) -> None:
        self.wait_for("dispatch.ready", "listener.listening", timeout=timeout)

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def stop(self, kill: bool = False) -> dict:
        """SIGTERM (SIGKILL with `kill`); returns its worker.stopped line (passes, claim
        queries) with how long it lived."""
        lived = time.monotonic() - self.started
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        stopped = (self.events("worker.stopped") or [{}])[-1]
        self._out.close()
        self.log.unlink(missing_ok=True)
        return {"lived_s": lived, **stopped}


SUBMIT = "select run_id from runlane.submit_message(%s, %s, 'bench')"
PUBLISH = "select runlane.publish_run(%s)"


def submit_one(conn: psycopg.Connection, i: int) -> int:
    """submit_message commits, then publish_run commits (the API path)."""
    run_id = conn.execute(SUBMIT, (f"agent{i % AGENTS + 1}", f"t-{uuid.uuid4().hex}")).fetchone()[0]
    conn.execute(PUBLISH, (run_id,))
    return run_id


def submit_burst(conn: psycopg.Connection, runs: int, publish: bool = True) -> list[int]:
    """`runs` interactive runs (each on its own thread) and their notifications, one commit."""
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
                {"n": runs, "agents": AGENTS, "tag": tag},
            ).fetchall()
        ]
        if publish:
            conn.execute("select runlane.publish_run(r) from unnest(%s::bigint[]) as r", (ids,))
    return ids


def wait_started(
    conn: psycopg.Connection, ids: list[int], state: str = "succeeded", timeout: float = 600
) -> dict[int, float]:
    """Waits until every run is in `state`; returns run_id -> first_started_at (epoch s)."""
    deadline = time.monotonic() + timeout
    while True:
        rows = conn.execute(
            "select run_id, extract(epoch from first_started_at)::float8, state = %s "
            "from runlane.runs where run_id = any(%s)",
            (state, ids),
        ).fetchall()
        if len(rows) == len(ids) and all(r[2] for r in rows):
            return {r[0]: r[1] for r in rows}
        if time.monotonic() > deadline:
            raise RuntimeError(f"runs not {state} after {timeout} s")
        time.sleep(0.1)


def runlane_latency(pg, idle: int, burst: int, warmup: int, gap: float) -> dict:
    """Idle then (when burst > 0) burst latency of one fresh runlane worker."""
    dsn = _common.create_database(pg, "bench_runner_latency", template=TEMPLATE)
    worker = Worker(dsn)
    try:
        worker.wait_ready()
        rss_idle_fresh = worker.rss_kib()
        with psycopg.connect(dsn, autocommit=True) as conn:
            wait_started(conn, [submit_one(conn, i) for i in range(warmup)])
            published: dict[int, float] = {}
            origin = time.monotonic()
            for i in range(idle):
                run_id = submit_one(conn, i)
                published[run_id] = time.time()
                pause = origin + (i + 1) * gap - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
            starts = wait_started(conn, list(published))
            idle_ms = [(starts[r] - t) * 1000 for r, t in published.items()]
            rss_idle_after = worker.rss_kib()
            burst_ms = []
            if burst:
                time.sleep(1)
                ids = submit_burst(conn, burst)
                at = time.time()
                starts = wait_started(conn, ids)
                burst_ms = [(s - at) * 1000 for s in starts.values()]
    finally:
        worker.stop()
        _common.drop_database(pg, "bench_runner_latency")
    return {
        "idle": stats(idle_ms),
        "burst": stats(burst_ms) if burst_ms else None,
        "rss_idle_kib": rss_idle_fresh,
        "rss_idle_after_runs_kib": rss_idle_after,
    }


def runlane_rss_in_flight(pg, runs: int) -> dict:
    """RSS of one worker holding `runs` runs at once (its echo agent sleeps 120 s)."""
    dsn = _common.create_database(pg, "bench_runner_rss", template=TEMPLATE)
    worker = Worker(dsn, 1, 120.0)
    try:
        worker.wait_ready()
        idle = worker.rss_kib()
        with psycopg.connect(dsn, autocommit=True) as conn:
            submit_burst(conn, runs)
            deadline = time.monotonic() + 120
            running = 0
            while running < runs and time.monotonic() < deadline:
                time.sleep(0.2)
                running = conn.execute(
                    "select count(*) from runlane.runs where state = 'running'"
                ).fetchone()[0]
            time.sleep(2)  # every agent has started its step (and its sleep)
            in_flight = worker.rss_kib()
            running = conn.execute(
                "select count(*) from runlane.runs where state = 'running'"
            ).fetchone()[0]
    finally:
        worker.stop(kill=True)
        _common.drop_database(pg, "bench_runner_rss")
    return {"rss_idle_kib": idle, "rss_in_flight_kib": in_flight, "running": running}


# -- procrastinate --------------------------------------------------------------------------


def make_app(dsn: str, pool: int, log_path: str = "") -> procrastinate.App:
    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(conninfo=dsn, min_size=pool, max_size=pool)
    )

    @app.task(name="bench_probe", queue=QUEUE)
    async def probe(i: int) -> None:
        started = time.time()
        with open(log_path, "a") as f:
            f.write(f"{i} {started}\n")

    return app


async def apply_procrastinate_schema(dsn: str) -> None:
    app = make_app(dsn, 1)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()


def procrastinate_worker(dsn: str, concurrency: int, log_path: str) -> None:
    async def run() -> None:
        app = make_app(dsn, concurrency, log_path)
        async with app.open_async():
            await app.run_worker_async(
                queues=[QUEUE], concurrency=concurrency, wait=True, listen_notify=True
            )

    asyncio.run(run())


def _read_starts(path: Path) -> dict[int, float]:
    starts = {}
    for line in path.read_text().splitlines():
        i, t = line.split()
        starts[int(i)] = float(t)
    return starts


async def _wait_starts(path: Path, ids, timeout: float = 600) -> dict[int, float]:
    deadline = time.monotonic() + timeout
    while True:
        starts = _read_starts(path)
        if all(i in starts for i in ids):
            return starts
        if time.monotonic() > deadline:
            raise RuntimeError("procrastinate jobs did not start")
        await asyncio.sleep(0.1)


async def _procrastinate_client(
    dsn: str, path: Path, idle: int, burst: int, warmup: int, gap: float
) -> tuple[list[float], list[float]]:
    app = make_app(dsn, 1)
    async with app.open_async():
        task = app.tasks["bench_probe"]
        for i in range(warmup):
            await task.defer_async(i=-1 - i)
        await _wait_starts(path, [-1 - i for i in range(warmup)])
        deferred = {}
        origin = time.monotonic()
        for i in range(idle):
            await task.defer_async(i=i)
            deferred[i] = time.time()
            pause = origin + (i + 1) * gap - time.monotonic()
            if pause > 0:
                await asyncio.sleep(pause)
        starts = await _wait_starts(path, deferred)
        idle_ms = [(starts[i] - t) * 1000 for i, t in deferred.items()]
        burst_ms = []
        if burst:
            await asyncio.sleep(1)
            ids = range(idle, idle + burst)
            await task.batch_defer_async(*({"i": i} for i in ids))
            at = time.time()
            starts = await _wait_starts(path, ids)
            burst_ms = [(starts[i] - at) * 1000 for i in ids]
    return idle_ms, burst_ms


def procrastinate_latency(pg, idle: int, burst: int, warmup: int, gap: float) -> dict:
    name = "bench_procrastinate_latency"
    dsn = _common.create_database(pg, name)
    path = Path(tempfile.mkstemp(prefix="bench-procrastinate-", suffix=".txt")[1])
    ctx = multiprocessing.get_context("spawn")
    proc = None
    try:
        asyncio.run(apply_procrastinate_schema(dsn))
        proc = ctx.Process(target=procrastinate_worker, args=(dsn, POOL, str(path)))
        proc.start()
        idle_ms, burst_ms = asyncio.run(_procrastinate_client(dsn, path, idle, burst, warmup, gap))
    finally:
        if proc is not None:
            proc.terminate()
            proc.join(30)
            if proc.exitcode is None:
                proc.kill()
                proc.join(10)
        path.unlink(missing_ok=True)
        _common.drop_database(pg, name)
    return {"idle": stats(idle_ms), "burst": stats(burst_ms) if burst_ms else None}


# -- figures --------------------------------------------------------------------------------


def stats(ms: list[float]) -> dict:
    return {
        "n": len(ms),
        "p50_ms": round(_common.percentile(ms, 0.5), 2),
        "p90_ms": round(_common.percentile(ms, 0.9), 2),
        "p99_ms": round(_common.percentile(ms, 0.99), 2),
        "max_ms": round(max(ms), 2),
        "min_ms": round(min(ms), 2),
        "negative": sum(1 for m in ms if m < 0),
    }


def parse(argv):
    ap = argparse.ArgumentParser(
        prog="python -m bench.runner_latency", description=__doc__.splitlines()[0]
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="100 idle runs and a 500-run burst instead of 300 and 2,000",
    )
    ap.add_argument("--idle", type=int, help="runs submitted one every --gap (300)")
    ap.add_argument("--burst", type=int, help="runs made visible in one commit (2000)")
    ap.add_argument("--gap", type=float, default=0.02, help="seconds between idle runs")
    ap.add_argument("--warmup", type=int, default=20, help="unmeasured runs first")
    ap.add_argument("--in-flight", type=int, default=500, help="runs held at once for RSS")
    ap.add_argument(
        "--repeat",
        type=int,
        default=5,
        help="idle rounds per system, alternating; goals use the median ratio",
    )
    args = ap.parse_args(argv)
    args.idle = args.idle or (100 if args.quick else 300)
    args.burst = args.burst or (500 if args.quick else 2000)
    return args


def _line(name: str, s: dict) -> str:
    return (
        f"  {name:<24} p50 {s['p50_ms']:>8.2f}  p90 {s['p90_ms']:>8.2f}  "
        f"p99 {s['p99_ms']:>8.2f}  max {s['max_ms']:>8.2f} ms  (n={s['n']})"
    )


def main(argv=None) -> list[str]:
    args = parse(argv)
    started = time.monotonic()
    with _common.cluster() as pg:
        runlane_template(pg)
        rounds = []
        for r in range(max(args.repeat, 1)):
            burst = args.burst if r == 0 else 0  # the burst once, in the first round
            ours = runlane_latency(pg, args.idle, burst, args.warmup, args.gap)
            theirs = procrastinate_latency(pg, args.idle, burst, args.warmup, args.gap)
            rounds.append(
                {
                    "runlane": ours,
                    "procrastinate": theirs,
                    "ratios": {
                        k: round(ours["idle"][k] / theirs["idle"][k], 2)
                        for k in ("p50_ms", "p99_ms")
                    },
                }
            )
            print(f"  round {r + 1}: " + _line("runlane idle", ours["idle"]).strip(), flush=True)
            print(
                f"  round {r + 1}: " + _line("procrastinate idle", theirs["idle"]).strip(),
                flush=True,
            )
        memory = runlane_rss_in_flight(pg, args.in_flight)
        info = _common.machine(pg)
    info["procrastinate"] = _version("procrastinate")
    ratios = {
        k: round(statistics.median(r["ratios"][k] for r in rounds), 2) for k in ("p50_ms", "p99_ms")
    }
    ours, theirs = rounds[0]["runlane"], rounds[0]["procrastinate"]
    path = _common.write_result(
        "runner_latency",
        {
            "machine": info,
            "args": vars(args),
            "rounds": rounds,
            "memory": memory,
            "idle_ratios": ratios,
            "goals": {"p50_ratio_max": P50_GOAL, "p99_ratio_max": P99_GOAL},
        },
    )
    p50_ok = "meets" if ratios["p50_ms"] <= P50_GOAL else "MISSES"
    p99_ok = "meets" if ratios["p99_ms"] <= P99_GOAL else "MISSES"
    summary = [
        f"publish -> start latency, one worker each, {info['cores']} cores, "
        f"PostgreSQL {info['postgres']}, procrastinate {info['procrastinate']}:",
        _line(f"runlane idle ({args.gap * 1000:.0f} ms gap), round 1", ours["idle"]),
        _line("procrastinate idle, round 1", theirs["idle"]),
        _line(f"runlane burst {args.burst}", ours["burst"]),
        _line(f"procrastinate burst {args.burst}", theirs["burst"]),
        "  idle p50 ratio per round: "
        + ", ".join(f"{r['ratios']['p50_ms']:.2f}x" for r in rounds)
        + "; p99: "
        + ", ".join(f"{r['ratios']['p99_ms']:.2f}x" for r in rounds),
        f"  median idle ratio runlane/procrastinate over {len(rounds)} rounds: "
        f"p50 {ratios['p50_ms']:.2f}x "
        f"(goal <= {P50_GOAL}x: {p50_ok}), p99 {ratios['p99_ms']:.2f}x "
        f"(goal <= {P99_GOAL:.1f}x: {p99_ok})",
        f"  runlane worker RSS: idle {ours['rss_idle_kib'] / 1024:.1f} MiB "
        f"(after the latency runs {ours['rss_idle_after_runs_kib'] / 1024:.1f} MiB); "
        f"{memory['running']} runs in flight {memory['rss_in_flight_kib'] / 1024:.1f} MiB "
        f"(that worker idle {memory['rss_idle_kib'] / 1024:.1f} MiB)",
        f"  ({time.monotonic() - started:.0f} s; {path})",
    ]
    print("\n".join(summary))
    return summary


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


if __name__ == "__main__":
    main()
