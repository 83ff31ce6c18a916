"""Claim+finish throughput of no-op runs with 1, 2 and 4 worker processes, in runs/s.

Each worker process loops `runlane.claim_runs(p_worker, p_lanes => background and
interactive, p_limit => BATCH)` and then `runlane.finish_run(run_id, fence, 'succeeded')`
for every run it got, on one autocommit connection, until a claim comes back empty.
Every process count gets a fresh database cloned from one migrated template, seeded with
the same queued runs (half background manual runs, one per agent, half interactive runs,
each on its own thread; 100 organizations whose cap never binds), then VACUUM ANALYZE.
With --weekly-budget X every organization sets agent_weekly_budget = X (never reached:
nothing is charged), so every background claim also pays the budget gate
(weekly_spend once per owner of the locked background runs).
Each process first does WARMUP runs (not measured); the clock runs from the barrier that
releases all processes to the last process seeing an empty queue.

    python -m bench claim_throughput [--quick] [--runs N] [--batch N] [--processes 1,2,4]
                                     [--weekly-budget X]
"""

from __future__ import annotations

import argparse
import multiprocessing
import time

import psycopg

from bench import _common

ORGS = 100
TEMPLATE = "bench_runlane_template"


def prepare_template(pg, runs: int, weekly_budget: float | None = None) -> None:
    """A migrated database with enough organizations and agents for `runs` queued runs."""
    dsn = _common.migrated_database(pg, TEMPLATE)
    with psycopg.connect(dsn, autocommit=True) as conn:
        _common.seed_agents(conn, agents=(runs + 1) // 2, orgs=ORGS)
        if weekly_budget is not None:
            conn.execute(
                "update runlane.platform_settings set agent_weekly_budget = %s", (weekly_budget,)
            )


def measure(pg, processes: int, runs: int, batch: int, warmup: int) -> dict:
    """Throughput of `processes` worker processes over `runs` measured runs."""
    name = f"bench_runlane_p{processes}"
    dsn = _common.create_database(pg, name, template=TEMPLATE)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            _common.seed_queued_runs(conn, runs + processes * warmup, orgs=ORGS)
        _common.vacuum_analyze(dsn)
        ctx = multiprocessing.get_context("spawn")
        barrier = ctx.Barrier(processes)
        results = ctx.Queue()
        workers = [
            ctx.Process(
                target=_common.runlane_worker, args=(dsn, batch, warmup, barrier, results, i)
            )
            for i in range(processes)
        ]
        for w in workers:
            w.start()
        done, elapsed = _common.collect(workers, results, processes)
        with psycopg.connect(dsn) as conn:
            left = conn.execute(
                "select count(*) from runlane.runs where state <> 'succeeded'"
            ).fetchone()[0]
        if left:
            raise RuntimeError(f"{left} runs were not finished as succeeded")
    finally:
        _common.drop_database(pg, name)
    return {
        "processes": processes,
        "batch": batch,
        "runs": done,
        "seconds": round(elapsed, 3),
        "runs_per_s": round(done / elapsed, 1),
    }


def parse(argv):
    ap = argparse.ArgumentParser(
        prog="python -m bench claim_throughput", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--quick", action="store_true", help="4,000 runs instead of 20,000")
    ap.add_argument("--runs", type=int, help="measured runs per process count (20000)")
    ap.add_argument("--batch", type=int, default=10, help="p_limit of each claim (10)")
    ap.add_argument("--warmup", type=int, default=200, help="unmeasured runs per process")
    ap.add_argument("--processes", default="1,2,4", help="comma-separated (1,2,4)")
    ap.add_argument(
        "--weekly-budget",
        type=float,
        help="agent_weekly_budget of every organization (default: none)",
    )
    args = ap.parse_args(argv)
    args.runs = args.runs or (4_000 if args.quick else 20_000)
    args.processes = [int(p) for p in args.processes.split(",")]
    return args


def main(argv=None) -> list[str]:
    args = parse(argv)
    rows = []
    started = time.monotonic()
    with _common.cluster() as pg:
        prepare_template(pg, args.runs + max(args.processes) * args.warmup, args.weekly_budget)
        for p in args.processes:
            row = measure(pg, p, args.runs, args.batch, args.warmup)
            rows.append(row)
            print(
                f"  runlane  {p} process(es), batch {args.batch}: "
                f"{row['runs']} runs in {row['seconds']:.2f} s = {row['runs_per_s']:,.0f} runs/s",
                flush=True,
            )
        info = _common.machine(pg)
    path = _common.write_result("claim_throughput", {"machine": info, "results": rows})
    budget = (
        ""
        if args.weekly_budget is None
        else f", weekly budget {args.weekly_budget:g} in every organization"
    )
    summary = [
        f"claim+finish throughput, no-op runs, batch {args.batch}, "
        f"{args.runs} runs{budget}, {info['cores']} cores, PostgreSQL {info['postgres']}:"
    ]
    summary += [f"  {r['processes']} process(es): {r['runs_per_s']:>8,.0f} runs/s" for r in rows]
    summary.append(f"  ({time.monotonic() - started:.0f} s; {path})")
    print("\n".join(summary))
    return summary


if __name__ == "__main__":
    main()
