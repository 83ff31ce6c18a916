"""runlane on a Citus cluster: a coordinator and two worker nodes on loopback, started as
the unprivileged user with the Citus that `make setup` builds. Every migration and
function applies to the coordinator as it does to plain PostgreSQL, and a real worker
process drains chat runs there (the tables are the coordinator's own: `runlane migrate`
distributes nothing). In a second database `runlane migrate --citus` distributes the
schema: every organization's table by org_id into one co-location group, the global ones
as reference tables, which Citus accepts only because every key and foreign key includes
org_id; there the calls of one organization reach the one node that holds it."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import subprocess
import sys
import threading
import time
from contextlib import aclosing

import psycopg
import pytest
from psycopg.types.json import Jsonb
from worker_helpers import WorkerProcess, wait_until

import runlane
from runlane.citus import DISTRIBUTED, REFERENCE
from runlane.migrate import migrate, migrations
from runlane.pgcluster import LocalCluster

DATABASE = "runlane"
# Commits are acknowledged once written (fsync stays off: the nodes' crashes are their
# processes', never the machine's), so a node killed at once keeps what it acknowledged.
CITUS = {
    "shared_preload_libraries": "citus",
    "max_worker_processes": "16",
    "synchronous_commit": "on",
}


def cli(*args: str, dsn: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "runlane", *args, "--dsn", dsn],
        capture_output=True,
        text=True,
        timeout=300,
    )


def node_of(conn: psycopg.Connection, org_id: str) -> int:
    """The port of the worker node that holds an organization's rows."""
    return conn.execute(
        "select n.nodeport from pg_dist_placement as p join pg_dist_node as n using (groupid) "
        "where p.shardid = get_shard_id_for_distribution_column('runlane.runs', %s::text)",
        (org_id,),
    ).fetchone()[0]


def citus_log(
    conn: psycopg.Connection, statement: str, params=(), notices: list | None = None
) -> tuple[list, list]:
    """The statement's rows, and Citus's command log for it: one (message, detail) per
    command run on this server ("executing the command locally") or sent to another
    ("issuing", the detail naming the server), appended to `notices` when given (so a
    caller keeps the log of a statement that fails)."""
    notices = [] if notices is None else notices

    def keep(diag) -> None:
        notices.append((diag.message_primary or "", diag.message_detail or ""))

    conn.add_notice_handler(keep)
    conn.execute("set citus.log_remote_commands = on")
    conn.execute("set citus.log_local_commands = on")
    try:
        rows = conn.execute(statement, params).fetchall()
    finally:
        conn.execute("reset citus.log_remote_commands")
        conn.execute("reset citus.log_local_commands")
        conn.remove_notice_handler(keep)
    return rows, notices


def counted(notices: list) -> dict:
    """How many logged commands ran on this server and how many were sent elsewhere."""
    return {
        "local": sum(m.startswith("executing the command locally") for m, _ in notices),
        "remote": sum(m.startswith("issuing") for m, _ in notices),
    }


def nodes_reached(conn: psycopg.Connection, statement: str, params=()) -> tuple[list, set[int]]:
    """The statement's rows, and the ports of the nodes its commands were sent to."""
    rows, notices = citus_log(conn, statement, params)
    details = "\n".join(detail for _, detail in notices)
    return rows, {int(port) for port in re.findall(r"on server [^:]+:(\d+)", details)}


def commands_sent(conn: psycopg.Connection, statement: str, params=()) -> tuple[list, dict]:
    """The statement's rows, and how many of its commands ran on this server and how many
    were sent elsewhere: {"local": n, "remote": n}."""
    rows, notices = citus_log(conn, statement, params)
    return rows, counted(notices)


def organization_with_agent(conn: psycopg.Connection, org: str, **agent) -> str:
    """Organization `org`, its user `user-<org>` and agent `agent-<org>` (model echo, with
    the further keys given); returns the agent's id."""
    conn.execute("select runlane.put_org(%s)", (org,))
    conn.execute("select runlane.put_user(%s, %s)", (f"user-{org}", org))
    conn.execute(
        "select runlane.put_agent(%s, %s)",
        (
            f"agent-{org}",
            Jsonb({"org_id": org, "owner_id": f"user-{org}", "model": "echo", **agent}),
        ),
    )
    return f"agent-{org}"


def organizations_on_two_nodes(conn: psycopg.Connection, prefix: str) -> tuple[str, str]:
    """Organizations `<prefix>-0` … `-5`, each with its user and agent
    (organization_with_agent); returns the first and one whose rows live on the other
    worker node."""
    orgs = [f"{prefix}-{i}" for i in range(6)]
    for org in orgs:
        organization_with_agent(conn, org)
    home = node_of(conn, orgs[0])
    return orgs[0], next(org for org in orgs[1:] if node_of(conn, org) != home)


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


def cluster_database(nodes: list[LocalCluster], name: str) -> str:
    """A database `name` on every node with the citus extension, the workers added to the
    coordinator (nodes[0]); returns the coordinator's DSN for it."""
    coordinator = nodes[0]
    for node in nodes:
        with psycopg.connect(node.dsn, autocommit=True) as conn:
            conn.execute(f"create database {name}")
        with psycopg.connect(node.dsn_for(name), autocommit=True) as conn:
            conn.execute("create extension citus")
    with psycopg.connect(coordinator.dsn_for(name), autocommit=True) as conn:
        conn.execute("select citus_set_coordinator_host('127.0.0.1', %s)", (coordinator.port,))
        for node in nodes[1:]:
            conn.execute("select citus_add_node('127.0.0.1', %s)", (node.port,))
    return coordinator.dsn_for(name)


def test_migrate_citus_distributes_the_organizations_tables_by_org_id(citus_nodes):
    coordinator = citus_nodes[0]
    cluster_database(citus_nodes, "sharded")
    distributed_once = cli("migrate", "--citus", dsn=coordinator.dsn_for("sharded"))
    assert distributed_once.returncode == 0, distributed_once.stderr
    assert "applied 0029_org_id_in_every_key" in distributed_once.stdout
    again = cli("migrate", "--citus", dsn=coordinator.dsn_for("sharded"))
    assert (again.returncode, again.stdout.strip()) == (0, "schema is up to date"), again.stderr
    plain = cli("migrate", dsn=coordinator.dsn_for("sharded"))  # reinstalls the functions
    assert plain.returncode == 0, plain.stderr
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
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
        fill_triggers = conn.execute(
            "select count(*) from pg_trigger where tgname like '%%\\_org\\_id' "
            "and tgrelid::regclass::text like 'runlane.%%'"
        ).fetchone()[0]
        assert fill_triggers == 0, "a plain migrate must not bring back the fill triggers"


def test_migrate_citus_refuses_a_database_without_citus_or_worker_nodes(citus_nodes):
    coordinator = citus_nodes[0]
    with psycopg.connect(coordinator.dsn, autocommit=True) as conn:
        conn.execute("create database no_citus")
        conn.execute("create database no_workers")
    with psycopg.connect(coordinator.dsn_for("no_workers"), autocommit=True) as conn:
        conn.execute("create extension citus")
    refused = cli("migrate", "--citus", dsn=coordinator.dsn_for("no_citus"))
    assert refused.returncode != 0
    assert "the citus extension is not in this database" in refused.stderr
    refused = cli("migrate", "--citus", dsn=coordinator.dsn_for("no_workers"))
    assert refused.returncode != 0
    assert "no worker nodes" in refused.stderr
    with psycopg.connect(coordinator.dsn_for("no_workers"), autocommit=True) as conn:
        nothing = conn.execute("select to_regclass('runlane.runs') is null").fetchone()[0]
        assert nothing, "a refused --citus creates nothing"


def test_the_management_calls_run_on_the_distributed_schema(citus_nodes):
    """put_org, put_user, put_agent (created, patched, scheduled) and get_agent, with the
    functions installed after the tables were distributed (so Citus propagates them), and
    an agent id of one organization refused to another: the namespace holds across nodes."""
    coordinator = citus_nodes[0]
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
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


def test_one_organizations_chat_calls_reach_only_the_node_that_holds_it(citus_nodes):
    """submit_message (created, steering), send_message, run_now and put_org with a new
    time zone (its agents' next slots recomputed) on the distributed schema: every command
    each sends goes to the one worker node holding the organization."""
    coordinator = citus_nodes[0]
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        orgs = [f"org-chat-{i}" for i in range(8)]
        for org in orgs:
            organization_with_agent(conn, org, schedule="daily at 09:00")
        homes = {org: node_of(conn, org) for org in orgs}
        assert len(set(homes.values())) == 2, "the organizations spread over both nodes"
        for org in orgs:
            agent = f"agent-{org}"
            created, ports = nodes_reached(
                conn, "select * from runlane.submit_message(%s, 'thread-1', 'hello')", (agent,)
            )
            assert created[0][2] == "created" and ports == {homes[org]}
            steering, ports = nodes_reached(
                conn, "select * from runlane.send_message(%s, 'thread-1', 'more')", (agent,)
            )
            assert steering[0][1:] == (created[0][1], "steering") and ports == {homes[org]}
            manual, ports = nodes_reached(conn, "select run_id from runlane.run_now(%s)", (agent,))
            assert manual[0][0] is not None and ports == {homes[org]}
            before = conn.execute(
                "select next_run_at from runlane.agents where agent_id = %s", (agent,)
            ).fetchone()[0]
            _, ports = nodes_reached(
                conn, 'select runlane.put_org(%s, \'{"timezone": "Asia/Tokyo"}\')', (org,)
            )
            assert ports == {homes[org]}
            after = conn.execute(
                "select next_run_at from runlane.agents where agent_id = %s", (agent,)
            ).fetchone()[0]
            assert after != before  # 09:00 in Tokyo, not in UTC
        queued = conn.execute(
            "select count(*) from runlane.runs where state = 'queued' and org_id = any(%s)",
            (orgs,),
        ).fetchone()[0]
        assert queued == 2 * len(orgs)  # a chat run and a manual run each


