"""runlane on a Citus cluster: a coordinator and two worker nodes on loopback, started as
the unprivileged user with the Citus that `make setup` builds. Every migration and
function applies to the coordinator as it does to plain PostgreSQL, and a real worker
process drains chat runs there (the tables are the coordinator's own: nothing is
distributed by `runlane migrate`). In a second database the schema distributes: every
organization's table by org_id into one co-location group, the global ones as reference
tables, which Citus accepts only because every key and foreign key includes org_id."""

from __future__ import annotations

import psycopg
import pytest
from worker_helpers import WorkerProcess, wait_until

from runlane.migrate import install_functions, migrate, migrations
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


# The steps that distribute the schema, in the order Citus needs: the organizations'
# tables by org_id into one co-location group (runs and messages point at each other:
# their key is added once both are distributed), then the global ones as reference
# tables (a reference table made first would turn the whole key-connected group into
# citus-local tables).
DISTRIBUTED = (
    "platform_settings",
    "org_claim_locks",
    "users",
    "agents",
    "runs",
    "messages",
    "threads",
    "run_outputs",
    "run_events",
    "charges",
    "idempotency_keys",
    "charge_buckets",
)
REFERENCE = (
    "agent_orgs",
    "user_orgs",
    "computer_leases",
    "api_logins",
    "api_scopes",
    "stream_keys",
    "leader",
    "workers",
    "claim_receipts",
)


def distribute(conn: psycopg.Connection) -> None:
    conn.execute("set citus.enable_unsafe_triggers = on")  # (agents, users, organizations)
    for table in (
        "threads",
        "run_outputs",
        "run_events",
        "idempotency_keys",
        "charge_buckets",
        "computer_leases",
    ):
        conn.execute(f"drop trigger {table}_org_id on runlane.{table}")
    conn.execute("alter table runlane.api_logins drop constraint api_logins_org_id_fkey")
    conn.execute("alter table runlane.api_scopes drop constraint api_scopes_org_id_fkey")
    conn.execute("alter table runlane.computer_leases drop constraint computer_leases_run_id_fkey")
    conn.execute("alter table runlane.runs drop constraint runs_source_message_of_run_fk")
    for table in DISTRIBUTED:
        conn.execute(
            "select create_distributed_table(%s, 'org_id', colocate_with => %s)",
            (
                f"runlane.{table}",
                "none" if table == "platform_settings" else "runlane.platform_settings",
            ),
        )
    conn.execute(
        "alter table runlane.runs add constraint runs_source_message_of_run_fk "
        "foreign key (run_id, source_message_id, org_id) "
        "references runlane.messages (run_id, message_id, org_id)"
    )
    for table in REFERENCE:
        conn.execute("select create_reference_table(%s)", (f"runlane.{table}",))


def test_the_organizations_tables_distribute_by_org_id_into_one_colocation_group(citus_nodes):
    coordinator = citus_nodes[0]
    for node in citus_nodes:
        with psycopg.connect(node.dsn, autocommit=True) as conn:
            conn.execute("create database sharded")
        with psycopg.connect(node.dsn_for("sharded"), autocommit=True) as conn:
            conn.execute("create extension citus")
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        conn.execute("select citus_set_coordinator_host('127.0.0.1', %s)", (coordinator.port,))
        for node in citus_nodes[1:]:
            conn.execute("select citus_add_node('127.0.0.1', %s)", (node.port,))
        migrate(conn)
        distribute(conn)
        tables = conn.execute(
            "select table_name::text, citus_table_type, distribution_column, colocation_id "
            "from citus_tables where table_name::text like 'runlane.%'"
        ).fetchall()
        distributed = {t: (col, group) for t, kind, col, group in tables if kind == "distributed"}
        assert set(distributed) == {f"runlane.{t}" for t in DISTRIBUTED}
        assert {col for col, _ in distributed.values()} == {"org_id"}
        assert len({group for _, group in distributed.values()}) == 1
        assert {t for t, kind, _, _ in tables if kind == "reference"} == {
            f"runlane.{t}" for t in REFERENCE
        }
        # Every unique key and foreign key survived: Citus accepts only those with org_id.
        conn.execute("select runlane.put_org('org-s')")
        conn.execute("select runlane.put_user('user-s', 'org-s')")
        plan = "\n".join(
            row[0]
            for row in conn.execute(
                "explain select * from runlane.users where org_id = 'org-s' and user_id = 'user-s'"
            ).fetchall()
        )
        assert "Task Count: 1" in plan  # one organization's row: one node


def test_the_management_calls_run_on_the_distributed_schema(citus_nodes):
    """put_org, put_user, put_agent (created, patched, scheduled) and get_agent, with the
    functions installed after the tables were distributed (so Citus propagates them), and
    an agent id of one organization refused to another: the namespace holds across nodes."""
    coordinator = citus_nodes[0]
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        conn.execute("set citus.enable_unsafe_triggers = on")  # (as distribute() does)
        install_functions(conn)
        conn.execute("select runlane.put_org('org-t')")
        conn.execute("select runlane.put_user('user-t', 'org-t')")
        conn.execute(
            "select runlane.put_agent('agent-t', "
            '\'{"org_id": "org-t", "owner_id": "user-t", "model": "echo"}\')'
        )
        patch = '{"prompt": "Hello", "schedule": "daily at 09:00"}'
        conn.execute("select runlane.put_agent('agent-t', %s)", (patch,))
        agent = conn.execute("select runlane.get_agent('agent-t')").fetchone()[0]
        assert (agent["org_id"], agent["prompt"], agent["schedule"]) == (
            "org-t",
            "Hello",
            "daily at 09:00",
        )
        assert agent["next_run_at"] is not None  # the schedule's next slot
        conn.execute("select runlane.put_org('org-u')")
        conn.execute("select runlane.put_user('user-u', 'org-u')")
        with pytest.raises(psycopg.errors.UniqueViolation, match="agent id 'agent-t' is taken"):
            conn.execute(
                "select runlane.put_agent('agent-t', "
                '\'{"org_id": "org-u", "owner_id": "user-u"}\')'
            )
