"""The rolling upgrade from queue delivery to direct dispatch, rehearsed with real processes.

A database at schema 0001 with realistic data (pending deliveries with future retry
times, runs mid-retry, several unmarked timer runs for one agent) is expanded to 0002;
then an older worker (`python -m runlane.legacy`, executing the queue generation's own
statements from sql/legacy/) and two new-generation `runlane worker` processes (with
tests/runner/flaky_agent.py: one output per attempt, one attempt in ten failing and retried
with the runner's backoff) work side by side over more than 500
runs while new runs keep arriving by both paths. The contract step (0003) is refused while
the older worker lives, the older worker stops gracefully, its deliveries drain, the
bounded redundant pass clears surplus timer runs, and the contract step applies.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from runlane.legacy import statement
from runlane.migrate import migrate, migrations
from runlane.upgrade import upgrade_status

HERE = Path(__file__).parent
BACKGROUND_AGENTS = [f"bg-{i}" for i in range(8)]
DRAIN_DEADLINE = 75  # seconds: a hang fails the test instead of blocking the suite


def legacy_run(conn, agent_id: str, lane: str = "background", trigger: str = "manual") -> int:
    """A run created and delivered the way the queue generation's API did it."""
    with conn.transaction():
        run_id = conn.execute(
            statement("create_run"), {"agent_id": agent_id, "lane": lane, "trigger": trigger}
        ).fetchone()[0]
        conn.execute(statement("enqueue_run_delivery"), {"run_id": run_id})
    return run_id


def seed_queue_generation(conn) -> dict[str, list[int]]:
    """Realistic data written with the 0001 schema only."""
    conn.execute(
        "insert into runlane.platform_settings (org_id, agent_max_concurrency) "
        "values ('org-r', 100)"
    )
    conn.execute("insert into runlane.users (user_id, org_id) values ('owner-r', 'org-r')")
    conn.execute(
        """
        insert into runlane.agents (agent_id, org_id, owner_id, model, prompt, thread_id,
                                    computer_id)
        select a, 'org-r', 'owner-r', 'model-1', 'Do the work', 'thread-' || a,
               case when a = 'boxed' then 'box-1' end
        from unnest(%s::text[] || array['chat', 'sched', 'boxed']) as a
    """,
        (BACKGROUND_AGENTS,),
    )
    seeded: dict[str, list[int]] = {
        "history": [],
        "future_retry": [],
        "due_retry": [],
        "unmarked_timer": [],
        "fresh": [],
    }
    for i in range(10):  # finished long ago
        run_id = conn.execute(
            statement("create_run"),
            {
                "agent_id": BACKGROUND_AGENTS[i % 8],
                "lane": "background",
                "trigger": "manual",
            },
        ).fetchone()[0]
        conn.execute(
            "update runlane.runs set state = 'succeeded', attempts = 1, "
            "finished_at = now() - interval '1 day' where run_id = %s",
            (run_id,),
        )
        conn.execute(
            statement("append_output"),
            {"run_id": run_id, "attempt": 1, "kind": "final", "body": "done"},
        )
        seeded["history"].append(run_id)
    for i in range(40):  # mid-retry: attempt 1 failed; 30 retry in 2..6 s, 10 are due again
        agent, lane = (
            ("chat", "interactive") if i % 4 == 0 else (BACKGROUND_AGENTS[i % 8], "background")
        )
        run_id = legacy_run(conn, agent, lane, "interactive" if lane == "interactive" else "manual")
        conn.execute(
            "update runlane.runs set attempts = 1, heartbeat_at = now() - interval '5 s' "
            "where run_id = %s",
            (run_id,),
        )
        conn.execute(
            statement("append_output"),
            {"run_id": run_id, "attempt": 1, "kind": "text", "body": "legacy attempt 1"},
        )
        future = i < 30
        conn.execute(
            """
            update runlane.run_jobs
            set attempts = 1, last_error = 'attempt failed',
                run_at = now() + case when %(future)s then make_interval(secs => 2 + %(i)s %% 5)
                                      else interval '-1 second' end
            where (payload ->> 'run_id')::bigint = %(run_id)s
        """,
            {"future": future, "i": i, "run_id": run_id},
        )
        seeded["future_retry" if future else "due_retry"].append(run_id)
    for _ in range(4):  # an older scheduler fired the same routine several times: unmarked
        seeded["unmarked_timer"].append(legacy_run(conn, "sched", trigger="scheduled"))
    for i in range(100):
        agent = "boxed" if i % 10 == 0 else BACKGROUND_AGENTS[i % 8]
        lane = "interactive" if i % 3 == 0 else "background"
        seeded["fresh"].append(
            legacy_run(
                conn,
                agent if lane == "background" else "chat",
                lane,
                "interactive" if lane == "interactive" else "manual",
            )
        )
    return seeded