def test_run_keyed_calls_answer_on_the_distributed_schema(citus_nodes):
    """run_status, outputs_since, message_status, publish_run (with a wake time) and
    cancel_run, which know a run by its id alone: they find its organization by reading
    the run (a read that asks every node), then lock and write by the whole key."""
    coordinator = citus_nodes[0]
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        conn.execute("select runlane.put_org('org-runs')")
        conn.execute("select runlane.put_user('user-runs', 'org-runs')")
        conn.execute(
            "select runlane.put_agent('agent-runs', "
            '\'{"org_id": "org-runs", "owner_id": "user-runs", "model": "echo"}\')'
        )
        message_id, run_id, _ = conn.execute(
            "select * from runlane.submit_message('agent-runs', 'thread-1', 'hello')"
        ).fetchone()
        status = conn.execute("select state from runlane.run_status(%s)", (run_id,)).fetchone()
        assert status == ("queued",)
        assert (
            conn.execute("select * from runlane.outputs_since(%s, 0)", (run_id,)).fetchall() == []
        )
        assert conn.execute(
            "select state, run_id from runlane.message_status(%s)", (message_id,)
        ).fetchone() == ("queued", run_id)
        conn.execute("select runlane.publish_run(%s, now() + interval '1 hour')", (run_id,))
        woken_later = conn.execute(
            "select wake_at > now() from runlane.runs where run_id = %s", (run_id,)
        ).fetchone()[0]
        assert woken_later
        assert conn.execute("select runlane.cancel_run(%s)", (run_id,)).fetchone() == ("canceled",)
        assert conn.execute(
            "select state, finished_at is not null from runlane.run_status(%s)", (run_id,)
        ).fetchone() == ("canceled", True)
        with pytest.raises(psycopg.Error) as unknown:
            conn.execute("select runlane.run_status(%s)", (run_id + 10**9,))
        assert unknown.value.sqlstate == "RL008"


def test_an_organizations_calls_sent_to_its_node_run_there_alone(citus_nodes):
    """runlane.org_node names the node that holds an organization. There, with an API
    login entered on the coordinator (runlane grant-login), every call of that organization
    runs each of its commands on that node and sends none elsewhere: the one-hop path. A
    login held to the organization knows its runs' node from its scope, so the run-keyed
    calls (status, outputs, timing, reply, detail) and the keyed ones stay there too; a login for
    every organization reads the run on every node first, unless the session names the
    organization (runlane.org_id).
    A login oid is one server's: the entry holds on the nodes by the oids recorded there,
    and an API login never entered is refused on a node as on the coordinator."""
    coordinator = citus_nodes[0]
    ports = {node.port: node for node in citus_nodes}
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        orgs = [f"org-hop-{i}" for i in range(6)]
        for org in orgs:
            organization_with_agent(conn, org)
        homes = {org: node_of(conn, org) for org in orgs}
        for org in orgs:
            assert conn.execute(
                "select host, port from runlane.org_node(%s)", (org,)
            ).fetchone() == ("127.0.0.1", homes[org])
        one_per_node = {homes[org]: org for org in orgs}
        assert len(one_per_node) == 2, "the organizations spread over both nodes"
        conn.execute("create role app_every login")
        conn.execute("create role app_never login")
        conn.execute("grant runlane_api to app_never")  # a grant, never entered here
        for i in range(2):
            conn.execute(f"create role app_scoped_{i} login")
    for i, org in enumerate(one_per_node.values()):
        entered = cli(
            "grant-login",
            f"app_scoped_{i}",
            "--api",
            "--org",
            org,
            dsn=coordinator.dsn_for("sharded"),
        )
        assert entered.returncode == 0, entered.stderr
    entered = cli("grant-login", "app_every", "--api", dsn=coordinator.dsn_for("sharded"))
    assert entered.returncode == 0, entered.stderr

    for i, (port, org) in enumerate(one_per_node.items()):
        node_dsn = ports[port].dsn_for("sharded")
        agent = f"agent-{org}"
        with psycopg.connect(node_dsn, user=f"app_scoped_{i}", autocommit=True) as app:
            calls = {}
            [(message_id, run_id, disposition)], calls["submit_message"] = commands_sent(
                app, "select * from runlane.submit_message(%s, 'thread-1', 'hello')", (agent,)
            )
            assert disposition == "created"
            steering, calls["send_message"] = commands_sent(
                app,
                "select disposition from runlane.send_message(%s, 'thread-1', 'more')",
                (agent,),
            )
            assert steering == [("steering",)]
            _, calls["run_now"] = commands_sent(
                app, "select run_id from runlane.run_now(%s)", (agent,)
            )
            for replay in ("", " again"):
                _, calls[f"submit_message with a key{replay}"] = commands_sent(
                    app,
                    "select * from runlane.submit_message(%s, 'thread-3', 'hi', 'key-1')",
                    (agent,),
                )
                _, calls[f"run_now with a key{replay}"] = commands_sent(
                    app, "select run_id from runlane.run_now(%s, 'key-2')", (agent,)
                )
            _, calls["put_agent"] = commands_sent(
                app, 'select runlane.put_agent(%s, \'{"prompt": "Hi"}\')', (agent,)
            )
            _, calls["get_agent"] = commands_sent(app, "select runlane.get_agent(%s)", (agent,))
            state, calls["run_status"] = commands_sent(
                app, "select state from runlane.run_status(%s)", (run_id,)
            )
            assert state == [("queued",)]
            _, calls["outputs_since"] = commands_sent(
                app, "select * from runlane.outputs_since(%s, 0)", (run_id,)
            )
            _, calls["message_status"] = commands_sent(
                app, "select * from runlane.message_status(%s)", (message_id,)
            )
            for name in ("run_timing", "superseded_through", "run_reply", "run_detail"):
                _, calls[name] = commands_sent(app, f"select runlane.{name}(%s)", (run_id,))
            _, calls["weekly_spend"] = commands_sent(
                app, "select runlane.weekly_spend(%s, now())", (f"user-{org}",)
            )
            _, calls["outputs_since_many"] = commands_sent(
                app,
                "select * from runlane.outputs_since_many(array[%s], array[0::bigint])",
                (run_id,),
            )
            _, calls["publish_run"] = commands_sent(
                app, "select runlane.publish_run(%s)", (run_id,)
            )
            canceled, calls["cancel_run"] = commands_sent(
                app, "select runlane.cancel_run(%s)", (run_id,)
            )
            assert canceled == [("canceled",)]
            assert {name: sent["remote"] for name, sent in calls.items()} == dict.fromkeys(calls, 0)
            assert all(sent["local"] > 0 for sent in calls.values())
            other = next(o for o in orgs if o != org)
            with pytest.raises(psycopg.Error) as foreign:
                app.execute("select runlane.get_agent(%s)", (f"agent-{other}",))
            assert foreign.value.sqlstate == "RL008", "held to its organization on the node too"
        with psycopg.connect(node_dsn, user="app_every", autocommit=True) as app:
            [(_, run_id, _)], sent = commands_sent(
                app, "select * from runlane.submit_message(%s, 'thread-2', 'hello')", (agent,)
            )
            assert sent["remote"] == 0
            _, sent = commands_sent(app, "select state from runlane.run_status(%s)", (run_id,))
            assert sent["remote"] > 0, "a run id alone: the run is looked for on every node"
            app.execute("select set_config('runlane.org_id', %s, false)", (org,))
            for statement in (
                "select state from runlane.run_status(%s)",
                "select * from runlane.outputs_since(%s, 0)",
                "select * from runlane.outputs_since_many(array[%s], array[0::bigint])",
                "select runlane.run_timing(%s)",
                "select runlane.superseded_through(%s)",
                "select * from runlane.run_reply(%s)",
                "select * from runlane.run_detail(%s)",
                "select runlane.publish_run(%s)",
                "select runlane.cancel_run(%s)",
            ):
                _, sent = commands_sent(app, statement, (run_id,))
                assert sent["remote"] == 0, f"naming its organization keeps {statement} on the node"
        with psycopg.connect(node_dsn, user="app_never", autocommit=True) as app:
            with pytest.raises(psycopg.Error) as refused:
                app.execute("select runlane.get_agent(%s)", (agent,))
            assert refused.value.sqlstate == "42501"


def test_a_login_entry_on_the_nodes_follows_the_role_not_its_name(citus_nodes):
    """On every node an entry names the login's role there: renamed (Citus renames it on
    every node), the login keeps acting for its organization; dropped and made again
    under the same name, the new login is refused on a node as on the coordinator."""
    coordinator = citus_nodes[0]
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        agent = organization_with_agent(conn, "org-role")
        node = next(n for n in citus_nodes[1:] if n.port == node_of(conn, "org-role"))
        conn.execute("create role app_role_before login")
    entered = cli(
        "grant-login",
        "app_role_before",
        "--api",
        "--org",
        "org-role",
        dsn=coordinator.dsn_for("sharded"),
    )
    assert entered.returncode == 0, entered.stderr
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        conn.execute("alter role app_role_before rename to app_role_after")
    with psycopg.connect(node.dsn_for("sharded"), user="app_role_after", autocommit=True) as app:
        found = app.execute("select runlane.get_agent(%s) ->> 'org_id'", (agent,)).fetchone()
        assert found == ("org-role",), "renamed, the login keeps its entry on the node"
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        conn.execute("drop role app_role_after")
        conn.execute("create role app_role_after login")
        conn.execute("grant runlane_api to app_role_after")
    for server in (coordinator, node):
        with psycopg.connect(
            server.dsn_for("sharded"), user="app_role_after", autocommit=True
        ) as app:
            with pytest.raises(psycopg.Error) as refused:
                app.execute("select runlane.get_agent(%s)", (agent,))
            assert refused.value.sqlstate == "42501", (
                f"a new role under an old name on {server.port}"
            )


def test_a_worker_on_the_coordinator_refuses_and_names_where_to_connect(citus_nodes):
    """A coordinator without shards stores no organization's runs: `runlane worker` there
    says once where workers claim and exits 2, and a claim there is refused (0A000)."""
    refused = cli(
        "worker",
        "--agent",
        "runlane.agents.echo:agent",
        "--lane",
        "interactive",
        "--no-maintenance",
        dsn=citus_nodes[0].dsn_for("sharded"),
    )
    assert refused.returncode == 2, refused.stderr
    assert "stores no organization's runs" in refused.stderr
    assert "connect the worker to a worker node" in refused.stderr
    assert "docs/scaling.md" in refused.stderr
    with (
        psycopg.connect(citus_nodes[0].dsn_for("sharded"), autocommit=True) as conn,
        pytest.raises(psycopg.Error) as claim,
    ):
        conn.execute("select * from runlane.claim_runs('w-coordinator', array['interactive'])")
    assert claim.value.sqlstate == "0A000"
    assert "worker node" in claim.value.diag.message_hint


