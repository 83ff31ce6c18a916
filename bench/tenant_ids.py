"""Does a scoped login learn from time that an id is another organization's?

A login limited to organization A (runlane.scope_api_login) calls runlane_api functions
on run ids of organization B (they exist) and on run ids nobody has (taken from the run
sequence between B's runs, so both kinds sit on the same index pages); both are refused
alike (RL008, the same message). This measures whether they also take the same time: the
calls alternate foreign, unknown, unknown, foreign, ... on one connection (so a slow
moment of the machine hits both alike), each id used once per function, and the medians
and their difference are printed per function. Timed at the client, round trip included.

    python -m bench tenant_ids [--quick] [--calls N]
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg
from psycopg.conninfo import make_conninfo

from bench import _common

LOGIN = "bench_tenant_a"
CALLS = {
    "run_status": "select * from runlane.run_status(%s)",
    "outputs_since": "select * from runlane.outputs_since(%s)",
    "stream_token": "select runlane.stream_token(%s)",
    "cancel_run": "select runlane.cancel_run(%s)",
    "run_timing": "select runlane.run_timing(%s)",
}


def prepare(pg, runs: int) -> tuple[str, list[int], list[int]]:
    dsn = _common.migrated_database(pg, "bench_tenant_ids")
    with psycopg.connect(dsn, autocommit=True) as conn:
        for org in ("org-a", "org-b"):
            conn.execute("select runlane.put_org(%s)", (org,))
            conn.execute("select runlane.put_user(%s, %s)", (f"owner-{org}", org))
            conn.execute(
                "select runlane.put_agent(%s, jsonb_build_object('org_id', %s::text, "
                "'owner_id', %s::text, 'model', 'm'))",
                (f"agent-{org}", org, f"owner-{org}"),
            )
        # one id taken from the run sequence (never used) after each run of org-b: the
        # unknown ids lie between the foreign ones, on the same index pages
        seq = conn.execute("select pg_get_serial_sequence('runlane.runs', 'run_id')").fetchone()[0]
        foreign, unknown = [], []
        for i in range(runs):
            foreign.append(
                conn.execute(
                    "select run_id from runlane.submit_message('agent-org-b', %s, 'hi')",
                    (f"t-{i}",),
                ).fetchone()[0]
            )
            unknown.append(conn.execute("select nextval(%s)", (seq,)).fetchone()[0])
        conn.execute(f'create role "{LOGIN}" login in role runlane_api')
        conn.execute("select runlane.scope_api_login(%s, 'org-a')", (LOGIN,))
    _common.vacuum_analyze(dsn)
    return make_conninfo(dsn, user=LOGIN), foreign, unknown


def refused_us(conn: psycopg.Connection, sql: str, run_id: int) -> float:
    started = time.perf_counter_ns()
    try:
        conn.execute(sql, (run_id,))
    except psycopg.Error as exc:
        elapsed = time.perf_counter_ns() - started
        if exc.sqlstate != "RL008":
            raise
        return elapsed / 1000
    raise RuntimeError(f"{sql} answered run {run_id} to a login scoped to org-a")


def main(argv=None) -> list[str]:
    ap = argparse.ArgumentParser(
        prog="python -m bench tenant_ids", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--quick", action="store_true", help="200 calls each instead of 2000")
    ap.add_argument("--calls", type=int, help="calls per function and kind of id (2000)")
    args = ap.parse_args(argv)
    calls = args.calls or (200 if args.quick else 2000)
    started = time.monotonic()
    results = []
    with _common.cluster() as pg:
        dsn, foreign, unknown = prepare(pg, calls)
        with psycopg.connect(dsn, autocommit=True) as conn:
            for name, sql in CALLS.items():
                samples: dict[str, list[float]] = {"foreign": [], "unknown": []}
                for i in range(50):  # warm-up: plans and caches of both paths
                    refused_us(conn, sql, foreign[i])
                    refused_us(conn, sql, unknown[i])
                for i in range(calls):
                    pair = [("foreign", foreign[i]), ("unknown", unknown[i])]
                    for kind, run_id in pair if i % 2 else pair[::-1]:
                        samples[kind].append(refused_us(conn, sql, run_id))
                f, u = (statistics.median(samples[k]) for k in ("foreign", "unknown"))
                diffs = [a - b for a, b in zip(samples["foreign"], samples["unknown"], strict=True)]
                results.append(
                    {
                        "function": name,
                        "calls": calls,
                        "foreign_median_us": round(f, 1),
                        "unknown_median_us": round(u, 1),
                        "median_pair_difference_us": round(statistics.median(diffs), 1),
                    }
                )
        info = _common.machine(pg)
    path = _common.write_result("tenant_ids", {"machine": info, "results": results})
    summary = [
        f"a login scoped to org-a, refused (RL008) on org-b's run ids and on unknown "
        f"ones, {calls} calls each, interleaved (client round trip, median us):"
    ]
    for r in results:
        summary.append(
            f"  {r['function']:<14} foreign {r['foreign_median_us']:7.1f}  "
            f"unknown {r['unknown_median_us']:7.1f}  "
            f"pairwise {r['median_pair_difference_us']:+6.1f}"
        )
    summary.append(f"  ({time.monotonic() - started:.0f} s; {path})")
    print("\n".join(summary))
    return summary


if __name__ == "__main__":
    main()
