"""Database time of each dashboard page with 100,000 queued and 1,000,000 finished runs.

Goal: every page's queries take under 50 ms of database time (p50), so a person looking
costs the database little, and the live hub's periodic round (what one dashboard process
asks every second while someone watches) costs less than that.

One database gets 50 organizations (one owner each, a weekly budget, a charge per owner
this week), AGENTS agents, QUEUED queued runs (a background run for each agent that may
have one, the rest chat runs on their own threads, created over the last two hours),
RUNNING running runs held by WORKERS registered workers, and FINISHED finished runs
spread over the last 7 days (so about 6,000 fall in the last hour, a tenth of them
failed), each with its start, first response and finish, then VACUUM ANALYZE. Each
page's statements are exactly the dashboard's (runlane.dashboard.queries), run as the
dashboard runs them, through a login that holds runlane_api only; they are timed at the
client on loopback (so the figure includes a round trip per statement) after a warm-up,
pages taken in turn in rounds so load from elsewhere on the machine hits all alike.

    python -m bench dashboard_queries [--quick] [--queued N] [--finished N] [--calls N]
"""

from __future__ import annotations

import argparse
import time
from datetime import timedelta

import psycopg
from psycopg.conninfo import make_conninfo

from bench import _common
from runlane.dashboard import queries

GOAL_MS = 50.0
AGENTS = 5_000
ORGS = 50
RUNNING = 500
WORKERS = 20

SETUP = [
    """insert into runlane.platform_settings (org_id, agent_max_concurrency, agent_weekly_budget)
       select 'org' || g, 100, 1000 from generate_series(1, %(orgs)s::int) as g""",
    """insert into runlane.users (user_id, org_id)
       select 'user' || g, 'org' || g from generate_series(1, %(orgs)s::int) as g""",
    """insert into runlane.agents (agent_id, org_id, owner_id, model, prompt, schedule)
       select 'agent' || g, 'org' || (g %% %(orgs)s::int + 1), 'user' || (g %% %(orgs)s::int + 1),
              'noop', 'do nothing', case when g %% 4 = 0 then 'every 6 hours' else '' end
       from generate_series(1, %(agents)s::int) as g""",
]
FINISHED = """
insert into runlane.runs (org_id, agent_id, lane, trigger, state, thread_id, prompt, model,
                          attempts, fence, created_at, first_started_at, first_response_at,
                          finished_at)
select 'org' || (a %% %(orgs)s::int + 1), 'agent' || a,
       case when g %% 5 = 0 then 'background' else 'interactive' end,
       case when g %% 5 = 0 then 'scheduled' else 'interactive' end,
       case when g %% 10 = 9 then 'failed' else 'succeeded' end,
       case when g %% 5 <> 0 then 'thread-f' || a end, 'do nothing', 'noop', 1, 1,
       t, t + interval '40 milliseconds', t + (200 + g %% 900) * interval '1 millisecond',
       t + (1500 + g %% 4000) * interval '1 millisecond'
from generate_series(1, %(count)s::int) as g,
     lateral (select g %% %(agents)s::int + 1 as a,
                     now() - interval '7 days' * (1 - g::float8 / (%(count)s::int + 1))
                       - interval '10 seconds' as t) as pick
"""
QUEUED = """
insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt, model, created_at)
select 'org' || (a %% %(orgs)s::int + 1), 'agent' || a,
       case when g <= %(agents)s::int then 'background' else 'interactive' end,
       case when g <= %(agents)s::int then 'manual' else 'interactive' end,
       case when g > %(agents)s::int then 'thread-q' || g end, 'do nothing', 'noop',
       now() - interval '2 hours' * (1 - g::float8 / (%(count)s::int + 1))
from generate_series(1, %(count)s::int) as g,
     lateral (select (g - 1) %% %(agents)s::int + 1 as a) as pick
"""
RUNNING_RUNS = """
insert into runlane.runs (org_id, agent_id, lane, trigger, state, thread_id, prompt, model,
                          attempts, fence, lease_owner, lease_expires_at, heartbeat_at,
                          created_at, first_started_at, first_response_at)
select 'org' || (g %% %(orgs)s::int + 1), 'agent' || g, 'interactive', 'interactive',
       'running', 'thread-r' || g, 'do nothing', 'noop', 1, 1, 'bench-worker-' || g %% 20,
       now() + interval '1 hour', now(), now() - interval '20 seconds',
       now() - interval '19 seconds', now() - interval '18 seconds'
from generate_series(1, %(count)s::int) as g
"""
REGISTRY = """
insert into runlane.workers (worker_id, generation, lanes)
select 'bench-worker-' || g, 2, array['interactive', 'background']
from generate_series(0, 19) as g
"""
OUTPUTS = """
insert into runlane.run_outputs (run_id, attempt, kind, body)
select r.run_id, 1, 'text', 'chunk ' || g
from (select run_id from runlane.runs where state = 'running' order by run_id limit 1) as r,
     generate_series(1, 300) as g
"""
CHARGES = """
insert into runlane.charges (run_id, org_id, owner_id, attempt, amount, charged_at)
select r.run_id, r.org_id, 'user' || substr(r.org_id, 4), 1, 0.5, r.finished_at
from runlane.runs as r
where r.finished_at > now() - interval '3 days' and r.run_id % 50 = 0;
insert into runlane.charge_buckets (owner_id, bucket_start, amount)
select c.owner_id, date_bin('15 minutes', c.charged_at, timestamptz '2000-01-01 00:00:00+00') as b,
       sum(c.amount)
from runlane.charges as c
group by c.owner_id, b;
"""


