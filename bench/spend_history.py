"""Spend checks with 1,000 and with 500,000 of an owner's charged runs this week.

Goal: the ratio of the two p50 latencies of `weekly_spend` and of `run_now` stays under
1.3 — a budget check reads the week's quarter-hour buckets of the charge ledger, not the
owner's history.

Two databases cloned from one migrated template (one organization with a weekly budget
that is never reached, so every `run_now` computes the spend; one owner with 100 agents
and one more, idle, that "Run now" starts) get their history with `insert … select
generate_series` statements: finished runs of the owner's agents created this week, each
charged once at a time spread evenly from Monday 00:00 UTC to now (a ledger row and its
quarter-hour bucket, as runlane._record_charge writes them), then VACUUM ANALYZE. A
`weekly_spend` call and a `run_now` call (in a transaction that is rolled back, so every
call sees the same rows) are timed at the client; calls alternate between the two
databases in rounds, so load from elsewhere on the machine hits both alike. For reference
it also times, a few times, the query weekly_spend ran before the ledger (runs.cost of
the owner's runs created this week).

    python -m bench spend_history [--quick] [--small N] [--history N] [--calls N]
"""

from __future__ import annotations

import argparse
import time
from decimal import Decimal

import psycopg

from bench import _common

AGENTS = 100
GOAL = 1.3
TEMPLATE = "bench_spend_template"
OWNER = "owner1"

SETUP = [
    """insert into runlane.platform_settings (org_id, agent_weekly_budget)
       values ('org1', 1000000000000)""",
    "insert into runlane.users (user_id, org_id) values ('owner1', 'org1')",
    """insert into runlane.agents (agent_id, org_id, owner_id, model, prompt)
       select 'agent' || g, 'org1', 'owner1', 'noop', 'do nothing'
       from generate_series(0, %(agents)s::int) as g""",
]

# Runs created this week, each charged once; charge g at monday + (now - monday) * g / n.
HISTORY = """
with week as (
    select date_trunc('week', now() at time zone 'UTC') at time zone 'UTC' as monday
)
insert into runlane.runs (org_id, agent_id, lane, trigger, state, prompt, model, attempts,
                          fence, cost, created_at, first_started_at, finished_at)
select 'org1', 'agent' || (g %% %(agents)s::int + 1), 'background', 'manual', 'succeeded',
       'do nothing', 'noop', 1, 1, 0.01, t, t, t
from week, generate_series(1, %(count)s::int) as g,
     lateral (select week.monday + (now() - week.monday) * g / (%(count)s::int + 1) as t) as pick
"""
CHARGES = """
insert into runlane.charges (run_id, org_id, owner_id, attempt, amount, charged_at)
select r.run_id, r.org_id, 'owner1', 1, r.cost, r.finished_at
from runlane.runs as r
order by r.run_id;
insert into runlane.charge_buckets (owner_id, bucket_start, amount)
select c.owner_id, date_bin('15 minutes', c.charged_at, timestamptz '2000-01-01 00:00:00+00') as b,
       sum(c.amount)
from runlane.charges as c
group by c.owner_id, b;
"""

WEEKLY_SPEND = "select runlane.weekly_spend(%(owner)s::text)"
RUN_NOW = "select (runlane.run_now(p_agent_id => 'agent0')).state"
# What weekly_spend computed before the ledger, for reference.
BEFORE = """
select coalesce(sum(r.cost), 0)
from runlane.agents as a
join runlane.runs as r on r.agent_id = a.agent_id
where a.owner_id = %(owner)s
  and r.created_at >= date_trunc('week', now() at time zone 'UTC') at time zone 'UTC'
  and r.created_at < (date_trunc('week', now() at time zone 'UTC') + interval '7 days')
      at time zone 'UTC'
"""


def build(pg, name: str, count: int) -> str:
    dsn = _common.create_database(pg, name, template=TEMPLATE)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(HISTORY, {"count": count, "agents": AGENTS})
        conn.execute(CHARGES)
    _common.vacuum_analyze(dsn)
    return dsn


def timed(conn: psycopg.Connection, sql: str) -> float:
    """Seconds for one call; whatever it wrote is rolled back."""
    t0 = time.perf_counter()
    conn.execute(sql, {"owner": OWNER}).fetchone()
    elapsed = time.perf_counter() - t0
    conn.rollback()
    return elapsed


