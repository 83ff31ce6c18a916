"""Claim latency with 100,000 queued runs over 1,000 organizations vs all in one.

Goal: the p50 of the spread case within 2x of the one-organization case — fair claim order
(round robin across organizations) costs one index descent per organization with
queued runs, never a pass over the queued rows.

Three databases cloned from one migrated template get the SAME 100,000 queued runs (half
background manual runs, one per agent, half interactive runs, each on its own thread; see
bench/_common.seed_queued_runs): 50,000 agents all in one organization; the same spread
over 1,000 organizations whose cap never binds; and a skewed spread where one organization
owns half the runs, all older than everyone else's (claims then take the loose scan over
every organization, the fallback's cost). Then VACUUM ANALYZE. One call is
`runlane.claim_runs(p_limit => 10)` (the worker's default batch) over both lanes, and one
over the interactive lane alone (what an interactive worker pool does), timed at the
client, in a transaction that is rolled back so every call sees the same queue. Calls
alternate between the databases in rounds, so load from elsewhere on the machine hits all
alike. --explain prints the statements inside one claim of each.

Then, with --burst N (or --burst-only), what one organization's chat burst does to
another's first response on ONE real worker: organization org1 commits
N chat runs at once (each on its own thread; the echo agent writes ECHO_CHUNKS chunks,
waiting ECHO_DELAY s before each), and while the worker works through them organization
org2 sends TRICKLE messages, one every TRICKLE_GAP s (submit_message, publish_run). Each
trickle run's first response (first_response_at - the message's created_at) is measured
with the worker's --max-per-org 0 (no bound: it takes the whole burst at once), with the
default bound (work-conserving: the burst's organization is alone when it arrives) and
with the default bound made strict, on fresh databases, alternating, REPEAT times each.

    python -m bench claim_fairness [--quick] [--runs N] [--orgs N] [--calls N] [--explain]
                                   [--burst N] [--burst-only]
"""

from __future__ import annotations

import argparse
import re
import statistics
import time
import uuid

import psycopg

from bench import _common
from runlane.worker.config import WorkerConfig

LIMIT = 10
GOAL = 2.0
TEMPLATE = "bench_fairness_template"

CLAIM = """
select c.run_id, c.org_id
from runlane.claim_runs(
    p_worker => 'bench-fairness'::text, p_lanes => %(lanes)s::text[], p_limit => %(limit)s::int
) as c
"""
# The burst-vs-trickle part: one real worker, echo agent.
BURST_TEMPLATE = "bench_fairness_burst_template"
ECHO_CHUNKS, ECHO_DELAY = 3, 0.2
TRICKLE, TRICKLE_GAP, REPEAT = 20, 0.1, 2
DEFAULT_BOUND = str(WorkerConfig.max_per_org)
BOUNDS = {
    "no bound (--max-per-org 0)": ["--max-per-org", "0"],
    f"default bound (--max-per-org {DEFAULT_BOUND})": ["--max-per-org", DEFAULT_BOUND],
    "strict bound (--max-per-org-strict)": ["--max-per-org", DEFAULT_BOUND, "--max-per-org-strict"],
}

LANES = {"both lanes": ["interactive", "background"], "interactive lane": ["interactive"]}

AUTO_EXPLAIN = [
    "load 'auto_explain'",
    "set auto_explain.log_min_duration = 0",
    "set auto_explain.log_analyze = on",
    "set auto_explain.log_buffers = on",
    "set auto_explain.log_nested_statements = on",
    "set auto_explain.log_level = 'notice'",
]
_DURATION = re.compile(r"duration: ([0-9.]+) ms")


def build(pg, name: str, runs: int, orgs: int, skewed: bool = False) -> str:
    dsn = _common.create_database(pg, name, template=TEMPLATE)
    with psycopg.connect(dsn, autocommit=True) as conn:
        _common.seed_agents(conn, agents=(runs + 1) // 2, orgs=orgs)
        _common.seed_queued_runs(conn, runs, orgs=orgs)
        if skewed:
            # Half the runs (both lanes) move to org1 and become the oldest (negative ids
            # sort first): the oldest part of the queue is one busy organization's, so
            # every claim takes the loose scan over all organizations.
            conn.execute(
                "update runlane.runs set org_id = 'org1', run_id = -run_id "
                "where (run_id + 1) / 2 % 2 = 0"
            )
    _common.vacuum_analyze(dsn)
    return dsn


def one_claim(conn: psycopg.Connection, lanes: list[str]) -> tuple[float, int]:
    """(seconds, distinct organizations) of one claim_runs call; the claim is rolled back."""
    t0 = time.perf_counter()
    rows = conn.execute(CLAIM, {"lanes": lanes, "limit": LIMIT}).fetchall()
    elapsed = time.perf_counter() - t0
    conn.rollback()
    if len(rows) != LIMIT:
        raise RuntimeError(f"claim_runs returned {len(rows)} runs, expected {LIMIT}")
    return elapsed, len({org for _, org in rows})


def explain(dsn: str, lanes: list[str]) -> list[str]:
    """The statements inside one claim_runs call, slowest first, with their plans' times."""
    notices: list[str] = []
    with psycopg.connect(dsn) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary))
        for stmt in AUTO_EXPLAIN:
            conn.execute(stmt)
        conn.commit()
        conn.execute(CLAIM, {"lanes": lanes, "limit": LIMIT}).fetchall()
        conn.rollback()
    found = []
    for text in notices:
        match = _DURATION.search(text)
        if match:
            query = " ".join(text.split("Query Text:", 1)[-1].split())
            found.append((float(match[1]), query))
    return [f"      {ms:8.3f} ms  {q[:100]}" for ms, q in sorted(found, key=lambda f: -f[0])[:6]]


