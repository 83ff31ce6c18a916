"""runlane on a Citus cluster: a coordinator and two worker nodes on loopback, started as
the unprivileged user with the Citus that `make setup` builds. Every migration and
function applies to the coordinator as it does to plain PostgreSQL, and a real worker
process drains chat runs there (the tables are the coordinator's own: nothing is
distributed by `runlane migrate`)."""

from __future__ import annotations

import psycopg
import pytest
from worker_helpers import WorkerProcess, wait_until

from runlane.migrate import migrate, migrations
from runlane.pgcluster import LocalCluster

DATABASE = "runlane"
CITUS = {"shared_preload_libraries": "citus", "max_worker_processes": "16"}


@pytest.fixture(scope="module")
def citus_nodes():
    """[coordinator, worker, worker], each with the citus extension in DATABASE, the two
    workers registered with the coordinator."""
    nodes = [LocalCluster(settings=CITUS) for _ in range(3)]
    try:
        for node in nodes:
            node.start()
            with psycopg.connect(node.dsn, autocommit=True) as conn:
                conn.execute(f"create database {DATABASE}")
            with psycopg.connect(node.dsn_for(DATABASE), autocommit=True) as conn:
                conn.execute("create extension citus")
        coordinator = nodes[0]
        with psycopg.connect(coordinator.dsn_for(DATABASE), autocommit=True) as conn:
            conn.execute("select citus_set_coordinator_host('127.0.0.1', %s)", (coordinator.port,))
            for node in nodes[1:]:
                conn.execute("select citus_add_node('127.0.0.1', %s)", (node.port,))
        yield nodes
    finally:
        for node in nodes:
            node.destroy()


def test_every_migration_and_function_applies_on_a_citus_coordinator(citus_nodes):
    coordinator = citus_nodes[0]
    with psycopg.connect(coordinator.dsn_for(DATABASE), autocommit=True) as conn:
        active = conn.execute(
            "select count(*) from pg_dist_node where isactive and noderole = 'primary'"
        ).fetchone()[0]
        assert active == 3  # the coordinator and two workers
        migrate(conn)
        applied = conn.execute("select max(version) from runlane.schema_migrations").fetchone()
        assert applied[0] == max(m.version for m in migrations())
        assert (
            conn.execute(
                "select count(*) from pg_proc where pronamespace = 'runlane'::regnamespace "
                "and proname = 'send_message'"
            ).fetchone()[0]
            == 1
        )
        assert migrate(conn) == []  # a second run changes nothing


def test_a_worker_process_drains_chat_runs_on_the_coordinator(citus_nodes):
    coordinator = citus_nodes[0]
    dsn = coordinator.dsn_for(DATABASE)
    with psycopg.connect(dsn, autocommit=True) as conn:
        migrate(conn)
        conn.execute("""select runlane.put_org('org-c')""")
        conn.execute("""select runlane.put_user('user-c', 'org-c')""")
        conn.execute(
            """select runlane.put_agent('agent-c',
                 '{"org_id": "org-c", "owner_id": "user-c", "model": "echo"}')"""
        )
        sent = [
            conn.execute(
                "select run_id, disposition from runlane.send_message('agent-c', %s, 'hello')",
                (f"thread-{i}",),
            ).fetchone()
            for i in range(5)
        ]
        assert [disposition for _, disposition in sent] == ["created"] * 5
        worker = WorkerProcess(dsn, "--no-maintenance", "--scan-interval", "0.5")
        try:
            run_ids = [run_id for run_id, _ in sent]
            wait_until(
                lambda: (
                    conn.execute(
                        "select count(*) from runlane.runs where run_id = any(%s) "
                        "and state = 'succeeded'",
                        (run_ids,),
                    ).fetchone()[0]
                    == len(run_ids)
                ),
                what="every chat run succeeded on the coordinator",
            )
            replies = conn.execute(
                "select count(*) from runlane.run_outputs where run_id = any(%s)", (run_ids,)
            ).fetchone()[0]
            assert replies >= len(run_ids)
        finally:
            worker.close()
        worker.check_logs()