def test_a_crashed_worker_node_holds_up_only_the_organizations_it_holds(citus_nodes):
    """A worker node stopped as by a crash: its organizations' calls fail, naming the
    node, until it returns; the other node's organizations go on; nothing acknowledged
    before is lost. A write to a reference table (a new user, of any organization) needs
    every node, so it waits for the node too."""
    coordinator, _, second = citus_nodes
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        orgs = [f"org-crash-{i}" for i in range(8)]
        for org in orgs:
            organization_with_agent(conn, org)
        down = [org for org in orgs if node_of(conn, org) == second.port]
        up = [org for org in orgs if org not in down]
        assert down and up, "the organizations spread over both nodes"
        acknowledged = {
            org: conn.execute(
                "select message_id, run_id from runlane.send_message(%s, 'thread-1', 'before')",
                (f"agent-{org}",),
            ).fetchone()
            for org in orgs
        }
        second.stop("immediate")
        try:
            for org in up:
                during = conn.execute(
                    "select disposition from runlane.send_message(%s, 'thread-2', 'during')",
                    (f"agent-{org}",),
                ).fetchone()
                assert during == ("created",)
            for org in down:
                with pytest.raises(psycopg.Error) as failed:
                    conn.execute(
                        "select * from runlane.send_message(%s, 'thread-2', 'during')",
                        (f"agent-{org}",),
                    )
                assert f":{second.port}" in str(failed.value), "the error names the node"
            with pytest.raises(psycopg.Error):
                conn.execute("select runlane.put_user('user-new', %s)", (up[0],))
        finally:
            second.start()
        for org, (message_id, run_id) in acknowledged.items():
            assert conn.execute(
                "select run_id from runlane.message_status(%s)", (message_id,)
            ).fetchone() == (run_id,), f"{org}'s acknowledged message survived"
        after = conn.execute(
            "select disposition from runlane.send_message(%s, 'thread-2', 'after')",
            (f"agent-{down[0]}",),
        ).fetchone()
        assert after == ("created",)  # the node is back: its organizations go on


def test_migrate_citus_moves_a_database_in_use_with_its_rows(citus_nodes):
    """A database that ran on the coordinator's own tables, with organizations, agents,
    conversations and runs in every state a queue holds, distributed afterwards: every row
    is kept, and the conversations go on where they were."""
    dsn = cluster_database(citus_nodes, "moved")
    with psycopg.connect(dsn, autocommit=True) as conn:
        migrate(conn)  # plain: the tables are the coordinator's own
        for i in range(6):
            org = f"org-moved-{i}"
            organization_with_agent(conn, org)
            conn.execute("select runlane.send_message(%s, 'thread-1', 'hello')", (f"agent-{org}",))
            conn.execute("select runlane.run_now(%s)", (f"agent-{org}",))
        conn.execute(
            "select runlane.cancel_run(run_id) from runlane.runs "
            "where lane = 'background' and org_id = 'org-moved-0'"
        )
        counts = "select " + ", ".join(
            f"(select count(*) from runlane.{table})"
            for table in ("runs", "messages", "threads", "run_events", "agents", "agent_orgs")
        )
        before = conn.execute(counts).fetchone()
        queued_chat = dict(
            conn.execute(
                "select org_id, run_id from runlane.runs where lane = 'interactive'"
            ).fetchall()
        )
    moved = cli("migrate", "--citus", dsn=dsn)
    assert moved.returncode == 0, moved.stderr
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute(
            "select count(*) from citus_tables where citus_table_type = 'distributed' "
            "and table_name::text like 'runlane.%'"
        ).fetchone() == (len(DISTRIBUTED),)
        assert conn.execute(counts).fetchone() == before, "every row moved into the shards"
        for org, run_id in queued_chat.items():
            joined = conn.execute(
                "select run_id, disposition from runlane.send_message(%s, 'thread-1', 'more')",
                (f"agent-{org}",),
            ).fetchone()
            assert joined == (run_id, "steering"), f"{org}'s conversation goes on"
        assert conn.execute(
            "select state from runlane.runs where lane = 'background' and org_id = 'org-moved-0'"
        ).fetchone() == ("canceled",)


def test_a_node_added_later_refuses_logins_until_migrate_citus_enters_them(citus_nodes):
    """A login's entry on a node is its oid there, recorded when it is entered. A worker
    node added afterwards has none: an API login is refused there (never let through),
    told to run `runlane migrate --citus`, which enters every login on the new node and
    gives it its copy of the global tables. A login entered again meanwhile acts there at
    once: its entry is read from another server's copy, by the login's oid as a value
    (session_user inside the statement would be evaluated there, as the connection's)."""
    coordinator = citus_nodes[0]
    sharded = coordinator.dsn_for("sharded")
    with psycopg.connect(sharded, autocommit=True) as conn:
        agent = organization_with_agent(conn, "org-late")
        conn.execute("create role app_before_the_node login")
    entered = cli("grant-login", "app_before_the_node", "--api", "--org", "org-late", dsn=sharded)
    assert entered.returncode == 0, entered.stderr
    late = LocalCluster(settings=CITUS)
    try:
        late.start()
        with psycopg.connect(late.dsn, autocommit=True) as conn:
            conn.execute("create database sharded")
        with psycopg.connect(late.dsn_for("sharded"), autocommit=True) as conn:
            conn.execute("create extension citus")
        with psycopg.connect(sharded, autocommit=True) as conn:
            conn.execute("select citus_add_node('127.0.0.1', %s)", (late.port,))
        with (
            psycopg.connect(
                late.dsn_for("sharded"), user="app_before_the_node", autocommit=True
            ) as app,
            pytest.raises(psycopg.Error) as refused,
        ):
            app.execute("select runlane.get_agent(%s)", (agent,))
        assert refused.value.sqlstate == "42501"
        assert "knows no login yet" in refused.value.diag.message_primary
        assert "runlane migrate --citus" in refused.value.diag.message_hint

        # Entered again, the login acts on the new node before it has its copies (its
        # entry read from another server's copy, as this login's).
        entered = cli(
            "grant-login", "app_before_the_node", "--api", "--org", "org-late", dsn=sharded
        )
        assert entered.returncode == 0, entered.stderr
        with psycopg.connect(
            late.dsn_for("sharded"), user="app_before_the_node", autocommit=True
        ) as app:
            found = app.execute("select runlane.get_agent(%s) ->> 'org_id'", (agent,)).fetchone()
            assert found == ("org-late",), "entered again, the login acts on the new node"

        again = cli("migrate", "--citus", dsn=sharded)
        assert again.returncode == 0, again.stderr
        with psycopg.connect(sharded, autocommit=True) as conn:
            copies = conn.execute(
                "select count(*) from pg_dist_placement as p "
                "join pg_dist_shard as s using (shardid) join pg_dist_node as n using (groupid) "
                "where n.nodeport = %s and s.logicalrelid = any(%s::regclass[])",
                (late.port, [f"runlane.{table}" for table in REFERENCE]),
            ).fetchone()
        assert copies == (len(REFERENCE),), "the new node holds its own copy of each global table"
        with psycopg.connect(
            late.dsn_for("sharded"), user="app_before_the_node", autocommit=True
        ) as app:
            found = app.execute("select runlane.get_agent(%s) ->> 'org_id'", (agent,)).fetchone()
            assert found == ("org-late",), "entered on the new node, the login acts there"
            with pytest.raises(psycopg.Error) as foreign:
                app.execute("select runlane.get_agent('agent-org-role')")
            assert foreign.value.sqlstate == "RL008", "and still for its organization only"
    finally:
        with psycopg.connect(sharded, autocommit=True) as conn:
            conn.execute(
                "select citus_remove_node('127.0.0.1', %s) from pg_dist_node where nodeport = %s",
                (late.port, late.port),
            )
        late.destroy()


def tables_reached_remotely(notices: list) -> set[str]:
    """The tables whose shards the logged commands sent to another server name."""
    return {
        table
        for message, _ in notices
        if message.startswith("issuing")
        for table in re.findall(r"runlane\.([a-z_]+?)_\d+\b", message)
    }


def test_an_organization_is_erased_on_its_node(citus_nodes):
    """Erasure names the organization in every statement: sent to the organization's node
    by a login held to it, erase_thread, erase_agent, erase_user and erase_org delete what
    they promise there, reach no other node's shards (only the global tables, copied on
    every node, are written everywhere), and leave every other organization whole."""
    coordinator = citus_nodes[0]
    sharded = coordinator.dsn_for("sharded")
    with psycopg.connect(sharded, autocommit=True) as conn:
        agent = organization_with_agent(conn, "org-erase")
        conn.execute(
            "select runlane.put_agent('agent-org-erase-2', %s)",
            (Jsonb({"org_id": "org-erase", "owner_id": "user-org-erase", "model": "echo"}),),
        )
        kept = organization_with_agent(conn, "org-kept")
        conn.execute("select runlane.send_message(%s, 'thread-1', 'stay')", (kept,))
        node = next(n for n in citus_nodes[1:] if n.port == node_of(conn, "org-erase"))
        conn.execute("create role app_eraser login")
        counts = "select " + ", ".join(
            f"(select count(*) from runlane.{table} where org_id = 'org-kept')"
            for table in ("runs", "messages", "threads", "run_events", "agents", "users")
        )
        before = conn.execute(counts).fetchone()
    entered = cli("grant-login", "app_eraser", "--api", "--org", "org-erase", dsn=sharded)
    assert entered.returncode == 0, entered.stderr

    with psycopg.connect(node.dsn_for("sharded"), user="app_eraser", autocommit=True) as app:
        for thread in ("thread-1", "thread-2"):
            _, run_id, _ = app.execute(
                "select * from runlane.send_message(%s, %s, 'hello')", (agent, thread)
            ).fetchone()
            app.execute("select runlane.cancel_run(%s)", (run_id,))
        erased = {}
        for name, statement, params in (
            ("erase_thread", "select runlane.erase_thread(%s, 'thread-1')", (agent,)),
            ("erase_agent", "select runlane.erase_agent(%s)", (agent,)),
            ("erase_user", "select runlane.erase_user('user-org-erase')", ()),
            ("erase_org", "select runlane.erase_org('org-erase')", ()),
        ):
            [(runs,)], notices = citus_log(app, statement, params)
            erased[name] = runs
            reached = tables_reached_remotely(notices)
            assert reached <= set(REFERENCE), f"{name} reached other nodes' shards: {reached}"
        assert erased == {"erase_thread": 1, "erase_agent": 1, "erase_user": 0, "erase_org": 0}

    with psycopg.connect(sharded, autocommit=True) as conn:
        left = conn.execute(
            "select (select count(*) from runlane.runs where org_id = 'org-erase') "
            "+ (select count(*) from runlane.agents where org_id = 'org-erase') "
            "+ (select count(*) from runlane.users where org_id = 'org-erase') "
            "+ (select count(*) from runlane.agent_orgs where org_id = 'org-erase') "
            "+ (select count(*) from runlane.platform_settings where org_id = 'org-erase')"
        ).fetchone()
        assert left == (0,), "nothing of the organization is left"
        assert conn.execute(counts).fetchone() == before, "another organization is whole"