# the overview's statements run in one read-only repeatable-read transaction, and
# lane_minutes takes lane_overview's queued counts (FROM_OVERVIEW: filled in by timed())
SNAPSHOT = "begin isolation level repeatable read read only"
FROM_OVERVIEW = object()


def runs_page(**given) -> dict:
    """runs_page's arguments as the runs page passes them."""
    base = {"state": None, "lane": None, "org": None, "agent": None, "thread": None}
    return {**base, **given, "limit": 100}


def pages(run_id: int, agent: str, watched: list[int]) -> dict[str, list[tuple[str, dict]]]:
    """Each page's statements with the arguments the dashboard passes."""
    return {
        # as the dashboard reads it (Hub.read_all): one snapshot, lane_minutes given
        # lane_overview's queued counts
        "overview": [
            (SNAPSHOT, {}),
            (queries.OVERVIEW, {"threshold": timedelta(seconds=30)}),
            (queries.MINUTES, {"since": timedelta(hours=1), "queued": FROM_OVERVIEW}),
            (queries.FAILURES, {"since": timedelta(hours=1)}),
            ("commit", {}),
        ],
        "organizations": [(queries.ORGS, {}), (queries.OWNERS, {})],
        # a page of 100 agents (and one more, the next page's first), unfiltered and with
        # a filter that 111 of the 5,000 agents match (every agent read to find them)
        "agents": [
            (queries.AGENT_PAGE, {"from": None, "limit": 101, "match": None, "status": None})
        ],
        "agents, filtered": [
            (queries.AGENT_PAGE, {"from": None, "limit": 101, "match": "agent49", "status": None})
        ],
        "agent journal": [
            (queries.JOURNAL, {"agent": agent, "limit": 100}),
            (queries.AGENT_PAGE, {"from": agent, "limit": 1, "match": None, "status": None}),
        ],
        "run": [
            (queries.RUN_STATUS, {"run": run_id}),
            (queries.RUN_TIMING, {"run": run_id}),
            (queries.RUN_DETAIL, {"run": run_id}),
            (queries.RUN_REPLY, {"run": run_id}),
            (queries.OUTPUTS, {"run": run_id, "after": 0, "limit": 500}),
        ],
        # the runs page: each state as the page asks for it, and filtered
        **{
            f"runs, {state or 'every state'}": [(queries.RUNS_PAGE, runs_page(state=state))]
            for state in ("failed", "running", "queued", "succeeded", None)
        },
        "runs, queued of one organization": [
            (queries.RUNS_PAGE, runs_page(state="queued", org="org7"))
        ],
        "runs, failed of one agent": [(queries.RUNS_PAGE, runs_page(state="failed", agent=agent))],
        "runs, every state of one agent": [(queries.RUNS_PAGE, runs_page(state=None, agent=agent))],
        "workers": [(queries.WORKERS, {})],
        "hub tick (overview + 10 runs)": [
            (queries.OVERVIEW, {"threshold": timedelta(seconds=30)}),
            (queries.WATCHED, {"runs": watched}),
        ],
    }


def _short(sql: str, params: dict) -> str:
    """The function a statement calls: `runlane.lane_status` -> lane_status (agent_page
    with its filter, when it has one)."""
    if "runlane." not in sql:
        return sql.split()[0]
    name = sql.split("runlane.", 1)[1].split("(", 1)[0]
    if "state" in params:
        what = [params["state"] or "all"] + [params[k] for k in ("org", "agent") if params[k]]
        return f"{name} ({', '.join(what)})"
    return f"{name} (filtered)" if params.get("match") else name


def timed(conn: psycopg.Connection, statements: list[tuple[str, dict]]) -> float:
    t0 = time.perf_counter()
    queued = None
    for sql, params in statements:
        if params.get("queued") is FROM_OVERVIEW:
            params = {**params, "queued": queued}
        cur = conn.execute(sql, params)
        rows = cur.fetchall() if cur.description else []
        if sql == queries.OVERVIEW:
            by_lane = {r[0]: r[1] for r in rows}  # lane, queued
            queued = [by_lane["interactive"], by_lane["background"]]
    return time.perf_counter() - t0


def parse(argv):
    ap = argparse.ArgumentParser(
        prog="python -m bench dashboard_queries", description=__doc__.splitlines()[0]
    )
    ap.add_argument(
        "--quick", action="store_true", help="10,000 queued and 100,000 finished runs, fewer calls"
    )
    ap.add_argument("--queued", type=int, help="queued runs (100,000)")
    ap.add_argument("--finished", type=int, help="finished runs (1,000,000)")
    ap.add_argument("--calls", type=int, help="measured loads of each page (40)")
    args = ap.parse_args(argv)
    args.queued = args.queued or (10_000 if args.quick else 100_000)
    args.finished = args.finished or (100_000 if args.quick else 1_000_000)
    args.calls = args.calls or (10 if args.quick else 40)
    return args


