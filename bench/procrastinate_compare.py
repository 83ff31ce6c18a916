"""runlane vs procrastinate: completed no-op work per second, side by side, same cluster.

Goal: runlane at least 3x procrastinate's throughput.

Both systems run in the same throwaway cluster (the same settings, bench/_common.py),
each in its own fresh database per process count, with 1, 2 and 4 worker processes,
measured alternately (runlane p=1, procrastinate p=1, runlane p=2, ...):

* runlane: exactly bench/claim_throughput.py — each process loops claim_runs(p_limit =>
  CONCURRENCY) and finish_run(…, 'succeeded') for each run, on one connection.
* procrastinate (from PyPI, the `bench` extra): its schema applied with its own API
  (`SchemaManager.apply_schema_async`, what `procrastinate schema --apply` runs), the
  jobs of an async no-op task deferred up front with `batch_defer_async`, and each process
  running `App.run_worker_async(concurrency=CONCURRENCY, wait=False)` on a
  PsycopgConnector pool of CONCURRENCY connections (so no job waits for a connection),
  default options otherwise (jobs are kept, as runlane keeps its runs).

The same number of jobs and runs is measured; each process first does WARMUP units that
are not measured (procrastinate: a separate `warmup` queue; its measured worker start —
worker registration, a LISTEN connection — is inside the clock). The clock runs from the
barrier that releases the processes to the last process finding nothing left.

    python -m bench procrastinate_compare [--quick] [--jobs N] [--concurrency N]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import time

import procrastinate
import psycopg

from bench import _common, claim_throughput

GOAL = 3.0
TEMPLATE = "bench_procrastinate_template"
BENCH_QUEUE = "bench"
WARMUP_QUEUE = "warmup"


async def noop() -> None:
    """The no-op job: all the cost is the queue's."""


def make_app(dsn: str, pool_size: int) -> procrastinate.App:
    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(
            conninfo=dsn, min_size=pool_size, max_size=pool_size
        )
    )
    app.task(name="bench_noop", queue=BENCH_QUEUE)(noop)
    return app


async def _prepare_template(dsn: str) -> None:
    app = make_app(dsn, 1)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()


async def _defer(dsn: str, jobs: int, warmup: int) -> None:
    app = make_app(dsn, 1)
    async with app.open_async():
        task = app.tasks["bench_noop"]
        if warmup:
            await task.configure(queue=WARMUP_QUEUE).batch_defer_async(*({} for _ in range(warmup)))
        await task.configure(queue=BENCH_QUEUE).batch_defer_async(*({} for _ in range(jobs)))


def procrastinate_worker(
    dsn: str, concurrency: int, pool: int, barrier, results, index: int
) -> None:
    """One procrastinate worker process; puts (index, started, ended, 0) on `results`."""

    async def run() -> tuple[float, float]:
        app = make_app(dsn, pool)
        options = {"concurrency": concurrency, "wait": False, "install_signal_handlers": False}
        async with app.open_async():
            await app.run_worker_async(queues=[WARMUP_QUEUE], **options)
            await asyncio.to_thread(barrier.wait)
            started = time.monotonic()
            await app.run_worker_async(queues=[BENCH_QUEUE], **options)
            return started, time.monotonic()

    started, ended = asyncio.run(run())
    results.put((index, started, ended, 0))


def measure_procrastinate(
    pg, processes: int, jobs: int, concurrency: int, warmup: int, pool: int
) -> dict:
    name = f"bench_procrastinate_p{processes}"
    dsn = _common.create_database(pg, name, template=TEMPLATE)
    try:
        asyncio.run(_defer(dsn, jobs, processes * warmup))
        _common.vacuum_analyze(dsn)
        ctx = multiprocessing.get_context("spawn")
        barrier = ctx.Barrier(processes)
        results = ctx.Queue()
        workers = [
            ctx.Process(
                target=procrastinate_worker, args=(dsn, concurrency, pool, barrier, results, i)
            )
            for i in range(processes)
        ]
        for w in workers:
            w.start()
        _, elapsed = _common.collect(workers, results, processes)
        with psycopg.connect(dsn) as conn:
            states = dict(
                conn.execute(
                    "select status::text, count(*) from procrastinate_jobs "
                    "where queue_name = %s group by 1",
                    (BENCH_QUEUE,),
                ).fetchall()
            )
    finally:
        _common.drop_database(pg, name)
    done = states.get("succeeded", 0)
    if done != jobs:
        raise RuntimeError(f"procrastinate finished {done} of {jobs} jobs: {states}")
    return {
        "processes": processes,
        "concurrency": concurrency,
        "pool": pool,
        "jobs": done,
        "seconds": round(elapsed, 3),
        "jobs_per_s": round(done / elapsed, 1),
    }


def parse(argv):
    ap = argparse.ArgumentParser(
        prog="python -m bench procrastinate_compare", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--quick", action="store_true", help="3,000 jobs instead of 10,000")
    ap.add_argument("--jobs", type=int, help="measured jobs/runs per process count (10000)")
    ap.add_argument(
        "--concurrency",
        type=int,
        default=10,
        help="runlane claim batch = procrastinate worker concurrency (10)",
    )
    ap.add_argument(
        "--pool", type=int, help="procrastinate connection pool per process (= concurrency)"
    )
    ap.add_argument("--warmup", type=int, default=200, help="unmeasured units per process")
    ap.add_argument("--processes", default="1,2,4", help="comma-separated (1,2,4)")
    args = ap.parse_args(argv)
    args.pool = args.pool or args.concurrency
    args.jobs = args.jobs or (3_000 if args.quick else 10_000)
    args.processes = [int(p) for p in args.processes.split(",")]
    return args


def main(argv=None) -> list[str]:
    args = parse(argv)
    started = time.monotonic()
    rows = []
    with _common.cluster() as pg:
        claim_throughput.prepare_template(pg, args.jobs + max(args.processes) * args.warmup)
        asyncio.run(_prepare_template(_common.create_database(pg, TEMPLATE)))
        for p in args.processes:
            ours = claim_throughput.measure(pg, p, args.jobs, args.concurrency, args.warmup)
            print(
                f"  runlane        {p} process(es): {ours['runs_per_s']:>8,.0f} runs/s", flush=True
            )
            theirs = measure_procrastinate(
                pg, p, args.jobs, args.concurrency, args.warmup, args.pool
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
    info["procrastinate"] = (
        procrastinate.__version__
        if hasattr(procrastinate, "__version__")
        else _version("procrastinate")
    )
    path = _common.write_result(
        "procrastinate_compare",
        {
            "machine": info,
            "concurrency": args.concurrency,
            "jobs": args.jobs,
            "results": rows,
            "goal": GOAL,
        },
    )
    summary = [
        f"no-op work per second, {args.jobs} jobs, concurrency {args.concurrency} per "
        f"process, procrastinate {info['procrastinate']}, {info['cores']} cores:",
        "  processes   runlane runs/s   procrastinate jobs/s   ratio",
    ]
    for r in rows:
        verdict = "meets" if r["ratio"] >= GOAL else "MISSES"
        summary.append(
            f"  {r['processes']:>9}   {r['runlane']['runs_per_s']:>14,.0f}   "
            f"{r['procrastinate']['jobs_per_s']:>20,.0f}   {r['ratio']:>5.2f}x "
            f"(goal >= {GOAL:.0f}x: {verdict})"
        )
    summary.append(f"  ({time.monotonic() - started:.0f} s; {path})")
    print("\n".join(summary))
    return summary


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


if __name__ == "__main__":
    # Spawned workers must find the task and the App under the module's real name.
    from bench.procrastinate_compare import main as _main

    _main()