def answer_and_commands(conn: psycopg.Connection, statement: str, params=()) -> tuple:
    """(sqlstate or None, its message with the ids in params blanked, commands counted)."""
    notices: list = []
    state, message = None, ""
    try:
        citus_log(conn, statement, params, notices)
    except psycopg.Error as exc:
        state, message = exc.sqlstate, exc.diag.message_primary or ""
    for value in params:
        message = message.replace(str(value), "ID")
    return state, message, counted(notices)


def test_a_foreign_id_costs_a_login_held_to_one_organization_what_an_unknown_one_does(
    citus_nodes,
):
    """On Citus the cost of an answer could tell apart what its text does not: an id of an
    organization on another node needs that node, an unknown one every node. A login held
    to one organization reads only there, so on its node a foreign and an unknown agent or
    user id get the same error after the same commands, none of them sent elsewhere."""
    coordinator = citus_nodes[0]
    sharded = coordinator.dsn_for("sharded")
    with psycopg.connect(sharded, autocommit=True) as conn:
        mine, foreign = organizations_on_two_nodes(conn, "org-oracle")
        node = next(n for n in citus_nodes[1:] if n.port == node_of(conn, mine))
        conn.execute("create role app_oracle login")
    entered = cli("grant-login", "app_oracle", "--api", "--org", mine, dsn=sharded)
    assert entered.returncode == 0, entered.stderr

    by_agent = (
        "select runlane.get_agent(%s)",
        "select * from runlane.submit_message(%s, 'thread-1', 'hi')",
        "select * from runlane.send_message(%s, 'thread-1', 'hi')",
        "select * from runlane.submit_message(%s, 'thread-1', 'hi', 'key-1')",
        "select run_id from runlane.run_now(%s)",
        "select run_id from runlane.run_now(%s, 'key-2')",
        "select run_id from runlane.create_run(%s, 'manual', null, null)",
        "select runlane.erase_thread(%s, 'thread-1')",
        "select runlane.erase_agent(%s)",
    )
    by_user = (
        "select runlane.erase_user(%s)",
        "select runlane.weekly_spend(%s, now())",
    )
    with psycopg.connect(node.dsn_for("sharded"), user="app_oracle", autocommit=True) as app:
        for statements, known, unknown in (
            (by_agent, f"agent-{foreign}", "agent-nowhere"),
            (by_user, f"user-{foreign}", "user-nowhere"),
        ):
            for statement in statements:
                of_foreign = answer_and_commands(app, statement, (known,))
                of_unknown = answer_and_commands(app, statement, (unknown,))
                assert of_foreign[0] is not None, f"{statement} refuses a foreign id"
                assert of_foreign == of_unknown, statement
                assert of_foreign[2]["remote"] == 0, statement


def test_outputs_since_many_follows_runs_of_organizations_on_every_node(citus_nodes):
    """A follower acting for every organization reads many runs' outputs in one call: on
    a distributed schema the runs' organizations are read first, then each stretch of one
    organization's runs on its node; the rows come as on plain PostgreSQL, by position,
    then output id, each run after its own output, invisible kinds left out."""
    coordinator = citus_nodes[0]
    sharded = coordinator.dsn_for("sharded")
    with psycopg.connect(sharded, autocommit=True) as conn:
        first, other = organizations_on_two_nodes(conn, "org-follow")
        runs = {}
        for org in (first, other):
            _, runs[org], _ = conn.execute(
                "select * from runlane.send_message(%s, 'thread-1', 'hello')", (f"agent-{org}",)
            ).fetchone()
        outputs = {}
        for org, kinds in ((first, ("text", "reasoning", "text", "final")), (other, ("text",))):
            outputs[org] = [
                conn.execute(
                    "insert into runlane.run_outputs (run_id, org_id, attempt, kind, body) "
                    "values (%s, %s, 1, %s, 'out') returning output_id",
                    (runs[org], org, kind),
                ).fetchone()[0]
                for kind in kinds
            ]
        conn.execute("create role app_follower login")
    entered = cli("grant-login", "app_follower", "--api", dsn=sharded)
    assert entered.returncode == 0, entered.stderr

    a, b = runs[first], runs[other]
    visible_a = [outputs[first][i] for i in (0, 2, 3)]
    expected = (
        [(a, o) for o in visible_a]
        + [(b, outputs[other][0])]
        + [(a, o) for o in visible_a if o > visible_a[0]]
    )
    for server in citus_nodes:
        with psycopg.connect(server.dsn_for("sharded"), user="app_follower") as app:
            got = app.execute(
                "select run_id, output_id from runlane.outputs_since_many(%s, %s)",
                ([a, b, a, 424242], [0, 0, visible_a[0], 0]),
            ).fetchall()
            assert got == expected, f"on {server.port}"


def running_runs(
    conn: psycopg.Connection, org: str, count: int, threads: str
) -> list[tuple[int, int]]:
    """`count` chat runs of `org`, each of its own thread (`<threads>-<i>`), running under
    fence 1 for worker-1 as a claim leaves them; returns their (run id, fence)."""
    runs = []
    for i in range(count):
        _, run_id, _ = conn.execute(
            "select * from runlane.send_message(%s, %s, 'hello')",
            (f"agent-{org}", f"{threads}-{i}"),
        ).fetchone()
        conn.execute(
            "update runlane.runs set state = 'running', fence = 1, attempts = 1, "
            "lease_owner = 'worker-1', lease_expires_at = now() + interval '1 minute', "
            "heartbeat_at = now(), first_started_at = now() where org_id = %s and run_id = %s",
            (org, run_id),
        )
        runs.append((run_id, 1))
    return runs


def every_fenced_write(runs: list[tuple[int, int]]) -> list[tuple[str, str, tuple]]:
    """(name, statement, parameters) of each fenced worker write, numbered as a worker
    numbers them: the first run gets every write of an attempt up to its finish; the
    other three are released, retried and finished in a batch."""
    (a, fa), (b, fb), (c, fc), (d, fd) = runs
    return [
        ("heartbeat", "select runlane.heartbeat(%s, %s)", (a, fa)),
        ("append_output", "select runlane.append_output(%s, %s, 'text', 'hi', 1)", (a, fa)),
        (
            "append_outputs",
            "select outcome from runlane.append_outputs("
            "array[%s]::bigint[], array[%s]::bigint[], '{2}', '{text}', '{more}')",
            (a, fa),
        ),
        ("save_checkpoint", "select runlane.save_checkpoint(%s, %s, '{\"step\": 1}', 3)", (a, fa)),
        ("charge", "select runlane.charge(%s, %s, 0.5, 4)", (a, fa)),
        ("take_steering", "select count(*) from runlane.take_steering(%s, %s, 5)", (a, fa)),
        (
            "finish_run",
            "select runlane.finish_run(%s, %s, 'succeeded', null, 0, 6) ->> 'event'",
            (a, fa),
        ),
        ("release_run", "select runlane.release_run(%s, %s, null, null, 1)", (b, fb)),
        ("retry_run", "select runlane.retry_run(%s, %s, 'boom', interval '0', 1)", (c, fc)),
        (
            "finish_runs",
            "select ok from runlane.finish_runs(array[%s]::bigint[], array[%s]::bigint[], "
            "'{succeeded}', '{null}', '{0}', '{1}', '{text}', '{done}', '{1}')",
            (d, fd),
        ),
    ]


WRITES_ANSWER = {
    "heartbeat": True,
    "append_output": None,  # the first response's timing row: checked apart
    "append_outputs": "applied",
    "save_checkpoint": "",  # (void)
    "charge": 0.5,
    "take_steering": 0,
    "finish_run": "run.finished",
    "release_run": True,
    "retry_run": "queued",
    "finish_runs": True,
}


def test_every_fenced_worker_write_runs_on_the_node_of_its_organization(citus_nodes):
    """A worker's writes on one run (heartbeat, outputs, checkpoint, charge, steering,
    finish, release, retry, and the batches) name the run's organization in every
    statement. A worker that names it (runlane.org_id) on the organization's node sends
    no command elsewhere; one that does not is answered the same from any server, the
    run's organization read first from every node; a worker naming another organization
    finds the run unknown, and one holding an older fence is fenced out; neither changes
    anything."""
    coordinator = citus_nodes[0]
    ports = {node.port: node for node in citus_nodes}
    sharded = coordinator.dsn_for("sharded")
    with psycopg.connect(sharded, autocommit=True) as conn:
        first, other = organizations_on_two_nodes(conn, "org-write")
        homes = {org: node_of(conn, org) for org in (first, other)}
        named_runs = {org: running_runs(conn, org, 4, "named") for org in (first, other)}
        unnamed_runs = running_runs(conn, first, 4, "unnamed")
        foreign_run, foreign_fence = running_runs(conn, other, 1, "foreign")[0]
        beat = "select state, heartbeat_at from runlane.runs where run_id = %s"
        foreign_before = conn.execute(beat, (foreign_run,)).fetchone()

    def answers(app: psycopg.Connection, runs: list[tuple[int, int]]) -> dict:
        got = {}
        for name, statement, params in every_fenced_write(runs):
            [(answer,)], sent = commands_sent(app, statement, params)
            got[name] = (answer, sent)
        return got

    for org in (first, other):
        with psycopg.connect(ports[homes[org]].dsn_for("sharded"), autocommit=True) as app:
            app.execute("select set_config('runlane.org_id', %s, false)", (org,))
            got = answers(app, named_runs[org])
        for name, (answer, sent) in got.items():
            assert sent["remote"] == 0, f"{name} of {org} sent commands elsewhere: {sent}"
            assert sent["local"] > 0, name
            if name == "append_output":
                assert answer["event"] == "run.first_response"
            else:
                assert answer == WRITES_ANSWER[name], name

    # Without the name: the same answers from a server that does not hold the run.
    elsewhere = next(node for node in citus_nodes[1:] if node.port != homes[first])
    with psycopg.connect(elsewhere.dsn_for("sharded"), autocommit=True) as app:
        got = answers(app, unnamed_runs)
    for name, (answer, _) in got.items():
        if name != "append_output":
            assert answer == WRITES_ANSWER[name], name

    with psycopg.connect(sharded, autocommit=True) as conn:
        for runs in (named_runs[first], named_runs[other], unnamed_runs):
            (a, _), (b, _), (c, _), (d, _) = runs
            states = dict(
                conn.execute(
                    "select run_id, state || '/' || cost::text from runlane.runs "
                    "where run_id = any(%s)",
                    ([a, b, c, d],),
                ).fetchall()
            )
            assert states == {
                a: "succeeded/0.5",
                b: "queued/0",
                c: "queued/0",
                d: "succeeded/0",
            }
            outputs = conn.execute(
                "select run_id, array_agg(body order by output_id) from runlane.run_outputs "
                "where run_id = any(%s) group by run_id order by run_id",
                ([a, d],),
            ).fetchall()
            assert outputs == [(a, ["hi", "more"]), (d, ["done"])]

        # A worker naming another organization: the run is unknown, nothing changes.
        conn.execute("select set_config('runlane.org_id', %s, false)", (first,))
        assert conn.execute(
            "select runlane.heartbeat(%s, %s)", (foreign_run, foreign_fence)
        ).fetchone() == (False,)
        with pytest.raises(psycopg.Error) as unknown:
            conn.execute(
                "select runlane.finish_run(%s, %s, 'succeeded')", (foreign_run, foreign_fence)
            )
        assert unknown.value.sqlstate == "RL008"
        # Its own organization named, but a fence it no longer holds: fenced out.
        conn.execute("select set_config('runlane.org_id', %s, false)", (other,))
        assert conn.execute(
            "select runlane.heartbeat(%s, %s)", (foreign_run, foreign_fence - 1)
        ).fetchone() == (False,)
        with pytest.raises(psycopg.Error) as fenced:
            conn.execute(
                "select runlane.finish_run(%s, %s, 'succeeded')", (foreign_run, foreign_fence - 1)
            )
        assert fenced.value.sqlstate == "RL001"
        conn.execute("reset runlane.org_id")
        assert conn.execute(beat, (foreign_run,)).fetchone() == foreign_before


