"""Claim latency with 10,000 and with 1,000,000 finished runs in runlane.runs.

Goal: the ratio of the two p50 latencies stays under 1.3 — claim cost follows runnable
rows, not history.

Two databases cloned from one migrated template (100 organizations, 1,000 agents) get
their history with one `insert … select generate_series` statement (finished runs of
every lane, trigger and terminal state, spread over 90 days), then the SAME queued runs
(half background, one per agent, half interactive), then VACUUM ANALYZE. One call is
`runlane.claim_runs(p_limit => 5)` over both lanes, timed at the client, in a transaction
that is rolled back, so every call sees the same queued rows. Calls alternate between the
two databases in rounds, so load from elsewhere on the machine hits both alike. With
--explain (or when the goal is missed) auto_explain records the plan of every statement
inside claim_runs for one call on each database (bench/results/claim_history_plans.txt).

    python -m bench claim_history [--quick] [--history N] [--calls N] [--explain]
"""

from __future__ import annotations

import argparse
import re
import time

import psycopg

from bench import _common

ORGS = 100
AGENTS = 1_000
QUEUED = 2_000
LIMIT = 5
GOAL = 1.3
TEMPLATE = "bench_history_template"

HISTORY = """
insert into runlane.runs (
    org_id, agent_id, lane, trigger, state, reason, thread_id, prompt, model,
    attempts, fence, created_at, first_started_at, finished_at
)
select
    'org' || (a %% %(orgs)s::int + 1),
    'agent' || a,
    case when g %% 3 = 0 then 'interactive' else 'background' end,
    case when g %% 3 = 0 then 'interactive'
         when g %% 3 = 1 then 'scheduled' else 'manual' end,
    case when g %% 20 = 0 then 'failed' when g %% 50 = 1 then 'canceled'
         when g %% 50 = 2 then 'skipped' else 'succeeded' end,
    case when g %% 20 = 0 then 'error' when g %% 50 = 2 then 'already_running' end,
    case when g %% 3 = 0 then 'thread' || (g %% 5000) end,
    'do nothing',
    'noop',
    1,
    1,
    t,
    t + interval '1 second',
    t + interval '5 seconds'
from generate_series(1, %(count)s::int) as g,
     lateral (select g %% %(agents)s::int + 1 as a,
                     now() - %(newest_age)s::interval
                         - (g %% %(spread_s)s::int) * interval '1 second' as t) as pick
"""

AUTO_EXPLAIN = [
    "load 'auto_explain'",
    "set auto_explain.log_min_duration = 0",
    "set auto_explain.log_analyze = on",
    "set auto_explain.log_buffers = on",
    "set auto_explain.log_nested_statements = on",
    "set auto_explain.log_level = 'notice'",
]
_DURATION = re.compile(r"duration: ([0-9.]+) ms")


def build(pg, name: str, history: int) -> str:
    dsn = _common.create_database(pg, name, template=TEMPLATE)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            HISTORY,
            {
                "count": history,
                "orgs": ORGS,
                "agents": AGENTS,
                "newest_age": "0",
                "spread_s": 7776000,
            },
        )  # 90 days
        _common.seed_queued_runs(conn, QUEUED, orgs=ORGS)
    _common.vacuum_analyze(dsn)
    return dsn


def one_claim(conn: psycopg.Connection) -> float:
    """Seconds for one claim_runs call; the claim is rolled back."""
    t0 = time.perf_counter()
    rows = conn.execute(_common.CLAIM, {"worker": "bench-history", "limit": LIMIT}).fetchall()
    elapsed = time.perf_counter() - t0
    conn.rollback()
    if len(rows) != LIMIT:
        raise RuntimeError(f"claim_runs returned {len(rows)} runs, expected {LIMIT}")
    return elapsed


def plans(dsn: str) -> list[tuple[float, str]]:
    """(duration ms, plan text) of every statement executed inside one claim_runs call."""
    notices: list[str] = []
    with psycopg.connect(dsn) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary))
        for stmt in AUTO_EXPLAIN:
            conn.execute(stmt)
        conn.commit()
        conn.execute(_common.CLAIM, {"worker": "bench-explain", "limit": LIMIT}).fetchall()
        conn.rollback()
    found = []
    for text in notices:
        match = _DURATION.search(text)
        if match:
            found.append((float(match[1]), text))
    return found