def direct_run(conn, agent_id: str, lane: str, wake_in: float | None) -> int:
    """A run created the new way: committed queued, then published (notify)."""
    run_id = conn.execute(
        """
        insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt, model,
                                  computer_id, wake_at)
        select a.org_id, a.agent_id, %(lane)s, case when %(lane)s = 'interactive'
               then 'interactive' else 'manual' end, a.thread_id, a.prompt, a.model,
               a.computer_id, now() + make_interval(secs => %(wake)s)
        from runlane.agents as a where a.agent_id = %(agent)s
        returning run_id
    """,
        {"lane": lane, "agent": agent_id, "wake": wake_in},
    ).fetchone()[0]
    conn.execute("select runlane.publish_run(%s)", (run_id,))
    return run_id


def wait_until(conn, sql: str, what: str, deadline: float = DRAIN_DEADLINE) -> None:
    end = time.monotonic() + deadline
    while not conn.execute(sql).fetchone()[0]:
        if time.monotonic() >= end:
            unfinished = conn.execute("""
                select run_id, state, lane, agent_id, attempts, fence, lease_owner,
                       wake_at - now(), lease_expires_at - now(), computer_id
                from runlane.runs where state in ('queued', 'running')
                order by run_id limit 20
            """).fetchall()
            pytest.fail(f"gave up waiting: {what}; unfinished runs: {unfinished}")
        time.sleep(0.2)


def stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=30)


def refusal(dsn: str) -> psycopg.Error:
    with psycopg.connect(dsn) as mconn, pytest.raises(psycopg.Error) as raised:
        migrate(mconn)
    return raised.value