def test_a_worker_batch_writes_runs_of_organizations_on_both_nodes(citus_nodes):
    """append_outputs and finish_runs take runs of many organizations in one call, as a
    worker batches them: on a distributed schema each organization's runs are locked on
    its node, in organization order, and every run is written."""
    coordinator = citus_nodes[0]
    sharded = coordinator.dsn_for("sharded")
    with psycopg.connect(sharded, autocommit=True) as conn:
        first, other = organizations_on_two_nodes(conn, "org-batch")
        (a, fa), (b, fb) = running_runs(conn, first, 1, "batch") + running_runs(
            conn, other, 1, "batch"
        )
        applied = conn.execute(
            "select run_id, outcome from runlane.append_outputs(%s, %s, '{1,1}', "
            "'{text,text}', '{one,two}')",
            ([a, b], [fa, fb]),
        ).fetchall()
        assert applied == [(a, "applied"), (b, "applied")]
        finished = conn.execute(
            "select run_id, ok, sqlstate from runlane.finish_runs(%s, %s, "
            "'{succeeded,failed}', '{null,boom}', '{0,0}', '{0,0}', '{}', '{}', '{2,2}')",
            ([a, b], [fa, fb]),
        ).fetchall()
        assert sorted(finished) == [(a, True, None), (b, True, None)]
        assert conn.execute(
            "select run_id, state, write_seq from runlane.runs where run_id = any(%s) "
            "order by run_id",
            ([a, b],),
        ).fetchall() == [(a, "succeeded", 2), (b, "failed", 2)]


# The operator views a login held to one organization calls: (name, statement, the
# column that names the organization, or None for a view of counts only).
OPERATOR_VIEWS = [
    ("org_status", "select org_id from runlane.org_status()", 0),
    ("owner_spend", "select org_id from runlane.owner_spend(now())", 0),
    ("agent_schedules", "select org_id from runlane.agent_schedules()", 0),
    ("runs_page", "select org_id from runlane.runs_page()", 0),
    ("runs_page queued", "select org_id from runlane.runs_page('queued')", 0),
    ("agent_page", "select org_id from runlane.agent_page()", 0),
    ("agent_last_runs", "select agent_id, state from runlane.agent_last_runs()", None),
    ("agent_journal", "select state from runlane.agent_journal('agent-org-view-0')", None),
    ("timing_summary", "select samples from runlane.timing_summary('1 hour', null, now())", None),
    (
        "queue_delay_status",
        "select delayed_runs from runlane.queue_delay_status('0 s', now())",
        None,
    ),
    # (summed: a minute's end may pass between two calls)
    (
        "failure_minutes",
        "select sum(failed) from runlane.failure_minutes('1 hour', now())",
        None,
    ),
    ("lane_overview", "select queued from runlane.lane_overview('0 s', now())", None),
]


def test_the_operator_views_of_one_organization_run_on_its_node(citus_nodes):
    """The dashboard's views, called by a login held to one organization on the node that
    holds it, run there alone and show that organization only; a login for every
    organization reads them on every node, from any server."""
    coordinator = citus_nodes[0]
    ports = {node.port: node for node in citus_nodes}
    sharded = coordinator.dsn_for("sharded")
    with psycopg.connect(sharded, autocommit=True) as conn:
        first, other = organizations_on_two_nodes(conn, "org-view")
        for org in (first, other):
            conn.execute("select runlane.send_message(%s, 'thread-1', 'hello')", (f"agent-{org}",))
        home = node_of(conn, first)
        conn.execute("create role app_view_held login")
        every_org = {
            name: conn.execute(statement).fetchall() for name, statement, _ in OPERATOR_VIEWS
        }
    entered = cli("grant-login", "app_view_held", "--api", "--org", first, dsn=sharded)
    assert entered.returncode == 0, entered.stderr

    with psycopg.connect(ports[home].dsn_for("sharded"), user="app_view_held") as app:
        for name, statement, org_column in OPERATOR_VIEWS:
            rows, sent = commands_sent(app, statement)
            assert sent["remote"] == 0, f"{name} sent commands elsewhere: {sent}"
            assert rows, name
            if org_column is not None:
                assert {row[org_column] for row in rows} == {first}, name
        [(queued,), _] = app.execute("select queued from runlane.lane_overview('0 s', now())")
        assert queued == 1, "its one queued chat run"
        assert app.execute("select agent_id from runlane.agent_last_runs()").fetchall() == [
            (f"agent-{first}",)
        ]
        minutes, sent = commands_sent(
            app,
            "select queued from runlane.lane_minutes('2 minutes', now()) "
            "where lane = 'interactive' order by minute_end desc limit 1",
        )
        assert sent["remote"] == 0 and minutes == [(1,)], "its queued chat run"

    for name, _, org_column in OPERATOR_VIEWS:
        if org_column is not None:
            orgs = {row[org_column] for row in every_org[name]}
            assert {first, other} <= orgs, f"{name} for every organization"
    elsewhere = next(node for node in citus_nodes[1:] if node.port != home)
    with psycopg.connect(elsewhere.dsn_for("sharded"), autocommit=True) as conn:
        for name, statement, _ in OPERATOR_VIEWS:
            assert conn.execute(statement).fetchall() == every_org[name], name
        # Minutes' percentiles of several nodes do not add up: one organization at a time.
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="one organization"):
            conn.execute("select * from runlane.lane_minutes('2 minutes', now())")
        conn.execute("select set_config('runlane.org_id', %s, false)", (first,))
        assert conn.execute(
            "select queued from runlane.lane_minutes('2 minutes', now()) "
            "where lane = 'interactive' order by minute_end desc limit 1"
        ).fetchall() == [(1,)]


def test_a_stream_follower_on_an_organizations_node_hears_its_runs_outputs(citus_nodes):
    """Notifications are per server: a worker writing a run's outputs on its
    organization's node notifies there, and a `runlane.stream()` follower connected to
    that node hears them. With `poll` an hour, the follower goes on after its first output
    only because the next output's and the finish's hints reach it."""
    coordinator = citus_nodes[0]
    ports = {node.port: node for node in citus_nodes}
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        org = "org-stream"
        organization_with_agent(conn, org)
        [(run_id, fence)] = running_runs(conn, org, 1, "stream")
        node_dsn = ports[node_of(conn, org)].dsn_for("sharded")

    async def follow_while_writing() -> list[dict]:
        items: list[dict] = []
        first_seen = asyncio.Event()

        async def follow() -> None:
            async with aclosing(runlane.stream(node_dsn, run_id, events=True, poll=3600)) as it:
                async for item in it:
                    items.append(item)
                    first_seen.set()

        follower = asyncio.create_task(follow())
        async with await psycopg.AsyncConnection.connect(node_dsn, autocommit=True) as worker:
            await worker.execute("select set_config('runlane.org_id', %s, false)", (org,))
            write = "select runlane.append_output(%s, %s, 'text', %s, %s)"
            await worker.execute(write, (run_id, fence, "one", 1))
            await asyncio.wait_for(first_seen.wait(), 120)
            await worker.execute(write, (run_id, fence, "two", 2))
            await worker.execute(
                "select runlane.finish_run(%s, %s, 'succeeded', null, 0, 3)", (run_id, fence)
            )
        await asyncio.wait_for(follower, 120)
        return items

    items = asyncio.run(follow_while_writing())
    assert [i.get("body") for i in items if i["event"] == "output"] == ["one", "two"]
    assert (items[-1]["event"], items[-1]["state"]) == ("end", "succeeded")


def resent_on_deadlock(conn: psycopg.Connection, statement: str) -> list:
    """The statement's rows, the statement sent again (at most twice more) when Citus
    cancels it as part of a distributed deadlock (40P01), as a worker resends its calls:
    Citus's detector counts every local process of a node as one transaction, and can
    find a cycle that is none (citusdata/citus#1803). A canceled tick changed nothing."""
    for attempt in range(3):
        try:
            return conn.execute(statement).fetchall()
        except psycopg.errors.DeadlockDetected:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def test_tick_fires_and_coalesces_the_schedules_of_organizations_on_both_nodes(citus_nodes):
    """The scheduler pass on a distributed schema: one tick from the coordinator takes
    the due agents organization by organization, each on its node, fires their routines,
    and a later tick coalesces into the runs still pending; nothing is fired twice."""
    coordinator = citus_nodes[0]
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        first, other = organizations_on_two_nodes(conn, "org-tick")
        agents = {}
        for org in (first, other):
            agents[org] = organization_with_agent(
                conn, org, schedule="every hour", prompt="summarize the day"
            )
            conn.execute(
                "update runlane.agents set next_run_at = now() - interval '1 minute' "
                "where org_id = %s and agent_id = %s",
                (org, agents[org]),
            )
        fired = resent_on_deadlock(
            conn,
            "select event, agent_id, run_id from runlane.tick(now()) "
            "where agent_id like 'agent-org-tick-%' order by agent_id",
        )
        assert [(event, agent) for event, agent, _ in fired] == [
            ("routine.fired", agents[first]),
            ("routine.fired", agents[other]),
        ]
        runs = {agent: run_id for _, agent, run_id in fired}
        for org in (first, other):
            assert conn.execute(
                "select org_id, state, trigger from runlane.runs where run_id = %s",
                (runs[agents[org]],),
            ).fetchone() == (org, "queued", "scheduled")

        coalesced = resent_on_deadlock(
            conn,
            "select event, agent_id, run_id from runlane.tick(now() + interval '2 hours') "
            "where agent_id like 'agent-org-tick-%' order by agent_id",
        )
        assert coalesced == [
            ("routine.coalesced", agents[first], runs[agents[first]]),
            ("routine.coalesced", agents[other], runs[agents[other]]),
        ]
        assert conn.execute(
            "select count(*) from runlane.runs where agent_id = any(%s)",
            (list(agents.values()),),
        ).fetchone() == (2,)

    # `runlane tick` (cron's maintenance pass) from the coordinator: every step of it runs
    # on the distributed schema, and fires nothing twice.
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        conn.execute(
            "update runlane.agents set next_run_at = now() - interval '1 minute' "
            "where agent_id = %s",
            (agents[first],),
        )
    passed = cli("tick", dsn=coordinator.dsn_for("sharded"))
    assert passed.returncode == 0, passed.stderr
    assert "maintenance.step_failed" not in passed.stdout + passed.stderr
    assert "routine.coalesced" in passed.stdout + passed.stderr


