"""Schema 0002 with both generations: the compatibility trigger's precedence both ways, and
upgrade_status agreeing with the contract step's guard (0003) blocker for blocker.

pgTAP files run at the latest schema, where the trigger is gone, so these tests use a
database migrated `--to 2` and the older generation's real statements (sql/legacy/).
"""

from __future__ import annotations

import psycopg
import pytest

from runlane.legacy import statement
from runlane.migrate import migrate
from runlane.upgrade import upgrade_status

SEED = [
    "insert into runlane.platform_settings (org_id) values ('org-c')",
    "insert into runlane.users (user_id, org_id) values ('owner-c', 'org-c')",
    """insert into runlane.agents (agent_id, org_id, owner_id, model, prompt, thread_id,
                                  computer_id)
       values ('agent-c', 'org-c', 'owner-c', 'm', 'Work', 'thread-c', 'box-c'),
              ('agent-d', 'org-c', 'owner-c', 'm', 'Work', 'thread-d', null)""",
]


@pytest.fixture
def expanded(empty_db_dsn):
    with psycopg.connect(empty_db_dsn, autocommit=True) as conn:
        migrate(conn, to=2)
        for sql in SEED:
            conn.execute(sql)
        yield conn


def legacy(conn, name: str, **params):
    return conn.execute(statement(name), params).fetchone()


def queued_run(conn, agent_id: str = "agent-c", wake_at: str = "null") -> int:
    return conn.execute(
        f"""
        insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt, model,
                                  computer_id, wake_at)
        select org_id, agent_id, 'background', 'manual', thread_id, prompt, model, computer_id,
               {wake_at}
        from runlane.agents where agent_id = %s returning run_id
    """,
        (agent_id,),
    ).fetchone()[0]


def claim(conn, worker: str = "new-1") -> tuple[int, int]:
    return conn.execute(
        "select run_id, fence from runlane.claim_runs(%s, array['background'])", (worker,)
    ).fetchone()


def run_row(conn, run_id: int) -> dict:
    with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
        return cur.execute("select * from runlane.runs where run_id = %s", (run_id,)).fetchone()


# --- older writes translated by the trigger ------------------------------------------------


def test_an_older_claim_takes_a_fence_a_lease_and_the_computer(expanded):
    run_id = queued_run(expanded)
    assert legacy(expanded, "start_run", run_id=run_id) is not None
    run = run_row(expanded, run_id)
    assert (run["state"], run["fence"], run["attempts"], run["lease_owner"]) == (
        "running",
        1,
        1,
        "legacy",
    )
    assert expanded.execute(
        "select run_id, fence from runlane.computer_leases where computer_id = 'box-c'"
    ).fetchone() == (run_id, 1)
    assert expanded.execute(
        "select detail from runlane.run_events where run_id = %s and event = 'run.claimed'",
        (run_id,),
    ).fetchone()[0] == {"fence": 1, "attempt": 1, "generation": 1}


def test_an_older_heartbeat_extends_its_lease(expanded):
    run_id = queued_run(expanded)
    legacy(expanded, "start_run", run_id=run_id)
    expanded.execute(
        "update runlane.runs set lease_expires_at = now() + interval '1 second' where run_id = %s",
        (run_id,),
    )
    legacy(expanded, "heartbeat", run_id=run_id)
    assert expanded.execute(
        """
        select r.lease_expires_at >= now() + interval '59 seconds'
           and cl.expires_at = r.lease_expires_at
        from runlane.runs as r join runlane.computer_leases as cl using (run_id)
        where r.run_id = %s""",
        (run_id,),
    ).fetchone()[0]