@pytest.mark.slow
def test_rolling_upgrade_rehearsal(empty_db_dsn, tmp_path):
    with psycopg.connect(empty_db_dsn, autocommit=True) as conn:
        migrate(conn, to=1)
        seeded = seed_queue_generation(conn)
        pending_retry = dict(
            conn.execute(
                """
            select (payload ->> 'run_id')::bigint, run_at from runlane.run_jobs
            where (payload ->> 'run_id')::bigint = any(%s)
        """,
                (seeded["future_retry"],),
            ).fetchall()
        )

        # Expand: every pending legacy retry time is carried into the run's wake time.
        assert [m.version for m in migrate(conn, to=2)] == [2]
        carried = dict(
            conn.execute(
                "select run_id, wake_at from runlane.runs where run_id = any(%s)",
                (seeded["future_retry"] + seeded["due_retry"],),
            ).fetchall()
        )
        assert {r: carried[r] for r in seeded["future_retry"]} == pending_retry
        assert all(carried[r] is None for r in seeded["due_retry"])
        assert (
            conn.execute(
                "select count(*) from runlane.runs where timer_routine is not null"
            ).fetchone()[0]
            == 0
        ), "older firings stay unmarked"

        logs_open = contextlib.ExitStack()
        logs = {
            name: logs_open.enter_context((tmp_path / f"{name}.log").open("w"))
            for name in ("legacy", "direct-1", "direct-2")
        }
        legacy = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "runlane.legacy",
                "--dsn",
                empty_db_dsn,
                "--worker-id",
                "legacy-1",
                "--fail-rate",
                "0.1",
                "--poll",
                "0.05",
                "--work",
                "0.01",
            ],
            stdout=logs["legacy"],
            stderr=subprocess.STDOUT,
        )
        # A rolling upgrade: the older fleet is at work when the new workers join.
        wait_until(
            conn,
            "select count(*) >= 60 from runlane.run_events "
            "where event = 'run.claimed' and detail ->> 'generation' = '1'",
            "the older worker at work",
        )
        claimers = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "runlane",
                    "worker",
                    "--dsn",
                    empty_db_dsn,
                    "--worker-id",
                    name,
                    "--lane",
                    "interactive",
                    "--lane",
                    "background",
                    "--agent",
                    "flaky_agent:agent",
                    "--no-maintenance",
                    "--scan-interval",
                    "1",
                    "--claim-batch",
                    "1",
                ],
                stdout=logs[name],
                stderr=subprocess.STDOUT,
                env={
                    **os.environ,
                    "PYTHONPATH": str(HERE),
                    "RUNLANE_FLAKY_SEED": str(seed),
                    "RUNLANE_FLAKY_FAIL_RATE": "0.1",
                    "RUNLANE_FLAKY_WORK": "0.01",
                },
            )
            for seed, name in enumerate(("direct-1", "direct-2"))
        ]
        try:
            # New runs keep arriving by both paths while both generations work.
            old_path, new_path, woken = [], [], {}
            for batch in range(20):
                for i in range(10):
                    agent = BACKGROUND_AGENTS[(batch + i) % 8]
                    lane = "interactive" if i % 3 == 0 else "background"
                    old_path.append(
                        legacy_run(
                            conn,
                            agent if lane == "background" else "chat",
                            lane,
                            "interactive" if lane == "interactive" else "manual",
                        )
                    )
                    wake_in = 1.0 if i == 5 else None
                    run_id = direct_run(conn, "boxed" if i == 7 else agent, lane, wake_in)
                    new_path.append(run_id)
                    if wake_in:
                        woken[run_id] = conn.execute(
                            "select wake_at from runlane.runs where run_id = %s", (run_id,)
                        ).fetchone()[0]
                time.sleep(0.1)
            all_runs = [r for k, ids in seeded.items() if k != "history" for r in ids]
            all_runs += old_path + new_path
            assert len(all_runs) >= 500

            # Contract refused while the older worker lives, and it says why.
            wait_until(
                conn,
                "select exists (select 1 from runlane.workers where worker_id = 'legacy-1')",
                "legacy worker registered",
            )
            refused = refusal(empty_db_dsn)
            assert refused.sqlstate == "RL009"
            assert "live legacy workers: legacy-1 (generation 1" in str(refused)
            status = upgrade_status(conn)
            assert status[0]["blocker"] == "live legacy workers"
            assert status[0]["detail"].startswith("legacy-1 (generation 1")

            # The older worker catches up with the due deliveries, then stops gracefully.
            wait_until(
                conn,
                """
                select not exists (select 1 from runlane.run_jobs
                                   where task = 'run_agent' and locked_at is null
                                     and run_at <= now() and attempts < max_attempts)
            """,
                "legacy worker caught up",
            )
            assert stop(legacy) == 0
            assert conn.execute(
                "select stopped_at is not null from runlane.workers where worker_id = 'legacy-1'"
            ).fetchone()[0]

            # Direct dispatch finishes everything; the leftover deliveries drain.
            wait_until(
                conn,
                "select not exists (select 1 from runlane.runs "
                "where state in ('queued', 'running'))",
                "every run finished",
            )
            for proc in claimers:
                assert stop(proc) == 0
        finally:
            for proc in (legacy, *claimers):
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            logs_open.close()

        conn.execute("select runlane.drain_legacy_deliveries(1000)")
        assert upgrade_status(conn) == []

        # --- every run executed exactly once per attempt, none lost, retry times honoured
        runs = {
            r: (state, attempts)
            for r, state, attempts in conn.execute(
                "select run_id, state, attempts from runlane.runs where run_id = any(%s)",
                (all_runs,),
            ).fetchall()
        }
        assert set(runs) == set(all_runs), "no run lost"
        assert {s for s, _ in runs.values()} <= {"succeeded", "failed"}
        outputs = dict(
            conn.execute(
                """
            select run_id, array_agg(attempt order by attempt) from runlane.run_outputs
            where run_id = any(%s) group by run_id
        """,
                (all_runs,),
            ).fetchall()
        )
        for run_id, (state, attempts) in runs.items():
            assert outputs[run_id] == list(range(1, attempts + 1)), (
                f"run {run_id}: one output per attempt"
            )
            assert state == "succeeded" or attempts == 3
        prior = {r: 1 for r in seeded["future_retry"] + seeded["due_retry"]}
        claims = dict(
            conn.execute(
                """
            select run_id, count(*) from runlane.run_events
            where event = 'run.claimed' and run_id = any(%s) group by run_id
        """,
                (all_runs,),
            ).fetchall()
        )
        assert {r: claims.get(r, 0) + prior.get(r, 0) for r in all_runs} == {
            r: a for r, (_, a) in runs.items()
        }, "attempts == claims (both generations)"
        by_generation = dict(
            conn.execute("""
            select coalesce(detail ->> 'generation', '2'), count(*) from runlane.run_events
            where event = 'run.claimed' group by 1
        """).fetchall()
        )
        print("claims by generation", by_generation)
        assert by_generation.get("1", 0) > 50 and by_generation.get("2", 0) > 50

        early = conn.execute(
            """
            with claimed as (
                select
                    c.run_id,
                    c.created_at,
                    (select (e.detail ->> 'wake_at')::timestamptz
                     from runlane.run_events as e
                     where e.run_id = c.run_id and e.event_id < c.event_id
                       and e.event in ('run.retry_scheduled', 'run.released')
                     order by e.event_id desc limit 1) as scheduled_wake,
                    row_number() over (partition by c.run_id order by c.event_id) as nth
                from runlane.run_events as c
                where c.event = 'run.claimed'
            )
            select run_id, nth, created_at, scheduled_wake from claimed
            where created_at < scheduled_wake
               or (nth = 1 and created_at < (%s::jsonb ->> run_id::text)::timestamptz)
        """,
            (
                psycopg.types.json.Jsonb(
                    {str(r): w.isoformat() for r, w in {**pending_retry, **woken}.items()}
                ),
            ),
        ).fetchall()
        assert early == [], "no attempt started before its wake time"
        retried = conn.execute(
            "select count(*) from runlane.run_events where event = 'run.retry_scheduled'"
        ).fetchone()[0]
        assert retried > 0

        # Unmarked older timer firings were executed, never cancelled.
        assert {runs[r][0] for r in seeded["unmarked_timer"]} <= {"succeeded", "failed"}

        # --- the bounded redundant pass on the data the rehearsal left
        conn.execute("""
            insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt, model,
                                      timer_routine, timer_occurrence, timer_timezone)
            select a.org_id, a.agent_id, 'background', 'scheduled', a.thread_id, a.prompt,
                   a.model, a.agent_id, date_trunc('hour', now()) - make_interval(hours => h),
                   'UTC'
            from runlane.agents as a, generate_series(1, 5) as h
            where a.agent_id = 'sched'
        """)
        unmarked = direct_run(conn, "bg-0", "background", 3600)  # one pending older firing
        conn.execute("update runlane.runs set trigger = 'scheduled' where run_id = %s", (unmarked,))
        status = upgrade_status(conn)
        assert status == [
            {
                "blocker": "agents with more than one unfinished background run",
                "detail": "sched (5 unfinished)",
            },
            {"blocker": "redundant timer runs left", "detail": "sched (4 surplus)"},
        ]
        refused = refusal(empty_db_dsn)
        assert refused.sqlstate == "RL009"
        assert refused.diag.message_primary == "contract step 0003 refused: " + "; ".join(
            f"{row['blocker']}: {row['detail']}" for row in status
        )
        passes = [
            conn.execute("select runlane.cancel_redundant_timer_runs(2)").fetchone()[0]
            for _ in range(3)
        ]
        assert passes == [2, 2, 0], "at most p_limit per call"
        kept = conn.execute("""
            select count(*) filter (where state = 'queued'),
                   count(*) filter (where state = 'canceled' and reason = 'redundant'),
                   max(timer_occurrence) filter (where state = 'queued')
                       = max(timer_occurrence)
            from runlane.runs where timer_routine = 'sched'
        """).fetchone()
        assert kept == (1, 4, True), "keeps one (the latest occurrence), rows stay"
        assert (
            conn.execute("""
            select count(*) from runlane.run_events as e
            join runlane.runs as r using (run_id)
            where r.timer_routine = 'sched' and e.event = 'run.finished'
              and e.detail ->> 'reason' = 'redundant'
        """).fetchone()[0]
            == 4
        ), "terminal events stay"
        assert (
            conn.execute(
                "select state from runlane.runs where run_id = %s", (unmarked,)
            ).fetchone()[0]
            == "queued"
        ), "unmarked firing preserved"
        assert upgrade_status(conn) == []

        # --- contract applies, and everything is still consistent
        with psycopg.connect(empty_db_dsn) as mconn:
            # The contract, then the migrations added after it (applied in order).
            assert [m.version for m in migrate(mconn)] == [
                m.version for m in migrations() if m.version >= 3
            ]
        assert conn.execute(
            "select to_regprocedure('runlane.tg_runs__legacy_compat()') is null "
            "and to_regclass('runlane.runs_one_unfinished_background_run_per_agent') is not null"
        ).fetchone()[0]
        assert (
            conn.execute(
                "select count(*) from runlane.computer_leases where expires_at > now()"
            ).fetchone()[0]
            == 0
        )
        assert (
            conn.execute(
                "select count(*) from runlane.run_jobs where task = 'run_agent'"
            ).fetchone()[0]
            == 0
        )
        assert (
            conn.execute("select count(*) from runlane.runs where state = 'running'").fetchone()[0]
            == 0
        )
        assert (
            conn.execute(
                "select count(*) from runlane.runs where run_id = any(%s)", (seeded["history"],)
            ).fetchone()[0]
            == 10
        ), "history kept"