def test_reap_stale_takes_back_expired_runs_of_organizations_on_both_nodes(citus_nodes):
    """reap_stale on a distributed schema, from the coordinator: the expired runs of each
    organization are locked and taken back on its node (a chat run queued again, a
    background run failed stale), and a computer lease whose run ended is deleted; a run
    whose lease holds, and the computer lease of a running run, are left alone."""
    coordinator = citus_nodes[0]
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        first, other = organizations_on_two_nodes(conn, "org-reap")
        expired = [running_runs(conn, org, 1, "reap")[0][0] for org in (first, other)]
        [(holder, _)] = running_runs(conn, first, 1, "holder")
        [(ended, _)] = running_runs(conn, first, 1, "ended")
        [(background,)] = conn.execute(
            "select run_id from runlane.run_now(%s)", (f"agent-{other}",)
        ).fetchall()
        conn.execute(
            "update runlane.runs set state = 'running', fence = 1, attempts = 1, "
            "lease_owner = 'worker-1', heartbeat_at = now() where org_id = %s and run_id = %s",
            (other, background),
        )
        for org, run_id in ((first, expired[0]), (other, expired[1]), (other, background)):
            conn.execute(
                "update runlane.runs set lease_expires_at = now() - interval '1 minute' "
                "where org_id = %s and run_id = %s",
                (org, run_id),
            )
        conn.execute(
            "update runlane.runs set state = 'succeeded', finished_at = now(), "
            "lease_owner = null, lease_expires_at = null where org_id = %s and run_id = %s",
            (first, ended),
        )
        conn.execute(
            "insert into runlane.computer_leases (computer_id, run_id, fence, expires_at, org_id) "
            "values ('computer-left', %s, 1, now() - interval '1 minute', %s), "
            "('computer-held', %s, 1, now() - interval '1 minute', %s)",
            (ended, first, holder, first),
        )

        reaped = {
            run_id: (state, reason)
            for run_id, state, reason in conn.execute(
                "select * from runlane.reap_stale(now(), 500)"
            ).fetchall()
        }
        assert reaped == {
            expired[0]: ("queued", "lease_expired"),
            expired[1]: ("queued", "lease_expired"),
            background: ("failed", "stale"),
        }
        assert conn.execute(
            "select state from runlane.runs where org_id = %s and run_id = %s", (first, holder)
        ).fetchone() == ("running",)
        assert conn.execute(
            "select computer_id from runlane.computer_leases "
            "where computer_id in ('computer-left', 'computer-held')"
        ).fetchall() == [("computer-held",)]


def test_the_cleanup_passes_run_on_a_distributed_schema(citus_nodes):
    """cancel_redundant_timer_runs passes over each organization's pending timer runs on
    its node (a schema past 0003 holds one unfinished background run per agent, so it
    keeps them all); purge_gone_workers deletes a silent worker's registry row, unless a
    run of any node still names it running."""
    coordinator = citus_nodes[0]
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        first, other = organizations_on_two_nodes(conn, "org-clean")
        pending = {}
        for org in (first, other):
            agent = organization_with_agent(conn, org, schedule="every hour", prompt="p")
            conn.execute(
                "update runlane.agents set next_run_at = now() - interval '1 minute' "
                "where org_id = %s and agent_id = %s",
                (org, agent),
            )
            [(pending[org],)] = conn.execute(
                "select run_id from runlane.tick(now()) where agent_id = %s", (agent,)
            ).fetchall()
        assert conn.execute("select runlane.cancel_redundant_timer_runs(100)").fetchone() == (0,)
        for org in (first, other):
            assert conn.execute(
                "select state from runlane.runs where org_id = %s and run_id = %s",
                (org, pending[org]),
            ).fetchone() == ("queued",)

        [(held, _)] = running_runs(conn, other, 1, "held")
        conn.execute(
            "update runlane.runs set lease_owner = 'worker-busy' where org_id = %s and run_id = %s",
            (other, held),
        )
        conn.execute(
            "insert into runlane.workers (worker_id, generation, heartbeat_at) values "
            "('worker-gone', 2, now() - interval '2 hours'), "
            "('worker-busy', 2, now() - interval '2 hours')"
        )
        assert conn.execute(
            "select runlane.purge_gone_workers(interval '1 hour', 100)"
        ).fetchone() >= (1,)
        left = conn.execute(
            "select worker_id from runlane.workers "
            "where worker_id in ('worker-gone', 'worker-busy')"
        ).fetchall()
        assert left == [("worker-busy",)], f"run {held} on a worker node still names it"


def test_purge_finished_deletes_old_runs_of_organizations_on_both_nodes(citus_nodes):
    """Retention on a distributed schema: runs finished before the cutoff are deleted,
    organization by organization on its node, with their outputs and charges; a run
    finished since stays. The lock rows of the threads left empty are deleted after."""
    coordinator = citus_nodes[0]
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        first, other = organizations_on_two_nodes(conn, "org-purge")
        old, recent = {}, {}
        for org in (first, other):
            [(old[org], fence), (recent[org], recent_fence)] = running_runs(conn, org, 2, "purge")
            conn.execute(
                "select runlane.append_output(%s, %s, 'text', 'gone', 1)", (old[org], fence)
            )
            conn.execute("select runlane.charge(%s, %s, 0.25, 2)", (old[org], fence))
            conn.execute("select runlane.finish_run(%s, %s, 'succeeded')", (old[org], fence))
            conn.execute(
                "select runlane.finish_run(%s, %s, 'succeeded')", (recent[org], recent_fence)
            )
            conn.execute(
                "update runlane.runs set finished_at = now() - interval '30 days' "
                "where org_id = %s and run_id = %s",
                (org, old[org]),
            )
        conn.execute("select runlane.purge_finished(interval '9 days', 1000)")
        gone = list(old.values())
        for table in ("runs", "run_outputs", "charges"):
            assert conn.execute(
                f"select count(*) from runlane.{table} where run_id = any(%s)", (gone,)
            ).fetchone() == (0,), table
        assert conn.execute(
            "select count(*) from runlane.runs where run_id = any(%s)", (list(recent.values()),)
        ).fetchone() == (2,)

        # Then their threads hold nothing: their lock rows go, the others' stay.
        conn.execute("select * from runlane.purge_empty_threads(null, null, 10000)")
        assert conn.execute(
            "select org_id, thread_id from runlane.threads where org_id = any(%s) "
            "order by org_id, thread_id",
            ([first, other],),
        ).fetchall() == [(first, "purge-1"), (other, "purge-1")]


def test_concurrent_ticks_on_every_server_fire_each_routine_once(citus_nodes):
    """Four ticks at once, from the coordinator and both worker nodes, over the due
    agents of organizations on both nodes: each organization's agents are locked on its
    node (skip locked), so the ticks split the work and every routine fires exactly once."""
    coordinator = citus_nodes[0]
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        orgs = [f"org-race-{i}" for i in range(6)]
        agents = []
        for org in orgs:
            conn.execute("select runlane.put_org(%s)", (org,))
            conn.execute("select runlane.put_user(%s, %s)", (f"user-{org}", org))
            for n in range(4):
                agent = f"agent-{org}-{n}"
                conn.execute(
                    "select runlane.put_agent(%s, %s)",
                    (
                        agent,
                        Jsonb(
                            {
                                "org_id": org,
                                "owner_id": f"user-{org}",
                                "model": "echo",
                                "schedule": "every hour",
                                "prompt": "p",
                            }
                        ),
                    ),
                )
                agents.append(agent)
        conn.execute(
            "update runlane.agents set next_run_at = now() - interval '1 minute' "
            "where org_id = any(%s)",
            (orgs,),
        )
        assert len({node_of(conn, org) for org in orgs}) == 2

    servers = [coordinator, *citus_nodes]  # the coordinator twice
    start = threading.Barrier(len(servers))
    fired: list[tuple[str, str]] = []
    errors: list[BaseException] = []

    def tick(server: LocalCluster) -> None:
        try:
            with psycopg.connect(server.dsn_for("sharded"), autocommit=True) as own:
                start.wait()
                rows = own.execute(
                    "select event, agent_id from runlane.tick(now()) "
                    "where agent_id like 'agent-org-race-%'"
                ).fetchall()
                fired.extend(rows)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=tick, args=(server,)) for server in servers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    assert sorted(agent for _, agent in fired) == sorted(agents), "each routine once"
    assert {event for event, _ in fired} == {"routine.fired"}
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        assert conn.execute(
            "select count(*), count(distinct agent_id) from runlane.runs where org_id = any(%s)",
            (orgs,),
        ).fetchone() == (len(agents), len(agents))


def organizations_of_handler(
    conn: psycopg.Connection, prefix: str, handler: str, count: int = 6, **agent
) -> dict[str, list[str]]:
    """Organizations `<prefix>-0` … whose agents run `handler` (so that a claim of that
    handler reads no other test's runs), by the port of the node that holds each."""
    by_node: dict[str, list[str]] = {}
    for i in range(count):
        org = f"{prefix}-{i}"
        organization_with_agent(conn, org, handler=handler, **agent)
        by_node.setdefault(node_of(conn, org), []).append(org)
    assert len(by_node) == 2, by_node  # (the ids spread over both nodes)
    return by_node