def test_an_older_requeue_is_stamped_with_that_generations_backoff(expanded):
    run_id = queued_run(expanded)
    job_id = legacy(expanded, "enqueue_run_delivery", run_id=run_id)[0]
    assert legacy(expanded, "take_delivery", worker_id="old-1")[0] == job_id
    legacy(expanded, "start_run", run_id=run_id)
    with expanded.transaction():
        assert legacy(expanded, "requeue_run", run_id=run_id, error="x")[1] == "queued"
        legacy(expanded, "fail_delivery", job_id=job_id, worker_id="old-1", error="x")
        stamped, same_as_job = expanded.execute(
            """
            select r.wake_at = now() + exp(1) * interval '1 second', r.wake_at = j.run_at
            from runlane.runs as r, runlane.run_jobs as j
            where r.run_id = %s and j.id = %s""",
            (run_id, job_id),
        ).fetchone()
    assert stamped, "wake_at = now() + exp(least(attempts, 10)) seconds"
    assert same_as_job, "the run wakes exactly when its delivery is due again"
    run = run_row(expanded, run_id)
    assert (run["lease_owner"], run["lease_expires_at"]) == (None, None)
    assert expanded.execute("select count(*) from runlane.computer_leases").fetchone()[0] == 0


def test_an_older_completion_closes_the_run_and_frees_the_computer(expanded):
    run_id = queued_run(expanded)
    legacy(expanded, "start_run", run_id=run_id)
    assert legacy(expanded, "complete_run", run_id=run_id) is not None
    run = run_row(expanded, run_id)
    assert (run["state"], run["lease_owner"]) == ("succeeded", None)
    assert run["finished_at"] is not None
    assert expanded.execute("select count(*) from runlane.computer_leases").fetchone()[0] == 0
    assert (
        expanded.execute(
            "select detail ->> 'outcome' from runlane.run_events "
            "where run_id = %s and event = 'run.finished'",
            (run_id,),
        ).fetchone()[0]
        == "succeeded"
    )


# --- new-generation schedules win ----------------------------------------------------------


def test_a_new_release_keeps_its_explicit_wake_time_even_when_equal_to_the_old_value(expanded):
    run_id = queued_run(expanded, wake_at="now() - interval '1 minute'")
    old_wake = run_row(expanded, run_id)["wake_at"]
    fence = claim(expanded)[1]
    expanded.execute("select runlane.release_run(%s, %s, %s)", (run_id, fence, old_wake))
    run = run_row(expanded, run_id)
    assert (run["state"], run["wake_at"]) == ("queued", old_wake)


def test_a_new_release_without_a_wake_time_is_not_stamped(expanded):
    run_id = queued_run(expanded)
    fence = claim(expanded)[1]
    expanded.execute("select runlane.release_run(%s, %s)", (run_id, fence))
    assert run_row(expanded, run_id)["wake_at"] is None


def test_a_new_retry_keeps_its_delay_even_when_it_equals_the_wake_time_already_set(expanded):
    run_id = queued_run(expanded)
    with expanded.transaction():
        fence = claim(expanded)[1]
        expanded.execute(
            "update runlane.runs set wake_at = now() + interval '5 seconds' where run_id = %s",
            (run_id,),
        )
        assert (
            expanded.execute(
                "select runlane.retry_run(%s, %s, 'x', interval '5 seconds')", (run_id, fence)
            ).fetchone()[0]
            == "queued"
        )
        assert expanded.execute(
            "select wake_at = now() + interval '5 seconds' from runlane.runs where run_id = %s",
            (run_id,),
        ).fetchone()[0]


def test_an_older_worker_cannot_start_a_run_before_its_new_wake_time(expanded):
    run_id = queued_run(expanded)
    fence = claim(expanded)[1]
    expanded.execute("select runlane.retry_run(%s, %s, 'x', interval '1 hour')", (run_id, fence))
    assert legacy(expanded, "start_run", run_id=run_id) is None
    run = run_row(expanded, run_id)
    assert (run["state"], run["attempts"], run["fence"]) == ("queued", 1, 1)