def main(argv=None) -> list[str]:
    args = parse(argv)
    started = time.monotonic()
    with _common.cluster() as pg:
        dsn = _common.migrated_database(pg, "bench_dashboard")
        t0 = time.monotonic()
        with psycopg.connect(dsn, autocommit=True) as conn:
            params = {"orgs": ORGS, "agents": AGENTS}
            for sql in SETUP:
                conn.execute(sql, params)
            conn.execute(FINISHED, {**params, "count": args.finished})
            conn.execute(QUEUED, {**params, "count": args.queued})
            conn.execute(RUNNING_RUNS, {**params, "count": RUNNING})
            conn.execute(REGISTRY)
            conn.execute(OUTPUTS)
            conn.execute(CHARGES)
            conn.execute("create role bench_dashboard_api login")
            conn.execute("grant runlane_api to bench_dashboard_api")
            conn.execute("select runlane.scope_api_login('bench_dashboard_api', null)")
            watched = [
                r
                for (r,) in conn.execute(
                    "select run_id from runlane.runs where state = 'running' order by run_id "
                    "limit 10"
                )
            ]
            counts = dict(
                conn.execute("select state, count(*) from runlane.runs group by state").fetchall()
            )
        _common.vacuum_analyze(dsn)
        print(f"  loaded {counts} and vacuumed in {time.monotonic() - t0:.1f} s", flush=True)

        api = psycopg.connect(make_conninfo(dsn, user="bench_dashboard_api"), autocommit=True)
        try:
            plan = pages(watched[0], "agent1", watched)
            by_lane = {
                r[0]: r[1]
                for r in api.execute(queries.OVERVIEW, {"threshold": timedelta(seconds=30)})
            }
            queued_now = [by_lane["interactive"], by_lane["background"]]
            for _ in range(3):  # warm-up: plans cached, buffers hot
                for statements in plan.values():
                    timed(api, statements)
            timings: dict[str, list[float]] = {name: [] for name in plan}
            statements_ms: dict[str, list[float]] = {}
            for _ in range(args.calls):
                for name, statements in plan.items():
                    timings[name].append(timed(api, statements) * 1000)
                for statements in plan.values():  # each statement alone, for the breakdown
                    for sql, params in statements:
                        if sql in (SNAPSHOT, "commit"):
                            continue
                        if params.get("queued") is FROM_OVERVIEW:  # as the page passes them
                            params = {**params, "queued": queued_now}
                        key = _short(sql, params)
                        if len(statements_ms.setdefault(key, [])) < args.calls:
                            statements_ms[key].append(timed(api, [(sql, params)]) * 1000)
            lanes = api.execute(queries.OVERVIEW, {"threshold": timedelta(seconds=30)}).fetchall()
        finally:
            api.close()
        info = _common.machine(pg)

    results, summary = (
        [],
        [
            f"dashboard pages, {args.queued:,} queued and {args.finished:,} finished runs, "
            f"{RUNNING} running, {AGENTS:,} agents, {WORKERS} workers; {args.calls} loads of each "
            f"(statements timed at the client on loopback):"
        ],
    )
    for name, ms in timings.items():
        p50, p90 = _common.percentile(ms, 0.5), _common.percentile(ms, 0.9)
        verdict = "meets" if p50 < GOAL_MS else "MISSES"
        results.append(
            {
                "page": name,
                "loads": len(ms),
                "p50_ms": round(p50, 2),
                "p90_ms": round(p90, 2),
                "max_ms": round(max(ms), 2),
            }
        )
        summary.append(
            f"  {name:<34} p50 {p50:7.2f} ms  p90 {p90:7.2f} ms  "
            f"(goal < {GOAL_MS:.0f} ms: {verdict})"
        )
    summary.append(
        "  each statement alone, p50 / p90: "
        + ", ".join(
            f"{key} {_common.percentile(ms, 0.5):.1f} / {_common.percentile(ms, 0.9):.1f} ms"
            for key, ms in statements_ms.items()
        )
    )
    summary.append(f"  lane_overview saw {lanes}")
    path = _common.write_result(
        "dashboard_queries",
        {
            "machine": info,
            "queued": args.queued,
            "finished": args.finished,
            "running": RUNNING,
            "agents": AGENTS,
            "workers": WORKERS,
            "results": results,
            "goal_ms": GOAL_MS,
            "statements_p50_ms": {
                k: round(_common.percentile(v, 0.5), 2) for k, v in statements_ms.items()
            },
            "statements_p90_ms": {
                k: round(_common.percentile(v, 0.9), 2) for k, v in statements_ms.items()
            },
        },
    )
    summary.append(f"  ({time.monotonic() - started:.0f} s; {path})")
    print("\n".join(summary))
    return summary


if __name__ == "__main__":
    main()