def test_a_claim_on_a_worker_node_takes_its_organizations_in_fair_order_there(citus_nodes):
    """A worker connected to a node claims the runs of the organizations that node holds,
    interactive class first and round robin across organizations, oldest first in each,
    with every command on that node; the other node's runs stay queued for its workers."""
    coordinator = citus_nodes[0]
    ports = {node.port: node for node in citus_nodes}
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        by_node = organizations_of_handler(conn, "org-fair", "fair")
        sent = {}
        for org in sorted(org for orgs in by_node.values() for org in orgs):
            for i in range(3):
                _, run_id, _ = conn.execute(
                    "select * from runlane.send_message(%s, %s, 'hello')",
                    (f"agent-{org}", f"t-{i}"),
                ).fetchone()
                sent.setdefault(org, []).append(run_id)
    home, away = sorted(by_node)
    with psycopg.connect(ports[home].dsn_for("sharded"), autocommit=True) as node:
        claimed, notices = citus_log(
            node,
            "select run_id, org_id, fence, attempt, timing ->> 'event' from runlane.claim_runs("
            "'w-fair', array['interactive'], %s, interval '1 minute', null, false, array['fair'])",
            (len(by_node[home]) + 1,),
        )
    assert counted(notices)["remote"] == 0, notices
    orgs_here = sorted(by_node[home])
    # round one: each organization's oldest run, in run order; then round two begins
    first_round = sorted((sent[org][0], org) for org in orgs_here)
    assert [(run_id, org) for run_id, org, *_ in claimed] == [
        *first_round,
        min((sent[org][1], org) for org in orgs_here),
    ]
    assert {(fence, attempt, event) for *_, fence, attempt, event in claimed} == {
        (1, 1, "run.execution_started")
    }
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        away_runs = [run for org in by_node[away] for run in sent[org]]
        assert conn.execute(
            "select count(*) from runlane.runs where run_id = any(%s) and state = 'queued'",
            (away_runs,),
        ).fetchone()[0] == len(away_runs)
        journal = conn.execute(
            "select count(*) from runlane.run_events where event = 'run.claimed' "
            "and run_id = any(%s)",
            ([run_id for run_id, *_ in claimed],),
        ).fetchone()[0]
        assert journal == len(claimed)


def test_concurrent_claimers_on_a_node_never_share_a_run_and_keep_the_caps(citus_nodes):
    """Eight claimers on one node at once, over chat and background runs of its
    organizations (each allowed two running background runs, each worker bound to two
    runs per organization): no run is claimed twice, no organization runs more than two
    background runs, no worker holds more than two runs of one organization, and every
    run is claimed once the claimers are done."""
    coordinator = citus_nodes[0]
    ports = {node.port: node for node in citus_nodes}
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        by_node = organizations_of_handler(conn, "org-race", "race", count=8)
        home = max(by_node, key=lambda port: len(by_node[port]))
        orgs = by_node[home]
        runs = []
        for org in orgs:
            conn.execute("select runlane.put_org(%s, '{\"agent_max_concurrency\": 2}')", (org,))
            for i in range(4):
                runs.append(
                    conn.execute(
                        "select run_id from runlane.send_message(%s, %s, 'hi')",
                        (f"agent-{org}", f"race-{i}"),
                    ).fetchone()[0]
                )
            for i in range(3):
                conn.execute(
                    "select runlane.put_agent(%s, %s)",
                    (
                        f"bg-{org}-{i}",
                        Jsonb(
                            {
                                "org_id": org,
                                "owner_id": f"user-{org}",
                                "model": "echo",
                                "handler": "race",
                            }
                        ),
                    ),
                )
                runs.append(
                    conn.execute(
                        "select run_id from runlane.run_now(%s)", (f"bg-{org}-{i}",)
                    ).fetchone()[0]
                )
    claims: list[tuple] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def claimer(n: int) -> None:
        try:
            with psycopg.connect(ports[home].dsn_for("sharded"), autocommit=True) as node:
                node.execute("select set_config('runlane.max_per_org', '2', false)")
                for _ in range(6):
                    for lane in ("interactive", "background"):
                        rows = node.execute(
                            "select run_id, org_id, lane from runlane.claim_runs(%s, %s, 3, "
                            "interval '5 minutes', null, false, array['race'])",
                            (f"w-race-{n}", [lane]),
                        ).fetchall()
                        with lock:
                            claims.extend((f"w-race-{n}", *row) for row in rows)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=claimer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    claimed = [run_id for _, run_id, _, _ in claims]
    assert len(claimed) == len(set(claimed))  # never the same run twice
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        per_org = conn.execute(
            "select org_id, count(*) filter (where lane = 'background') from runlane.runs "
            "where run_id = any(%s) and state = 'running' group by org_id",
            (runs,),
        ).fetchall()
        assert per_org and all(background <= 2 for _, background in per_org), per_org
        per_worker = conn.execute(
            "select lease_owner, org_id, count(*) from runlane.runs where run_id = any(%s) "
            "and state = 'running' group by 1, 2",
            (runs,),
        ).fetchall()
        assert all(count <= 2 for *_, count in per_worker), per_worker
        left = conn.execute(
            "select lane, count(*) from runlane.runs where run_id = any(%s) and state = 'queued' "
            "group by lane",
            (runs,),
        ).fetchall()
    # every chat run was claimed; background runs wait only behind their caps
    assert dict(left).get("interactive", 0) == 0
    assert dict(left).get("background", 0) == len(orgs) * (3 - 2)


def test_a_keyed_claim_resent_on_a_node_returns_what_it_took(citus_nodes):
    """A keyed claim on a node records its runs in that node's own receipts, sending no
    command to another server; the same key again (a reply lost) claims nothing more and
    returns those runs under the same fences; a new key claims on."""
    coordinator = citus_nodes[0]
    ports = {node.port: node for node in citus_nodes}
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        by_node = organizations_of_handler(conn, "org-key", "keyed", count=6)
        home = next(iter(by_node))
        for org in by_node[home]:
            for i in range(2):
                conn.execute(
                    "select runlane.send_message(%s, %s, 'hi')", (f"agent-{org}", f"k-{i}")
                )
    claim = (
        "select run_id, fence from runlane.claim_runs('w-keyed', array['interactive'], 2, "
        "interval '1 minute', %s, true, array['keyed'])"
    )
    key = "5b0c6a52-8d7e-4a7e-9a51-000000000001"
    with psycopg.connect(ports[home].dsn_for("sharded"), autocommit=True) as node:
        first, notices = citus_log(node, claim, (key,))
        again = node.execute(claim, (key,)).fetchall()
        after = node.execute(claim, ("5b0c6a52-8d7e-4a7e-9a51-000000000002",)).fetchall()
    assert len(first) == 2
    assert counted(notices)["remote"] == 0, notices
    assert again == first
    assert len(after) == 2 and not {run for run, _ in after} & {run for run, _ in first}


def test_a_claim_on_a_node_skips_gated_background_runs(citus_nodes):
    """Background runs whose gate closed after they were queued (an agent switched off,
    an owner's weekly budget set to nothing) are ended skipped by the claim on their node,
    reported with their reasons, and never claimed."""
    coordinator = citus_nodes[0]
    ports = {node.port: node for node in citus_nodes}
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        by_node = organizations_of_handler(conn, "org-gate", "gated", count=6)
        home = max(by_node, key=lambda port: len(by_node[port]))
        switched_off, spent = by_node[home][:2]
        runs = {
            org: conn.execute(
                "select run_id from runlane.run_now(%s)", (f"agent-{org}",)
            ).fetchone()[0]
            for org in (switched_off, spent)
        }
        conn.execute(
            "select runlane.put_agent(%s, %s)",
            (f"agent-{switched_off}", Jsonb({"enabled": False})),
        )
        conn.execute("select runlane.put_org(%s, %s)", (spent, Jsonb({"agent_weekly_budget": 0})))
    with psycopg.connect(ports[home].dsn_for("sharded"), autocommit=True) as node:
        rows = node.execute(
            "select run_id, skipped_reason from runlane.claim_runs('w-gate', array['background'], "
            "5, interval '1 minute', null, true, array['gated'])"
        ).fetchall()
    expected = {runs[switched_off]: "agent_off", runs[spent]: "budget_exhausted"}
    assert dict(rows) == expected and len(rows) == 2
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        for run_id, reason in expected.items():
            assert conn.execute(
                "select state, reason from runlane.runs where run_id = %s", (run_id,)
            ).fetchone() == ("skipped", reason)


def test_worker_processes_on_each_node_drain_chat_and_background_runs(citus_nodes):
    """One `runlane worker` per worker node, each serving both lanes: the chat and
    background runs of organizations on both nodes, each sent to its organization's node,
    all succeed, each claimed by the worker of the node that holds it."""
    coordinator = citus_nodes[0]
    ports = {node.port: node for node in citus_nodes}
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        by_node = organizations_of_handler(conn, "org-drain", "drain", count=6)
    runs: dict[int, list[int]] = {}
    for port, orgs in by_node.items():
        with psycopg.connect(ports[port].dsn_for("sharded"), autocommit=True) as node:
            for org in orgs:
                for i in range(5):
                    runs.setdefault(port, []).append(
                        node.execute(
                            "select run_id from runlane.send_message(%s, %s, 'hello')",
                            (f"agent-{org}", f"drain-{i}"),
                        ).fetchone()[0]
                    )
                runs[port].append(
                    node.execute(
                        "select run_id from runlane.run_now(%s)", (f"agent-{org}",)
                    ).fetchone()[0]
                )
    workers = {
        port: WorkerProcess(
            ports[port].dsn_for("sharded"),
            "--agent",
            "drain=runlane.agents.echo:agent",
            "--no-maintenance",
            "--scan-interval",
            "1",
            lanes=("interactive", "background"),
        )
        for port in by_node
    }
    everything = [run for port_runs in runs.values() for run in port_runs]
    try:
        with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
            wait_until(
                lambda: (
                    conn.execute(
                        "select count(*) from runlane.runs where run_id = any(%s) "
                        "and state = 'succeeded'",
                        (everything,),
                    ).fetchone()[0]
                    == len(everything)
                ),
                what="every run of both nodes succeeded",
            )
            for port, port_runs in runs.items():
                ran = {
                    json.loads(line)["run.id"]
                    for line in workers[port].raw_lines()
                    if '"run.id"' in line
                }
                assert ran == set(port_runs)  # the runs of its node, and only those
                claimed_by = conn.execute(
                    "select count(*) from runlane.run_events where event = 'run.claimed' "
                    "and run_id = any(%s)",
                    (port_runs,),
                ).fetchone()[0]
                assert claimed_by == len(port_runs)  # each claimed once, never retried
    finally:
        for worker in workers.values():
            worker.close()
    for worker in workers.values():
        worker.check_logs()


