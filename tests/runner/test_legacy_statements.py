"""The previous generation's statements run against the latest schema (procrastinate's CI
runs its last release against the new schema), and Graphile's remaining role: a scheduled
job delivered through run_jobs creates its run through create_run (direct dispatch)."""

from __future__ import annotations

import json
from importlib import resources

import psycopg
from psycopg.rows import dict_row

from runlane.legacy import LegacyWorker, statement

LEGACY_DIR = resources.files("runlane") / "sql" / "legacy"


def test_every_legacy_statement_parses_and_runs_against_the_latest_schema(conn):
    conn.execute("select runlane_test.agent('agent-l')")
    ran: set[str] = set()

    def run(name: str, **params):
        ran.add(name)
        with conn.cursor(row_factory=dict_row) as cur:
            cur.execute(statement(name), params)
            return cur.fetchone()

    assert run("register_worker", worker_id="old-1", host="h", pid=1)["worker_id"] == "old-1"
    assert run("worker_heartbeat", worker_id="old-1") is not None
    run_id = run("create_run", agent_id="agent-l", lane="background", trigger="manual")["run_id"]
    job_id = run("enqueue_run_delivery", run_id=run_id)["id"]
    job = run("take_delivery", worker_id="old-1")
    assert (job["id"], job["payload"], job["attempts"]) == (job_id, {"run_id": run_id}, 1)
    assert run("start_run", run_id=run_id)["attempts"] == 1
    assert run("heartbeat", run_id=run_id) is not None
    assert run("append_output", run_id=run_id, attempt=1, kind="text", body="b") is not None
    assert run("requeue_run", run_id=run_id, error="x")["state"] == "queued"
    assert run("fail_delivery", job_id=job_id, worker_id="old-1", error="x") is not None
    conn.execute("update runlane.run_jobs set run_at = now() where id = %s", (job_id,))
    assert run("take_delivery", worker_id="old-1")["attempts"] == 2
    assert run("start_run", run_id=run_id)["attempts"] == 2
    assert run("complete_run", run_id=run_id) is not None
    assert run("complete_delivery", job_id=job_id) is not None
    assert run("worker_stopped", worker_id="old-1") is not None

    files = {
        entry.name.removesuffix(".sql")
        for entry in LEGACY_DIR.iterdir()
        if entry.name.endswith(".sql")
    }
    assert ran == files, "every statement of sql/legacy/ is exercised"


def test_the_legacy_loop_delivers_against_the_latest_schema(conn, db_dsn):
    conn.execute("select runlane_test.agent('agent-l')")
    run_id = conn.execute(
        statement("create_run"), {"agent_id": "agent-l", "lane": "background", "trigger": "manual"}
    ).fetchone()[0]
    conn.execute(statement("enqueue_run_delivery"), {"run_id": run_id})
    gone = conn.execute(
        statement("create_run"),
        {"agent_id": "agent-l", "lane": "interactive", "trigger": "interactive"},
    ).fetchone()[0]
    conn.execute("update runlane.runs set state = 'canceled' where run_id = %s", (gone,))
    conn.execute(statement("enqueue_run_delivery"), {"run_id": gone})
    with psycopg.connect(db_dsn, autocommit=True) as wconn:
        worker = LegacyWorker(wconn, "old-2")
        worker.register()
        assert worker.deliver_one() and worker.deliver_one() and not worker.deliver_one()
    assert conn.execute(
        "select state, attempts from runlane.runs where run_id = %s", (run_id,)
    ).fetchone() == ("succeeded", 1)
    assert conn.execute(
        "select state, attempts from runlane.runs where run_id = %s", (gone,)
    ).fetchone() == ("canceled", 0), "dropped, never executed"
    assert (
        conn.execute(
            "select count(*) from runlane.run_outputs where run_id = %s", (gone,)
        ).fetchone()[0]
        == 0
    )
    assert conn.execute("select count(*) from runlane.run_jobs").fetchone()[0] == 0


# How a job runner takes a scheduled/maintenance job (Graphile get_job, any task but runs).
TAKE_JOB = """
    with next_job as (
        select j.id from runlane.run_jobs as j
        where j.task = %(task)s and j.locked_at is null and j.run_at <= now()
          and j.attempts < j.max_attempts
        order by j.run_at, j.id limit 1 for update skip locked
    )
    update runlane.run_jobs as jobs
    set attempts = jobs.attempts + 1, locked_at = now(), locked_by = %(worker)s
    from next_job where jobs.id = next_job.id
    returning jobs.id, jobs.payload
"""
CREATE_RUN = (
    "select runlane.create_run(p_agent_id => %(agent_id)s::text, "
    "p_trigger => %(trigger)s::text, p_prompt => %(prompt)s::text)"
)


def test_a_job_delivered_scheduled_job_creates_its_run_through_create_run(conn):
    conn.execute("select runlane_test.agent('agent-j')")
    for _ in range(2):
        conn.execute(
            "insert into runlane.run_jobs (task, payload) values ('create_run', %s)",
            (
                json.dumps(
                    {"agent_id": "agent-j", "trigger": "scheduled", "prompt": "Weekly report"}
                ),
            ),
        )
    created = []
    while True:
        with conn.transaction():
            job = conn.execute(TAKE_JOB, {"task": "create_run", "worker": "jobs-1"}).fetchone()
            if job is None:
                break
            created.append(conn.execute(CREATE_RUN, job[1]).fetchone()[0])
            conn.execute("delete from runlane.run_jobs where id = %s", (job[0],))
        conn.execute("select runlane.publish_run(%s)", (created[-1],))
    rows = conn.execute(
        """
        select state, reason, lane, trigger, prompt, timer_routine from runlane.runs
        where run_id = any(%s) order by run_id""",
        (created,),
    ).fetchall()
    assert rows == [
        ("queued", None, "background", "scheduled", "Weekly report", None),
        ("skipped", "already_running", "background", "scheduled", "Weekly report", None),
    ], "the direct dispatch path and its gates, never a legacy delivery"
    assert conn.execute("select count(*) from runlane.run_jobs").fetchone()[0] == 0
    run_id, fence = conn.execute(
        "select run_id, fence from runlane.claim_runs('w', array['background'])"
    ).fetchone()
    assert run_id == created[0]
