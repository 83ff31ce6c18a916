"""What every benchmark shares: one throwaway cluster, migrated databases, seed data,
the runlane no-op worker loop, percentiles and the results folder.

Benchmarks print figures; they are never run as tests and assert nothing about time.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import queue
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg

from runlane.migrate import migrate
from runlane.pgcluster import LocalCluster

RESULTS = Path(__file__).parent / "results"

# The same settings for every system compared: a throwaway cluster where durability is
# worth nothing (fsync, synchronous commit and full-page writes off). Spelled out here,
# not inherited, so a change of the test defaults does not move the figures silently.
BENCH_SETTINGS = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "300",
    "shared_buffers": "256MB",
    "listen_addresses": "127.0.0.1",
    "log_min_messages": "warning",
}

CLAIM = """
select c.run_id, c.fence
from runlane.claim_runs(
    p_worker => %(worker)s::text,
    p_lanes => array['background', 'interactive']::text[],
    p_limit => %(limit)s::int
) as c
"""

# A claimed batch is finished with one call, as the runner does (runlane.finish_runs: each
# run fenced and finished in its own subtransaction), not one round trip per run.
FINISH_MANY = """
select count(*) filter (where f.ok)
from runlane.finish_runs(
    p_run_ids => %(run_ids)s::bigint[], p_fences => %(fences)s::bigint[],
    p_outcomes => array_fill('succeeded'::text, array[%(n)s::int]),
    p_errors => array_fill(null::text, array[%(n)s::int]),
    p_costs => array_fill(0::numeric, array[%(n)s::int]),
    p_output_counts => array_fill(0, array[%(n)s::int]),
    p_output_kinds => '{}'::text[], p_output_bodies => '{}'::text[]
) as f
"""


@contextlib.contextmanager
def cluster() -> Iterator[LocalCluster]:
    """A fresh PostgreSQL cluster on loopback, destroyed afterwards."""
    pg = LocalCluster(settings=BENCH_SETTINGS)
    pg.start()
    try:
        yield pg
    finally:
        pg.destroy()


def admin(pg: LocalCluster) -> psycopg.Connection:
    return psycopg.connect(pg.dsn, autocommit=True)


def create_database(pg: LocalCluster, name: str, template: str | None = None) -> str:
    with admin(pg) as conn:
        conn.execute(f'drop database if exists "{name}"')
        if template:
            conn.execute(f'create database "{name}" template "{template}"')
        else:
            conn.execute(f'create database "{name}"')
    return pg.dsn_for(name)


def drop_database(pg: LocalCluster, name: str) -> None:
    with admin(pg) as conn:
        conn.execute(f'drop database if exists "{name}" with (force)')


def migrated_database(pg: LocalCluster, name: str) -> str:
    """A new database with runlane's schema and functions installed."""
    dsn = create_database(pg, name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        migrate(conn)
    return dsn


def seed_agents(conn: psycopg.Connection, agents: int, orgs: int) -> None:
    """`orgs` organizations whose cap never binds, each with one owner, and `agents`
    agents spread round-robin over them."""
    conn.execute(
        """
        insert into runlane.platform_settings (org_id, agent_max_concurrency)
        select 'org' || g, 1000000 from generate_series(1, %(orgs)s::int) as g;
        """,
        {"orgs": orgs},
    )
    conn.execute(
        """
        insert into runlane.users (user_id, org_id)
        select 'user' || g, 'org' || g from generate_series(1, %(orgs)s::int) as g;
        """,
        {"orgs": orgs},
    )
    conn.execute(
        """
        insert into runlane.agents (agent_id, org_id, owner_id, model, prompt)
        select 'agent' || g, 'org' || (g %% %(orgs)s::int + 1),
               'user' || (g %% %(orgs)s::int + 1), 'noop', 'do nothing'
        from generate_series(1, %(agents)s::int) as g;
        """,
        {"agents": agents, "orgs": orgs},
    )
    seed_id_namespaces(conn)


def seed_id_namespaces(conn: psycopg.Connection) -> None:
    """The agent and user ids' namespace rows (agent_orgs, user_orgs, from migration 0029)
    for rows written here by hand, as put_agent and put_user write them: the calls find an
    agent's organization there first."""
    conn.execute(
        """
        do $$
        begin
            if to_regclass('runlane.agent_orgs') is not null then
                insert into runlane.agent_orgs (agent_id, org_id)
                select a.agent_id, a.org_id from runlane.agents as a
                on conflict do nothing;
                insert into runlane.user_orgs (user_id, org_id)
                select u.user_id, u.org_id from runlane.users as u
                on conflict do nothing;
            end if;
        end
        $$
        """
    )


def seed_queued_runs(conn: psycopg.Connection, runs: int, orgs: int) -> None:
    """`runs` queued no-op runs, alternating background (manual, one per agent: the
    unique index allows one unfinished background run per agent) and interactive (each
    on its own thread). Needs at least ceil(runs / 2) agents."""
    conn.execute(
        """
        insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt, model)
        select
            'org' || (a %% %(orgs)s::int + 1),
            'agent' || a,
            case when g %% 2 = 0 then 'background' else 'interactive' end,
            case when g %% 2 = 0 then 'manual' else 'interactive' end,
            case when g %% 2 = 1 then 'thread' || g end,
            'do nothing',
            'noop'
        from generate_series(1, %(runs)s::int) as g,
             lateral (select (g + 1) / 2 as a) as pick
        order by g;
        """,
        {"runs": runs, "orgs": orgs},
    )


def vacuum_analyze(dsn: str) -> None:
    """VACUUM ANALYZE after a load, so that it can mark every loaded page all-visible.
    The cluster commits asynchronously, and VACUUM marks a page all-visible only once it
    may set the committed hint bit of each tuple, which it may not while the commit LSN
    the clog keeps for a group of 32 transactions is unflushed. ANALYZE's own
    asynchronous commits can land in the load's group, so a table can keep no
    all-visible page (relallvisible 0) and every index-only scan of it reads the heap: a
    race that moves the dashboard figures by half. Hence: flush what the
    load committed, then commit ANALYZE's transactions synchronously."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("set synchronous_commit = on")
        conn.execute("checkpoint")
        conn.execute("vacuum analyze")


def runlane_worker(dsn: str, batch: int, warmup: int, barrier, results, index: int) -> None:
    """One worker process: claim `batch` runs, finish them as succeeded in one call (a no-op
    agent),
    repeat until a claim comes back empty. `warmup` runs are done before the barrier and
    are not measured. Puts (index, started, ended, runs) on `results`."""
    worker = f"bench-{os.getpid()}"
    with psycopg.connect(dsn, autocommit=True) as conn:

        def one_batch() -> int:
            rows = conn.execute(CLAIM, {"worker": worker, "limit": batch}).fetchall()
            if rows:
                finished = conn.execute(
                    FINISH_MANY,
                    {
                        "run_ids": [r for r, _ in rows],
                        "fences": [f for _, f in rows],
                        "n": len(rows),
                    },
                ).fetchone()[0]
                assert finished == len(rows), "a claimed run was not finished"
            return len(rows)

        done = 0
        while done < warmup:
            n = one_batch()
            if n == 0:
                break
            done += n
        barrier.wait()
        started = time.monotonic()
        count = 0
        while n := one_batch():
            count += n
        ended = time.monotonic()
    results.put((index, started, ended, count))


def collect(processes, results, expected: int) -> tuple[int, float]:
    """Join worker processes; returns (units done, seconds from first start to last end)."""
    rows = []
    deadline = time.monotonic() + 900
    while len(rows) < expected:
        try:
            rows.append(results.get(timeout=1))
        except queue.Empty:
            failed = [p for p in processes if p.exitcode not in (None, 0)]
            if failed or time.monotonic() > deadline:
                for p in processes:
                    p.kill()
                raise RuntimeError(
                    "a benchmark worker failed or hung; see its traceback above"
                ) from None
    for p in processes:
        p.join(timeout=60)
        if p.exitcode != 0:
            raise RuntimeError(f"benchmark worker {p.pid} exited with {p.exitcode}")
    total = sum(r[3] for r in rows)
    elapsed = max(r[2] for r in rows) - min(r[1] for r in rows)
    return total, elapsed


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def machine(pg: LocalCluster | None = None) -> dict:
    info = {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    if pg is not None:
        with admin(pg) as conn:
            info["postgres"] = conn.execute("show server_version").fetchone()[0]
        info["settings"] = dict(BENCH_SETTINGS)
    return info


def write_result(name: str, data: dict) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    return path