def test_a_short_chaos_soak_on_the_cluster_loses_and_repeats_nothing(citus_nodes):
    """Two `runlane worker` processes per worker node drain chat and background runs of
    organizations on both nodes, each message sent to its organization's node, while
    faults hit them: a worker killed with kill -9 (and started again), a worker stopped
    with SIGSTOP past its lease (and continued), a worker node stopped as by a crash (and
    started again). reap_stale runs from the coordinator throughout. Afterwards every
    acknowledged message belongs to a run that succeeded, every background run succeeded
    or (its worker gone) ended failed/stale, nothing is left queued or running, each
    run's claims carry increasing fences and it finished once, no replaced owner wrote an
    output, no organization ever ran more background runs than its cap, and while the
    node was down the other node's organizations went on."""
    coordinator, first_node, second_node = citus_nodes
    ports = {node.port: node for node in citus_nodes}
    lease = 3.0
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        by_node = organizations_of_handler(conn, "org-chaos", "chaos", count=6)
        orgs = [org for port_orgs in by_node.values() for org in port_orgs]
        for org in orgs:
            conn.execute("select runlane.put_org(%s, '{\"agent_max_concurrency\": 2}')", (org,))
            for k in range(3):
                conn.execute(
                    "select runlane.put_agent(%s, %s)",
                    (
                        f"bg-{org}-{k}",
                        Jsonb(
                            {"org_id": org, "owner_id": f"user-{org}", "model": "echo",
                             "handler": "chaos"}
                        ),
                    ),
                )  # fmt: skip
    env = {"RUNLANE_ECHO_DELAY": "0.05", "RUNLANE_ECHO_CHUNKS": "3"}

    def start_worker(port: int) -> WorkerProcess:
        return WorkerProcess(
            ports[port].dsn_for("sharded"),
            "--agent", "chaos=runlane.agents.echo:agent",
            "--no-maintenance", "--scan-interval", "0.5", "--lease", str(lease),
            "--shutdown-grace", "1",
            lanes=("interactive", "background"),
            env=env,
        )  # fmt: skip

    workers = [start_worker(port) for port in sorted(by_node) for _ in range(2)]
    stop = threading.Event()
    acknowledged: list[tuple[str, int]] = []  # (organization, message id)
    background: list[tuple[str, int]] = []  # (organization, run id)
    caps_seen: dict[str, int] = {}
    problems: list[BaseException] = []

    def load(port: int) -> None:
        """Messages to the organizations of one node, and now and then a background run;
        a node that is down acknowledges nothing until it is back."""
        node = psycopg.connect(ports[port].dsn_for("sharded"), autocommit=True)
        n = 0
        while not stop.is_set():
            org = by_node[port][n % len(by_node[port])]
            try:
                message_id, _, _ = node.execute(
                    "select * from runlane.send_message(%s, %s, 'hello')",
                    (f"agent-{org}", f"chaos-{n % 7}"),  # threads reused: messages held
                ).fetchone()
                acknowledged.append((org, message_id))
                if n % 3 == 0:
                    run_id, state = node.execute(
                        "select run_id, state from runlane.run_now(%s)", (f"bg-{org}-{n % 9 // 3}",)
                    ).fetchone()
                    if state == "queued":
                        background.append((org, run_id))
            except psycopg.OperationalError:
                node.close()
                node = wait_until(
                    lambda: _connect_or_none(ports[port].dsn_for("sharded")),
                    what="the node took connections again",
                )
            except psycopg.Error as exc:
                problems.append(exc)
            n += 1
            time.sleep(0.03)
        node.close()

    def maintain() -> None:
        with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
            while not stop.is_set() or not maintained.is_set():
                try:
                    conn.execute("select runlane.reap_stale()")
                    for org, running in conn.execute(
                        "select org_id, count(*) from runlane.runs where state = 'running' "
                        "and lane = 'background' and org_id = any(%s) group by org_id",
                        (orgs,),
                    ).fetchall():
                        caps_seen[org] = max(caps_seen.get(org, 0), running)
                except psycopg.Error:
                    pass  # (a node is down: the next pass reaps)
                time.sleep(0.3)

    maintained = threading.Event()
    threads = [
        threading.Thread(target=maintain),
        *(threading.Thread(target=load, args=(port,)) for port in by_node),
    ]
    for thread in threads:
        thread.start()
    try:
        time.sleep(2)
        killed = workers[0]
        killed.signal(signal.SIGKILL)
        killed.wait_exit()
        workers.append(start_worker(sorted(by_node)[0]))  # (the killed one's node)
        time.sleep(1)
        paused = workers[2]
        paused.signal(signal.SIGSTOP)
        time.sleep(lease + 1.5)
        paused.signal(signal.SIGCONT)
        time.sleep(1)
        down, up = second_node, first_node
        up_orgs = by_node[up.port]

        def succeeded_of(org_list: list[str]) -> int:
            with psycopg.connect(up.dsn_for("sharded"), autocommit=True) as conn:
                return sum(
                    conn.execute(
                        "select count(*) from runlane.runs where org_id = %s "
                        "and state = 'succeeded'",
                        (org,),
                    ).fetchone()[0]
                    for org in org_list
                )

        down.stop("immediate")
        try:
            before = succeeded_of(up_orgs)
            time.sleep(3)
            during = succeeded_of(up_orgs)
        finally:
            down.start()
        time.sleep(2)
    finally:
        stop.set()
        for thread in threads[1:]:
            thread.join()
    try:
        with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
            message_ids = [message_id for _, message_id in acknowledged]
            run_ids = [run_id for _, run_id in background]

            def settled() -> bool:
                return (
                    conn.execute(
                        "select count(*) from runlane.runs where org_id = any(%s) "
                        "and state in ('queued', 'running')",
                        (orgs,),
                    ).fetchone()[0]
                    == 0
                )

            wait_until(settled, timeout=120, what="every run of the soak finished")
            maintained.set()
            threads[0].join()
            unsettled = conn.execute(
                "select m.message_id, r.state from runlane.messages as m "
                "left join runlane.runs as r on r.org_id = m.org_id and r.run_id = m.run_id "
                "where m.org_id = any(%s) and m.message_id = any(%s) "
                "and r.state is distinct from 'succeeded'",
                (orgs, message_ids),
            ).fetchall()
            found = conn.execute(
                "select count(*) from runlane.messages where org_id = any(%s) "
                "and message_id = any(%s)",
                (orgs, message_ids),
            ).fetchone()[0]
            background_states = dict(
                conn.execute(
                    "select state || '/' || coalesce(reason, ''), count(*) from runlane.runs "
                    "where org_id = any(%s) and run_id = any(%s) group by 1",
                    (orgs, run_ids),
                ).fetchall()
            )
            claims = conn.execute(
                "select run_id, array_agg((detail ->> 'fence')::bigint order by event_id) "
                "from runlane.run_events where org_id = any(%s) and event = 'run.claimed' "
                "group by run_id",
                (orgs,),
            ).fetchall()
            finishes = conn.execute(
                "select count(*) from (select run_id from runlane.run_events "
                "where org_id = any(%s) and event = 'run.finished' "
                "group by run_id having count(*) > 1) as twice",
                (orgs,),
            ).fetchone()[0]
            retried = sum(len(fences) > 1 for _, fences in claims)
            # a replaced owner wrote nothing: no output after its run ended, none of an
            # attempt the run never reached
            late_outputs = conn.execute(
                "select count(*) from runlane.run_outputs as o "
                "join runlane.runs as r on r.org_id = o.org_id and r.run_id = o.run_id "
                "where o.org_id = any(%s) and (o.created_at > r.finished_at "
                "or o.attempt > r.attempts)",
                (orgs,),
            ).fetchone()[0]
    finally:
        stop.set()
        maintained.set()
        for thread in threads:
            thread.join()
        for worker in workers:
            worker.close()
    print(
        {
            "acknowledged": len(acknowledged),
            "background": background_states,
            "claimed_again": retried,
            "largest_background_running": max(caps_seen.values(), default=0),
            "succeeded_while_a_node_was_down": during - before,
        }
    )
    assert problems == []
    assert len(acknowledged) > 100 and background
    assert found == len(set(message_ids)), "every acknowledged message is kept"
    assert unsettled == [], "every acknowledged message's run succeeded"
    # (a background run whose worker died ends failed/stale: the agent is free again)
    assert set(background_states) <= {"succeeded/", "failed/stale"}, background_states
    assert late_outputs == 0
    assert all(fences == sorted(set(fences)) for _, fences in claims), "fences only grow"
    assert retried > 0, "the faults took runs from workers, and others claimed them again"
    assert finishes == 0, "no run finished twice"
    assert caps_seen and max(caps_seen.values()) <= 2, caps_seen
    assert during > before, "the other node's organizations went on while one was down"
    for worker in workers[1:]:
        worker.check_logs()


def _connect_or_none(dsn: str) -> psycopg.Connection | None:
    """A connection, or None; an attempt never waits more than 2 s (one made as a node
    goes down can otherwise wait past the caller's whole deadline)."""
    try:
        return psycopg.connect(dsn, autocommit=True, connect_timeout=2)
    except psycopg.OperationalError:
        return None


def test_a_claim_never_runs_a_statement_its_session_prepared_under_the_reads_name(citus_nodes):
    """A node's claim prepares its read once per session, under a name a worker login can
    compute. A statement the session prepared under that name (here: one answering with
    a run that does not exist) is never executed with the claim's rights: the claim
    prepares its own again and claims the queued run."""
    coordinator = citus_nodes[0]
    ports = {node.port: node for node in citus_nodes}
    with psycopg.connect(coordinator.dsn_for("sharded"), autocommit=True) as conn:
        by_node = organizations_of_handler(conn, "org-squat", "squat", count=6)
        home = next(iter(by_node))
        org = by_node[home][0]
        _, first, _ = conn.execute(
            "select * from runlane.send_message(%s, 'squat-1', 'hi')", (f"agent-{org}",)
        ).fetchone()
        _, second, _ = conn.execute(
            "select * from runlane.send_message(%s, 'squat-2', 'hi')", (f"agent-{org}",)
        ).fetchone()
    claim = (
        "select run_id from runlane.claim_runs('w-squat', array['interactive'], 1, "
        "interval '1 minute', null, false, array['squat'])"
    )
    with psycopg.connect(ports[home].dsn_for("sharded"), autocommit=True) as node:
        first_claim = node.execute(claim).fetchall()
        [(name,)] = node.execute(
            "select name from pg_prepared_statements where name like 'runlane_node_claim_read_%'"
        ).fetchall()
        node.execute(f"deallocate {name}")
        node.execute(
            f"prepare {name}(text[], text[], int, bigint[], text[], text[], int) as "
            "select array[-1]::bigint[], array['not-an-org']::text[]"
        )
        second_claim = node.execute(claim).fetchall()
    assert first_claim == [(first,)]
    assert second_claim == [(second,)]
