"""tick over 100,000 agents, of which 10,000 and then 1,000 are due: the cost per due
agent must follow due agents, not all agents (agents_due_idx). Prints its figures.

    python -m bench.tick_bench [--agents 100000] [--due 10000 1000] [--limit 500]

Starts its own throwaway cluster (runlane.pgcluster.LocalCluster), migrates with
runlane.migrate.migrate, seeds through the real triggers, then calls tick the way the
runner's maintenance leader does: one call per transaction, p_limit agents at a time,
until nothing is due. Never run as a test.
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime, timedelta

import psycopg

from runlane.migrate import migrate
from runlane.pgcluster import LocalCluster

TICK = "select count(*) from runlane.tick(p_now => %(now)s::timestamptz, p_limit => %(limit)s::int)"


def seed(conn: psycopg.Connection, agents: int) -> None:
    conn.execute(
        "insert into runlane.platform_settings (org_id, timezone) "
        "values ('org-bench', 'Europe/Berlin')"
    )
    conn.execute(
        "insert into runlane.users (user_id, org_id) "
        "select 'owner-' || i, 'org-bench' from generate_series(0, 999) as i"
    )
    # a mix of calendar and interval schedules, written through the agents trigger
    conn.execute(
        "insert into runlane.agents (agent_id, org_id, owner_id, model, prompt, schedule) "
        "select 'agent-' || i, 'org-bench', 'owner-' || (i %% 1000), 'bench-model', "
        "'Summarize the day', case i %% 3 when 0 then 'daily at 09:00' "
        "when 1 then 'weekly on mon,thu at 07:30' else 'every 6 hours' end "
        "from generate_series(0, %s - 1) as i",
        (agents,),
    )
    # history: one finished run per agent, so the planner sees runs as the big table it
    # is in production (an empty, freshly analyzed runs table gets cached seq-scan plans)
    conn.execute(
        "insert into runlane.runs (org_id, agent_id, lane, trigger, state, prompt, model, "
        "created_at, finished_at) select org_id, agent_id, 'background', 'manual', 'succeeded', "
        "prompt, model, now() - interval '10 days', now() - interval '10 days' from runlane.agents"
    )
    conn.execute("vacuum analyze runlane.agents")
    conn.execute("vacuum analyze runlane.runs")


def make_due(conn: psycopg.Connection, due: int, now: datetime) -> None:
    conn.execute("delete from runlane.run_events")
    conn.execute("delete from runlane.runs where trigger = 'scheduled'")
    # everyone back in the future, then `due` agents spread over the last day
    conn.execute("update runlane.agents set next_run_at = %s", (now + timedelta(days=30),))
    conn.execute(
        "update runlane.agents set next_run_at = %s - (random() * interval '1 day') "
        "where agent_id in (select agent_id from runlane.agents order by random() limit %s)",
        (now, due),
    )
    conn.execute("vacuum analyze runlane.agents")
    conn.execute("vacuum analyze runlane.runs")


def tick_all(conn: psycopg.Connection, now: datetime, limit: int) -> tuple[int, float, int]:
    handled, calls = 0, 0
    started = time.perf_counter()
    while True:
        (n,) = conn.execute(TICK, {"now": now, "limit": limit}).fetchone()
        calls += 1
        if n == 0:
            break
        handled += n
    return handled, time.perf_counter() - started, calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=100_000)
    parser.add_argument("--due", type=int, nargs="+", default=[10_000, 1_000])
    parser.add_argument("--limit", type=int, default=500)
    args = parser.parse_args()

    with LocalCluster() as pg, psycopg.connect(pg.dsn, autocommit=True) as admin:
        admin.execute("create database tick_bench")
        with psycopg.connect(pg.dsn_for("tick_bench"), autocommit=True) as conn:
            migrate(conn)
            t0 = time.perf_counter()
            seed(conn, args.agents)
            print(
                f"seeded {args.agents} agents through the schedule trigger "
                f"in {time.perf_counter() - t0:.1f} s"
            )
            now = datetime.now(UTC).replace(microsecond=0)
            per_due = {}
            for due in args.due:
                make_due(conn, due, now)
                handled, seconds, calls = tick_all(conn, now, args.limit)
                (runs,) = conn.execute(
                    "select count(*) from runlane.runs where trigger = 'scheduled'"
                ).fetchone()
                per_due[due] = seconds / max(handled, 1) * 1000
                print(
                    f"agents={args.agents} due={due} handled={handled} runs={runs} "
                    f"tick_calls={calls} (p_limit={args.limit}) total={seconds * 1000:.0f} ms "
                    f"per_due_agent={per_due[due]:.3f} ms"
                )
            if len(per_due) >= 2:
                first, *_, last = args.due
                ratio = max(per_due[first], per_due[last]) / min(per_due[first], per_due[last])
                print(
                    f"per-due-agent cost ratio ({first} vs {last} due): {ratio:.2f}x "
                    f"(goal: within 1.5x)"
                )


if __name__ == "__main__":
    main()
