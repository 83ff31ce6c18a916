"""What the gates at claim time cost: p50 of claim_runs(p_limit => 10).

A claim checks the start gates for every background run it would start: the agent row
(switched on, not locked, a model) with the lock, and, for organizations that set
agent_weekly_budget, the owner's weekly_spend once per owner. Two databases cloned from
one template get the SAME queued runs (bench/_common.seed_queued_runs: half background
manual runs, one per agent, half interactive, 100 organizations); in one of them every
organization sets a weekly budget that is never reached. Each call is timed at the client
in a transaction that is rolled back (every call sees the same queue), calls alternating
between the databases so load from elsewhere on the machine hits both alike, for the
background lane, both lanes and the interactive lane (which no gate concerns).

    python -m bench claim_gates [--quick] [--runs N] [--calls N]
"""

from __future__ import annotations

import argparse
import time

import psycopg

from bench import _common

ORGS = 100
LIMIT = 10
TEMPLATE = "bench_gates_template"
LANES = (["background"], ["interactive", "background"], ["interactive"])


def prepare(pg, runs: int) -> dict[str, str]:
    template = _common.migrated_database(pg, TEMPLATE)
    with psycopg.connect(template, autocommit=True) as conn:
        _common.seed_agents(conn, agents=(runs + 1) // 2, orgs=ORGS)
        _common.seed_queued_runs(conn, runs, orgs=ORGS)
    dsns = {}
    for case, budget in (("no budget", None), ("budget", 1_000_000)):
        name = "bench_gates_" + case.replace(" ", "_")
        dsns[case] = _common.create_database(pg, name, template=TEMPLATE)
        with psycopg.connect(dsns[case], autocommit=True) as conn:
            conn.execute("update runlane.platform_settings set agent_weekly_budget = %s", (budget,))
        _common.vacuum_analyze(dsns[case])
    return dsns


def claim_ms(conn: psycopg.Connection, lanes: list[str]) -> float:
    started = time.perf_counter()
    rows = conn.execute(
        "select * from runlane.claim_runs('bench-worker', %s, %s)", (lanes, LIMIT)
    ).fetchall()
    elapsed = time.perf_counter() - started
    conn.rollback()
    if len(rows) != LIMIT:
        raise RuntimeError(f"claim_runs returned {len(rows)} runs, expected {LIMIT}")
    return elapsed * 1000


def main(argv=None) -> list[str]:
    ap = argparse.ArgumentParser(
        prog="python -m bench claim_gates", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--quick", action="store_true", help="fewer calls (200 instead of 600)")
    ap.add_argument("--runs", type=int, default=20_000, help="queued runs (20000)")
    ap.add_argument("--calls", type=int, help="measured calls per database and lanes")
    args = ap.parse_args(argv)
    calls = args.calls or (200 if args.quick else 600)
    started = time.monotonic()
    results = []
    with _common.cluster() as pg:
        dsns = prepare(pg, args.runs)
        conns = {case: psycopg.connect(dsn) for case, dsn in dsns.items()}
        try:
            for lanes in LANES:
                samples: dict[str, list[float]] = {case: [] for case in conns}
                for i in range(calls + 20):  # 20 warm-up calls each (plans cached)
                    order = list(conns) if i % 2 else list(reversed(conns))
                    for case in order:
                        ms = claim_ms(conns[case], lanes)
                        if i >= 20:
                            samples[case].append(ms)
                for case, values in samples.items():
                    results.append(
                        {
                            "lanes": lanes,
                            "case": case,
                            "calls": calls,
                            "p50_ms": round(_common.percentile(values, 0.5), 3),
                            "p90_ms": round(_common.percentile(values, 0.9), 3),
                        }
                    )
        finally:
            for conn in conns.values():
                conn.close()
        info = _common.machine(pg)
    path = _common.write_result("claim_gates", {"machine": info, "results": results})
    summary = [
        f"claim latency with the gates, claim_runs(p_limit => {LIMIT}), "
        f"{args.runs:,} queued runs, {calls} calls each:"
    ]
    for r in results:
        summary.append(
            f"  {' + '.join(r['lanes']):<24} {r['case']:<10}: "
            f"p50 {r['p50_ms']:.3f} ms, p90 {r['p90_ms']:.3f} ms"
        )
    summary.append(f"  ({time.monotonic() - started:.0f} s; {path})")
    print("\n".join(summary))
    return summary


if __name__ == "__main__":
    main()