def _query_text(plan: str) -> str:
    """The statement of an auto_explain entry, on one line."""
    text = plan.split("Query Text:", 1)[-1]
    statement = []
    for line in text.splitlines():
        if statement and re.match(r"^[A-Z][A-Za-z ]+  \(cost=|^[A-Z][A-Za-z ]+ on ", line):
            break
        statement.append(line)
    return " ".join(" ".join(statement).split())


def explain_report(dsns: dict[str, str]) -> list[str]:
    lines, dump = [], []
    for label, dsn in dsns.items():
        lines.append(f"  statements inside claim_runs with {label} finished runs (slowest first):")
        found = sorted(plans(dsn), key=lambda p: -p[0])
        for rank, (ms, text) in enumerate(found):
            if rank < 6:
                lines.append(f"    {ms:8.3f} ms  {_query_text(text)[:90]}")
            dump.append(f"=== {label} finished runs: {ms:.3f} ms\n{text}\n")
    _common.RESULTS.mkdir(exist_ok=True)
    path = _common.RESULTS / "claim_history_plans.txt"
    path.write_text("\n".join(dump))
    lines.append(f"  full plans: {path}")
    return lines


def parse(argv):
    ap = argparse.ArgumentParser(
        prog="python -m bench claim_history", description=__doc__.splitlines()[0]
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="fewer calls (the 1,000,000-row history is the point and stays)",
    )
    ap.add_argument("--small", type=int, default=10_000, help="finished runs, small case")
    ap.add_argument("--history", type=int, default=1_000_000, help="finished runs, big case")
    ap.add_argument("--calls", type=int, help="measured calls per database (600)")
    ap.add_argument("--explain", action="store_true", help="record the plans inside claim_runs")
    args = ap.parse_args(argv)
    args.calls = args.calls or (150 if args.quick else 600)
    return args


def main(argv=None) -> list[str]:
    args = parse(argv)
    started = time.monotonic()
    with _common.cluster() as pg:
        dsn = _common.migrated_database(pg, TEMPLATE)
        with psycopg.connect(dsn, autocommit=True) as conn:
            _common.seed_agents(conn, agents=AGENTS, orgs=ORGS)
        t0 = time.monotonic()
        dsns = {args.small: build(pg, "bench_history_small", args.small)}
        dsns[args.history] = build(pg, "bench_history_big", args.history)
        print(f"  history loaded and vacuumed in {time.monotonic() - t0:.1f} s", flush=True)

        timings: dict[int, list[float]] = {size: [] for size in dsns}
        conns = {size: psycopg.connect(d) for size, d in dsns.items()}
        try:
            rounds, per_round = 10, max(1, args.calls // 10)
            for conn in conns.values():  # warm-up: plans cached, buffers hot
                for _ in range(30):
                    one_claim(conn)
            for _ in range(rounds):
                for size, conn in conns.items():
                    timings[size].extend(one_claim(conn) for _ in range(per_round))
        finally:
            for conn in conns.values():
                conn.close()

        stats = {}
        for size, values in timings.items():
            ms = [v * 1000 for v in values]
            stats[size] = {
                "finished_runs": size,
                "queued_runs": QUEUED,
                "calls": len(ms),
                "p50_ms": round(_common.percentile(ms, 0.5), 3),
                "p90_ms": round(_common.percentile(ms, 0.9), 3),
            }
        small, big = stats[args.small], stats[args.history]
        ratio50 = big["p50_ms"] / small["p50_ms"]
        ratio90 = big["p90_ms"] / small["p90_ms"]
        summary = [
            f"claim latency, claim_runs(p_limit => {LIMIT}) over both lanes, "
            f"{QUEUED} queued runs, {len(timings[args.small])} calls each:"
        ]
        for s in (small, big):
            summary.append(
                f"  {s['finished_runs']:>9,} finished runs: p50 {s['p50_ms']:.3f} ms, "
                f"p90 {s['p90_ms']:.3f} ms"
            )
        verdict = "meets" if ratio50 < GOAL else "MISSES"
        summary.append(f"  ratio p50 {ratio50:.2f} (goal < {GOAL}: {verdict}), p90 {ratio90:.2f}")
        if args.explain or ratio50 >= GOAL:
            summary += explain_report({f"{size:,}": d for size, d in dsns.items()})
        info = _common.machine(pg)
    path = _common.write_result(
        "claim_history",
        {
            "machine": info,
            "results": [small, big],
            "ratio_p50": round(ratio50, 3),
            "ratio_p90": round(ratio90, 3),
            "goal": GOAL,
        },
    )
    summary.append(f"  ({time.monotonic() - started:.0f} s; {path})")
    print("\n".join(summary))
    return summary


if __name__ == "__main__":
    main()