def test_an_older_worker_fenced_out_cannot_requeue_or_complete_a_new_workers_run(expanded):
    run_id = queued_run(expanded)
    legacy(expanded, "start_run", run_id=run_id)
    # Its lease lapsed; a new worker reclaimed the run.
    expanded.execute(
        "update runlane.runs set state = 'queued', lease_owner = null where run_id = %s", (run_id,)
    )
    expanded.execute("delete from runlane.computer_leases")
    fence = claim(expanded, "new-2")[1]
    assert legacy(expanded, "requeue_run", run_id=run_id, error="x") is None
    assert legacy(expanded, "complete_run", run_id=run_id) is None
    run = run_row(expanded, run_id)
    assert (run["state"], run["lease_owner"], run["fence"]) == ("running", "new-2", fence)
    expanded.execute("select runlane.finish_run(%s, %s, 'succeeded')", (run_id, fence))


# --- upgrade_status and the contract guard agree -------------------------------------------


def contract_refusal(conn) -> psycopg.Error | None:
    dsn = conn.info.dsn
    with psycopg.connect(dsn) as mconn:
        try:
            migrate(mconn)
        except psycopg.Error as exc:
            return exc
    return None


def expected_message(status: list[dict]) -> str:
    return "contract step 0003 refused: " + "; ".join(
        f"{row['blocker']}: {row['detail']}" for row in status
    )


def test_upgrade_status_lists_what_the_contract_step_refuses_with(expanded):
    conn = expanded
    legacy(conn, "register_worker", worker_id="old-1", host="h", pid=1)
    for worker_id, generation, deliveries, seen in (
        ("old-stale", 1, "legacy", "3 minutes"),
        ("new-1", 2, "direct", "0 seconds"),
    ):
        conn.execute(
            "insert into runlane.workers (worker_id, generation, deliveries, "
            "heartbeat_at) values (%s, %s, %s, now() - %s::interval)",
            (worker_id, generation, deliveries, seen),
        )
    first = queued_run(conn, "agent-d")
    job_id = legacy(conn, "enqueue_run_delivery", run_id=first)[0]
    spent = legacy(conn, "enqueue_run_delivery", run_id=first)[0]
    conn.execute("update runlane.run_jobs set attempts = max_attempts where id = %s", (spent,))
    conn.execute("""
        insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt, model,
                                  timer_routine, timer_occurrence, timer_timezone)
        select org_id, agent_id, 'background', 'scheduled', thread_id, prompt, model,
               agent_id, now() - make_interval(hours => h), 'UTC'
        from runlane.agents, generate_series(1, 3) as h where agent_id = 'agent-c'
    """)

    status = upgrade_status(conn)
    assert [row["blocker"] for row in status] == [
        "live legacy workers",
        "pending legacy run deliveries",
        "agents with more than one unfinished background run",
        "redundant timer runs left",
    ]
    assert status[0]["detail"].startswith("old-1 (generation 1, last seen ")
    assert "old-stale" not in status[0]["detail"] and "new-1" not in status[0]["detail"]
    assert status[1]["detail"] == f"job {job_id} for run {first}"
    assert status[2]["detail"] == "agent-c (3 unfinished)"
    assert status[3]["detail"] == "agent-c (2 surplus)"
    refused = contract_refusal(conn)
    assert refused.sqlstate == "RL009"
    assert refused.diag.message_primary == expected_message(status)
    assert "cancel_redundant_timer_runs" in refused.diag.message_hint

    # Clear the blockers one at a time: the two keep agreeing.
    legacy(conn, "worker_stopped", worker_id="old-1")
    conn.execute("select runlane.cancel_redundant_timer_runs(10)")
    status = upgrade_status(conn)
    assert [row["blocker"] for row in status] == ["pending legacy run deliveries"]
    assert contract_refusal(conn).diag.message_primary == expected_message(status)
    run_id, fence = claim(conn)  # agent-d's run, by direct dispatch
    assert run_id == first
    conn.execute("select runlane.finish_run(%s, %s, 'succeeded')", (run_id, fence))
    # Its pending delivery and the spent one are not needed any more.
    assert conn.execute("select runlane.drain_legacy_deliveries()").fetchone()[0] == 2
    assert upgrade_status(conn) == []
    assert contract_refusal(conn) is None, "the contract step applies once nothing blocks it"
    assert (
        conn.execute("select count(*) from runlane.schema_migrations where version = 3").fetchone()[
            0
        ]
        == 1
    )
