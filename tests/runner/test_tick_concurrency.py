"""Several ticks (and manual runs) from separate connections at once: every due agent
fires exactly once, no slot is lost, and no agent ever has two unfinished runs."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import UTC, datetime

import psycopg

AGENTS = 120
WORKERS = 4
NOW = datetime(2026, 5, 4, 9, 30, tzinfo=UTC)

TICK = (
    "select t.event, t.agent_id, t.run_id "
    "from runlane.tick(%(now)s::timestamptz, %(limit)s::int) as t"
)
RUN_NOW = "select (runlane.run_now(%(agent)s::text)).state"


def seed(conn: psycopg.Connection) -> list[str]:
    conn.execute("select runlane_test.org('org-c', 4, 'Europe/Berlin')")
    conn.execute("select runlane_test.owner('owner-c', 'org-c')")
    conn.execute(
        "insert into runlane.agents (agent_id, org_id, owner_id, model, prompt, schedule) "
        "select format('agent-%%s', lpad(i::text, 3, '0')), 'org-c', 'owner-c', 'test-model', "
        "'Summarize the day', 'daily at 11:00' from generate_series(0, %s - 1) as i",
        (AGENTS,),
    )
    conn.execute("update runlane.agents set next_run_at = '2026-05-04 09:00+00'")
    return [f"agent-{i:03d}" for i in range(AGENTS)]


def run_threads(db_dsn: str, work) -> list:
    barrier = threading.Barrier(WORKERS)
    results, errors = [], []

    def worker(index: int) -> None:
        try:
            with psycopg.connect(db_dsn, autocommit=True) as conn:
                barrier.wait()
                results.extend(work(conn, index))
        except Exception as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    return results


def tick_until_done(conn: psycopg.Connection, _index: int) -> list:
    events = []
    while True:
        rows = conn.execute(TICK, {"now": NOW, "limit": 7}).fetchall()
        if not rows:
            return events
        events.extend(rows)


def test_concurrent_ticks_fire_each_due_agent_exactly_once(conn, db_dsn):
    agents = seed(conn)
    events = run_threads(db_dsn, tick_until_done)

    fired = Counter(agent for event, agent, _ in events if event == "routine.fired")
    assert fired == Counter({agent: 1 for agent in agents})
    assert [e for e in events if e[0] != "routine.fired"] == []
    runs = conn.execute("select agent_id, count(*) from runlane.runs group by agent_id").fetchall()
    assert dict(runs) == {agent: 1 for agent in agents}
    (behind,) = conn.execute(
        "select count(*) from runlane.agents where next_run_at is null or next_run_at <= %s", (NOW,)
    ).fetchone()
    assert behind == 0, "every agent's next_run_at moved past p_now"
    (occurrences,) = conn.execute(
        "select count(distinct (timer_routine, timer_occurrence)) from runlane.runs"
    ).fetchone()
    assert occurrences == AGENTS


def test_ticks_racing_run_now_never_give_an_agent_two_unfinished_runs(conn, db_dsn):
    agents = seed(conn)

    def mixed(c: psycopg.Connection, index: int) -> list:
        if index % 2 == 0:
            return tick_until_done(c, index)
        order = agents if index == 1 else list(reversed(agents))
        return [
            ("manual", agent, c.execute(RUN_NOW, {"agent": agent}).fetchone()[0]) for agent in order
        ]

    events = run_threads(db_dsn, mixed)

    unfinished = conn.execute(
        "select agent_id, count(*) from runlane.runs "
        "where state in ('queued', 'running') group by agent_id"
    ).fetchall()
    assert dict(unfinished) == {agent: 1 for agent in agents}
    fired = Counter(agent for event, agent, _ in events if event == "routine.fired")
    assert all(n == 1 for n in fired.values())
    handled = Counter(agent for event, agent, _ in events if event != "manual")
    assert handled == Counter({agent: 1 for agent in agents}), "each due agent ticked once"
    # one tick and two manual triggers per agent: one of the three runs, two visible skips
    (total, skips) = conn.execute(
        "select count(*), count(*) filter (where state = 'skipped' and reason = 'already_running') "
        "from runlane.runs"
    ).fetchone()
    (journal,) = conn.execute(
        "select count(*) from runlane.run_events where event = 'run.skipped'"
    ).fetchone()
    assert (total, skips, journal) == (3 * AGENTS, 2 * AGENTS, 2 * AGENTS)