def parse(argv):
    ap = argparse.ArgumentParser(
        prog="python -m bench spend_history", description=__doc__.splitlines()[0]
    )
    ap.add_argument(
        "--quick",
        action="store_true",
        help="fewer calls (the 500,000-run history is the point and stays)",
    )
    ap.add_argument("--small", type=int, default=1_000, help="charged runs, small case")
    ap.add_argument("--history", type=int, default=500_000, help="charged runs, big case")
    ap.add_argument("--calls", type=int, help="measured calls of each kind per database (600)")
    args = ap.parse_args(argv)
    args.calls = args.calls or (150 if args.quick else 600)
    return args


def main(argv=None) -> list[str]:
    args = parse(argv)
    started = time.monotonic()
    with _common.cluster() as pg:
        dsn = _common.migrated_database(pg, TEMPLATE)
        with psycopg.connect(dsn, autocommit=True) as conn:
            for sql in SETUP:
                conn.execute(sql, {"agents": AGENTS})
        t0 = time.monotonic()
        dsns = {args.small: build(pg, "bench_spend_small", args.small)}
        dsns[args.history] = build(pg, "bench_spend_big", args.history)
        print(f"  history loaded and vacuumed in {time.monotonic() - t0:.1f} s", flush=True)

        kinds = {"weekly_spend": WEEKLY_SPEND, "run_now": RUN_NOW}
        timings = {(kind, size): [] for kind in kinds for size in dsns}
        before: dict[int, list[float]] = {size: [] for size in dsns}
        spent: dict[int, Decimal] = {}
        conns = {size: psycopg.connect(d) for size, d in dsns.items()}
        try:
            for size, conn in conns.items():
                spent[size] = conn.execute(WEEKLY_SPEND, {"owner": OWNER}).fetchone()[0]
                conn.rollback()
                state = conn.execute(RUN_NOW).fetchone()[0]
                conn.rollback()
                if state != "queued":
                    raise RuntimeError(f"run_now answered {state!r}, expected a queued run")
                for _ in range(30):  # warm-up: plans cached, buffers hot
                    for sql in kinds.values():
                        timed(conn, sql)
            rounds, per_round = 10, max(1, args.calls // 10)
            for _ in range(rounds):
                for size, conn in conns.items():
                    for kind, sql in kinds.items():
                        timings[(kind, size)].extend(timed(conn, sql) for _ in range(per_round))
            for size, conn in conns.items():
                before[size] = [timed(conn, BEFORE) for _ in range(5)]
        finally:
            for conn in conns.values():
                conn.close()

        results = []
        summary = [
            f"spend checks with an owner's charged runs this week, "
            f"{args.calls} calls of each per database:"
        ]
        ratios = {}
        for kind in kinds:
            stats = {}
            for size in dsns:
                ms = [v * 1000 for v in timings[(kind, size)]]
                stats[size] = {
                    "call": kind,
                    "charged_runs": size,
                    "calls": len(ms),
                    "p50_ms": round(_common.percentile(ms, 0.5), 3),
                    "p90_ms": round(_common.percentile(ms, 0.9), 3),
                }
                results.append(stats[size])
            small, big = stats[args.small], stats[args.history]
            ratios[kind] = big["p50_ms"] / small["p50_ms"]
            verdict = "meets" if ratios[kind] < GOAL else "MISSES"
            summary.append(
                f"  {kind:<12} {args.small:>7,}: p50 {small['p50_ms']:.3f} ms, "
                f"p90 {small['p90_ms']:.3f} ms | {args.history:>7,}: p50 "
                f"{big['p50_ms']:.3f} ms, p90 {big['p90_ms']:.3f} ms | ratio p50 "
                f"{ratios[kind]:.2f} (goal < {GOAL}: {verdict})"
            )
        reference = {
            size: round(_common.percentile([v * 1000 for v in values], 0.5), 1)
            for size, values in before.items()
        }
        summary.append(
            "  reference, the pre-ledger query (runs.cost by creation week), p50: "
            + ", ".join(f"{size:,} runs {ms} ms" for size, ms in reference.items())
        )
        if any(spent[size] != Decimal("0.01") * size for size in dsns):
            raise RuntimeError(f"weekly_spend answered {spent}, expected 0.01 per run")
        info = _common.machine(pg)
    path = _common.write_result(
        "spend_history",
        {
            "machine": info,
            "results": results,
            "ratio_p50": {k: round(v, 3) for k, v in ratios.items()},
            "pre_ledger_query_p50_ms": reference,
            "goal": GOAL,
        },
    )
    summary.append(f"  ({time.monotonic() - started:.0f} s; {path})")
    print("\n".join(summary))
    return summary


if __name__ == "__main__":
    main()