def burst_case(pg, burst: int, bound: list[str]) -> list[float]:
    """First responses (ms) of org2's trickle while one worker serves org1's burst."""
    from bench.runner_latency import Worker  # a real `runlane worker` process

    name = f"bench_fairness_burst_{uuid.uuid4().hex[:6]}"
    dsn = _common.create_database(pg, name, template=BURST_TEMPLATE)
    worker = Worker(dsn, ECHO_CHUNKS, ECHO_DELAY, *bound)
    try:
        worker.wait_ready()
        with psycopg.connect(dsn, autocommit=True) as conn:
            tag = uuid.uuid4().hex
            with conn.transaction():
                ids = [
                    r[0]
                    for r in conn.execute(
                        """select s.run_id from generate_series(1, %(n)s::int) as g,
                       lateral runlane.submit_message('agent1', %(tag)s || g, 'burst') as s""",
                        {"n": burst, "tag": tag},
                    ).fetchall()
                ]
                conn.execute("select runlane.publish_run(r) from unnest(%s::bigint[]) as r", (ids,))
            trickle = []
            for i in range(TRICKLE):
                time.sleep(TRICKLE_GAP)
                run_id = conn.execute(
                    "select run_id from runlane.submit_message('agent2', %s, 'hello')",
                    (f"{tag}-t{i}",),
                ).fetchone()[0]
                conn.execute("select runlane.publish_run(%s)", (run_id,))
                trickle.append(run_id)
            deadline = time.monotonic() + 600
            while True:
                rows = conn.execute(
                    """select extract(epoch from r.first_response_at - m.created_at) * 1000
                       from runlane.runs as r
                       join runlane.messages as m on m.message_id = r.source_message_id
                       where r.run_id = any(%s) and r.first_response_at is not null""",
                    (trickle,),
                ).fetchall()
                if len(rows) == len(trickle):
                    return [float(r[0]) for r in rows]
                if time.monotonic() > deadline:
                    raise RuntimeError("trickle runs got no first response in 600 s")
                time.sleep(0.2)
    finally:
        worker.stop()
        _common.drop_database(pg, name)


def burst_part(pg, burst: int) -> tuple[list[dict], list[str]]:
    dsn = _common.migrated_database(pg, BURST_TEMPLATE)
    with psycopg.connect(dsn, autocommit=True) as conn:
        _common.seed_agents(conn, agents=2, orgs=2)  # agent1 in org2, agent2 in org1
    samples: dict[str, list[float]] = {label: [] for label in BOUNDS}
    for _ in range(REPEAT):
        for label, bound in BOUNDS.items():
            samples[label] += burst_case(pg, burst, bound)
    results, summary = (
        [],
        [
            f"one worker, {burst:,} chat runs of one organization at once (echo: {ECHO_CHUNKS} "
            f"chunks, {ECHO_DELAY} s before each), another organization's first response over "
            f"{TRICKLE} x {REPEAT} messages:"
        ],
    )
    for label, ms in samples.items():
        row = {
            "case": label,
            "burst": burst,
            "trickle_runs": len(ms),
            "first_response_p50_ms": round(statistics.median(ms), 1),
            "first_response_p99_ms": round(_common.percentile(ms, 0.99), 1),
            "first_response_max_ms": round(max(ms), 1),
        }
        results.append(row)
        summary.append(
            f"  {label:<36}: p50 {row['first_response_p50_ms']:8.1f} ms, "
            f"p99 {row['first_response_p99_ms']:8.1f} ms, "
            f"max {row['first_response_max_ms']:8.1f} ms"
        )
    return results, summary


