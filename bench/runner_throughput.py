"""Echo-agent runs completed per second by 1, 2 and 4 real `runlane worker` processes,
against procrastinate's no-op jobs with the same process counts, same cluster, same run.

runlane: for each process count a fresh database (cloned from a migrated template with
one organization whose cap never binds and 20 agents); WARMUP runs per process are
committed (unpublished), then the worker processes start (`python -m runlane worker
--lane interactive --agent runlane.agents.echo:agent --no-maintenance`, echo with
RUNLANE_ECHO_CHUNKS=1, RUNLANE_ECHO_DELAY=0, default --pool-size 10 / --claim-batch 10),
their startup passes run the warm-up. When every worker is ready and every warm-up run
has succeeded, RUNS interactive runs (each on its own thread) are submitted and published
in ONE transaction; the clock runs from that commit (client time.time()) to the last
`finished_at` (same machine clock). Process start-up is outside the clock.

procrastinate: exactly bench/procrastinate_compare.py's measurement (imported): an async
no-op task, jobs deferred up front, WARMUP jobs per process on a separate queue first,
each process `App.run_worker_async(concurrency=10)` on a 10-connection pool.

Goal: runlane at least 3x procrastinate's completed runs/s with 2 and with 4 processes.

    python -m bench.runner_throughput [--quick] [--runs N] [--processes 1,2,4]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import psycopg

from bench import _common, procrastinate_compare
from bench.runner_latency import (
    POOL,
    TEMPLATE,
    Worker,
    _version,
    apply_procrastinate_schema,
    runlane_template,
    submit_burst,
)

GOAL = 3.0


def measure_runlane(pg, processes: int, runs: int, warmup: int) -> dict:
    name = f"bench_runner_p{processes}"
    dsn = _common.create_database(pg, name, template=TEMPLATE)
    workers: list[Worker] = []
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            warm = submit_burst(conn, warmup * processes, publish=False)
            _common.vacuum_analyze(dsn)
            workers = [Worker(dsn) for _ in range(processes)]
            for w in workers:
                w.wait_ready()
            _wait_succeeded(conn, warm)
            warm_starts = [len(w.events("run.execution_started")) for w in workers]
            ids = submit_burst(conn, runs)
            origin = time.time()
            last = _wait_succeeded(conn, ids)
        per_worker = [
            len(w.events("run.execution_started")) - s
            for w, s in zip(workers, warm_starts, strict=True)
        ]
    finally:
        for w in workers:
            w.stop()
        _common.drop_database(pg, name)
    elapsed = last - origin
    return {
        "processes": processes,
        "runs": runs,
        "seconds": round(elapsed, 3),
        "runs_per_s": round(runs / elapsed, 1),
        "runs_per_worker": per_worker,
    }


def _wait_succeeded(conn: psycopg.Connection, ids: list[int], timeout: float = 900) -> float:
    """Waits until every run succeeded; returns the last finished_at (epoch seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        states, last = conn.execute(
            """
            select jsonb_object_agg(state, n), max(last)
            from (select state, count(*) as n, extract(epoch from max(finished_at))::float8 as last
                  from runlane.runs where run_id = any(%s) group by state) as s
            """,
            (ids,),
        ).fetchone()
        if states == {"succeeded": len(ids)}:
            return last
        if set(states) - {"queued", "running", "succeeded"}:
            raise RuntimeError(f"runs ended otherwise: {states}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"runs not all succeeded after {timeout} s: {states}")
        time.sleep(0.05)


def parse(argv):
    ap = argparse.ArgumentParser(
        prog="python -m bench.runner_throughput", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--quick", action="store_true", help="2,000 runs instead of 5,000")
    ap.add_argument("--runs", type=int, help="measured runs/jobs per process count (5000)")
    # 500, not a token few: each worker connection caches its query plans during warm-up,
    # and plans made on near-empty tables scan them whole for the rest of the run, which
    # no long-lived installation sees. Both systems get the same warm-up.
    ap.add_argument("--warmup", type=int, default=500, help="unmeasured units per process")
    ap.add_argument("--processes", default="1,2,4", help="comma-separated (1,2,4)")
    args = ap.parse_args(argv)
    args.runs = args.runs or (2_000 if args.quick else 5_000)
    args.processes = [int(p) for p in args.processes.split(",")]
    return args


def main(argv=None) -> list[str]:
    args = parse(argv)
    started = time.monotonic()
    rows = []
    with _common.cluster() as pg:
        runlane_template(pg)
        asyncio.run(
            apply_procrastinate_schema(_common.create_database(pg, procrastinate_compare.TEMPLATE))
        )
        for p in args.processes:
            ours = measure_runlane(pg, p, args.runs, args.warmup)
            print(
                f"  runlane        {p} process(es): {ours['runs_per_s']:>8,.0f} runs/s "
                f"(runs per worker {ours['runs_per_worker']})",
                flush=True,
            )
            theirs = procrastinate_compare.measure_procrastinate(
                pg, p, jobs=args.runs, concurrency=POOL, warmup=args.warmup, pool=POOL
            )
            print(
                f"  procrastinate  {p} process(es): {theirs['jobs_per_s']:>8,.0f} jobs/s",
                flush=True,
            )
            rows.append(
                {
                    "processes": p,
                    "runlane": ours,
                    "procrastinate": theirs,
                    "ratio": round(ours["runs_per_s"] / theirs["jobs_per_s"], 2),
                }
            )
        info = _common.machine(pg)
    info["procrastinate"] = _version("procrastinate")
    path = _common.write_result(
        "runner_throughput", {"machine": info, "args": vars(args), "results": rows, "goal": GOAL}
    )
    summary = [
        f"completed runs/s, echo agent (1 chunk, no delay) vs procrastinate no-op, "
        f"{args.runs} per process count, concurrency/pool {POOL} per process, "
        f"{info['cores']} cores, procrastinate {info['procrastinate']}:",
        "  processes   runlane runs/s   procrastinate jobs/s   ratio",
    ]
    for r in rows:
        verdict = "meets" if r["ratio"] >= GOAL else "MISSES"
        goal = f"(goal >= {GOAL:.0f}x: {verdict})" if r["processes"] >= 2 else ""
        summary.append(
            f"  {r['processes']:>9}   {r['runlane']['runs_per_s']:>14,.0f}   "
            f"{r['procrastinate']['jobs_per_s']:>20,.0f}   {r['ratio']:>5.2f}x {goal}"
        )
    summary.append(f"  ({time.monotonic() - started:.0f} s; {path})")
    print("\n".join(summary))
    return summary


if __name__ == "__main__":
    main()