def parse(argv):
    ap = argparse.ArgumentParser(
        prog="python -m bench claim_fairness", description=__doc__.splitlines()[0]
    )
    ap.add_argument("--quick", action="store_true", help="fewer calls (200 instead of 600)")
    ap.add_argument("--runs", type=int, default=100_000, help="queued runs (100000)")
    ap.add_argument("--orgs", type=int, default=1_000, help="organizations, spread case (1000)")
    ap.add_argument("--calls", type=int, help="measured calls per database and lanes (600)")
    ap.add_argument("--explain", action="store_true", help="statements inside one claim")
    ap.add_argument(
        "--burst",
        type=int,
        default=0,
        help="also one organization's burst of N chat runs vs another's trickle, "
        "on a real worker with and without --max-per-org (e.g. 3000)",
    )
    ap.add_argument(
        "--burst-only", action="store_true", help="only the burst part (--burst defaults to 3000)"
    )
    args = ap.parse_args(argv)
    if args.burst_only and not args.burst:
        args.burst = 3000
    args.calls = args.calls or (200 if args.quick else 600)
    return args


def main(argv=None) -> list[str]:
    args = parse(argv)
    started = time.monotonic()
    if args.burst_only:
        with _common.cluster() as pg:
            results, summary = burst_part(pg, args.burst)
            info = _common.machine(pg)
        path = _common.write_result("claim_fairness_burst", {"machine": info, "results": results})
        summary.append(f"  ({time.monotonic() - started:.0f} s; {path})")
        print("\n".join(summary))
        return summary
    cases = {
        "one organization": (1, False),
        f"{args.orgs:,} organizations": (args.orgs, False),
        f"{args.orgs:,} skewed": (args.orgs, True),
    }
    with _common.cluster() as pg:
        _common.migrated_database(pg, TEMPLATE)
        t0 = time.monotonic()
        dsns = {
            label: build(pg, f"bench_fairness_{i}", args.runs, orgs, skewed)
            for i, (label, (orgs, skewed)) in enumerate(cases.items())
        }
        print(
            f"  {args.runs:,} queued runs loaded twice and vacuumed in "
            f"{time.monotonic() - t0:.1f} s",
            flush=True,
        )

        timings = {(c, lane): [] for c in cases for lane in LANES}
        spread = {}
        conns = {label: psycopg.connect(dsn) for label, dsn in dsns.items()}
        try:
            for conn in conns.values():  # warm-up: plans cached, buffers hot
                for lanes in LANES.values():
                    for _ in range(30):
                        one_claim(conn, lanes)
            rounds, per_round = 10, max(1, args.calls // 10)
            for _ in range(rounds):
                for label, conn in conns.items():
                    for lane, lanes in LANES.items():
                        for _ in range(per_round):
                            seconds, n_orgs = one_claim(conn, lanes)
                            timings[(label, lane)].append(seconds * 1000)
                            spread[(label, lane)] = n_orgs
        finally:
            for conn in conns.values():
                conn.close()

        one, many, skewed = cases
        results, summary = (
            [],
            [
                f"claim latency, claim_runs(p_limit => {LIMIT}), {args.runs:,} queued runs, "
                f"{args.calls} calls each:"
            ],
        )
        ratios = {}
        for lane in LANES:
            for label in cases:
                ms = timings[(label, lane)]
                row = {
                    "case": label,
                    "lanes": lane,
                    "calls": len(ms),
                    "p50_ms": round(_common.percentile(ms, 0.5), 3),
                    "p90_ms": round(_common.percentile(ms, 0.9), 3),
                    "organizations_per_claim": spread[(label, lane)],
                }
                results.append(row)
                summary.append(
                    f"  {lane:<16} {label:<18}: p50 {row['p50_ms']:.3f} ms, "
                    f"p90 {row['p90_ms']:.3f} ms "
                    f"({row['organizations_per_claim']} organization(s) per claim)"
                )
            p50 = {r["case"]: r["p50_ms"] for r in results if r["lanes"] == lane}
            ratios[lane] = round(p50[many] / p50[one], 3)
            verdict = "meets" if ratios[lane] <= GOAL else "MISSES"
            summary.append(
                f"  {lane:<16} ratio p50 {ratios[lane]:.2f} "
                f"(goal <= {GOAL}: {verdict}); skewed {p50[skewed] / p50[one]:.2f}"
            )
        if args.explain:
            for label, dsn in dsns.items():
                summary.append(f"  statements inside one claim over both lanes, {label}:")
                summary += explain(dsn, LANES["both lanes"])
        if args.burst:
            burst_results, burst_summary = burst_part(pg, args.burst)
            results += burst_results
            summary += burst_summary
        info = _common.machine(pg)
    path = _common.write_result(
        "claim_fairness", {"machine": info, "results": results, "ratio_p50": ratios, "goal": GOAL}
    )
    summary.append(f"  ({time.monotonic() - started:.0f} s; {path})")
    print("\n".join(summary))
    return summary


if __name__ == "__main__":
    main()
