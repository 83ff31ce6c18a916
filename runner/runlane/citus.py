"""`runlane migrate --citus`: the same schema, distributed over a Citus cluster.

Run on the coordinator of a cluster whose worker nodes are added (`citus_add_node`), with
the `citus` extension created in the database on every node. It applies the migrations as
on plain PostgreSQL, then distributes once:

  1. the organizations' tables by `org_id`, all placed with `platform_settings` (one
     co-location group: an organization's rows of every table live on one node);
     `runs` and `messages` point at each other, so their shared key is dropped first and
     added again once both are distributed, deferred to the commit;
  2. then the global tables as reference tables (a copy on every node). Made first, one
     would turn the whole key-connected group into citus-local tables;
  3. then the functions again, so Citus creates them on every node;
  4. then a copy of the global tables on every node, a node added since included;
  5. then every API login's entry again, with the oid the login has on each worker node
     (a login's oid is one server's), so calls sent straight to a node know it;
  6. then, on every worker node, its own table of claim receipts
     (`runlane.node_claim_receipts`, no Citus table): a worker claims on one node, and a
     global row would be written on every server with each claim, and wait for a node
     that is down.

What Citus cannot hold is dropped on the way, each for a reason the engine's rules give:
the fill triggers (`<table>_org_id`: every row must arrive with its organization to reach
its node), the logins' and scopes' keys to `platform_settings` and the computer leases'
key to `runs` (a reference table cannot point at a distributed one).

Distributing copies every table's rows into shards under its locks: it is a step taken
with the workers stopped, like the contract step. Running it again distributes nothing
more and brings a node added since up to date: its copies and its logins' entries.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

from .migrate import Migration, MigrationError, install_functions, migrate
from .rows import one

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
    "api_login_nodes",
    "api_scopes",
    "stream_keys",
    "leader",
    "workers",
    "claim_receipts",
)
FILLED_BY_TRIGGER = (
    "threads",
    "run_outputs",
    "run_events",
    "idempotency_keys",
    "charge_buckets",
    "computer_leases",
)
# Each worker node's claim receipts (runlane._claim_runs_of_node): claim_receipts' columns,
# in a table of that node alone.
NODE_CLAIM_RECEIPTS = """
create table if not exists runlane.node_claim_receipts (
    worker_id text not null,
    lanes text[] not null,
    claim_key uuid not null,
    run_ids bigint[] not null default '{}',
    fences bigint[] not null default '{}',
    claimed_at timestamptz not null default now(),
    primary key (worker_id, lanes)
)
"""
KEYS_CITUS_CANNOT_HOLD = (
    ("api_logins", "api_logins_org_id_fkey"),
    ("api_scopes", "api_scopes_org_id_fkey"),
    ("computer_leases", "computer_leases_run_id_fkey"),
)


def _distributed_tables(conn: psycopg.Connection) -> set[str]:
    """runlane's tables Citus holds, distributed or reference."""
    no_citus = "select to_regclass('pg_catalog.pg_dist_partition') is null"
    if one(conn.execute(no_citus).fetchone())[0]:
        return set()
    return {
        name
        for (name,) in conn.execute(
            "select c.relname::text from pg_catalog.pg_dist_partition p "
            "join pg_class c on c.oid = p.logicalrelid "
            "where c.relnamespace = 'runlane'::regnamespace"
        ).fetchall()
    }


def _require_coordinator(conn: psycopg.Connection) -> None:
    has_citus = one(
        conn.execute(
            "select exists (select 1 from pg_extension where extname = 'citus')"
        ).fetchone()
    )[0]
    if not has_citus:
        raise MigrationError(
            "the citus extension is not in this database: load citus "
            "(shared_preload_libraries), run `create extension citus` here and on every "
            "worker node, add the nodes (`select citus_add_node(host, port)`), then run "
            "`runlane migrate --citus` again"
        )
    workers = one(
        conn.execute(
            "select count(*) from pg_dist_node "
            "where noderole = 'primary' and isactive and groupid <> 0"
        ).fetchone()
    )[0]
    if workers == 0:
        raise MigrationError(
            "this coordinator has no worker nodes: add them with "
            "`select citus_add_node(host, port)`, then run `runlane migrate --citus` again"
        )


def migrate_citus(conn: psycopg.Connection, lock_timeout: float = 60.0) -> list[Migration]:
    """Apply pending migrations, then distribute the schema (see the module's docstring);
    returns the migrations applied. MigrationError where this is no coordinator with
    worker nodes."""
    conn.autocommit = True
    _require_coordinator(conn)
    applied = migrate(conn, lock_timeout=lock_timeout)
    # Triggers on distributed tables (organizations, agents, users) run on the nodes that
    # hold the shards; Citus allows them where this is on, in every session that creates
    # or fires them: hence the database's default, not only this session's.
    conn.execute(
        sql.SQL("alter database {} set citus.enable_unsafe_triggers = on").format(
            sql.Identifier(conn.info.dbname)
        )
    )
    conn.execute("set citus.enable_unsafe_triggers = on")
    _distribute(conn)
    install_functions(conn)
    # A node added since holds no copy of the global tables until asked: every call there
    # would read them from another server. ('block_writes': plain COPY, no logical
    # replication needed; the tables are small and the step runs with the workers stopped.)
    conn.execute("select replicate_reference_tables('block_writes')")
    _enter_logins_on_every_node(conn)
    conn.execute("select run_command_on_workers(%s)", (NODE_CLAIM_RECEIPTS,))
    return applied


def _enter_logins_on_every_node(conn: psycopg.Connection) -> None:
    """Every API login's entry again, which records the oid it has on each worker node
    (runlane.scope_api_login): entries made before the schema was distributed, or before
    a node was added, hold there too."""
    conn.execute(
        "select runlane.scope_api_login(r.rolname, l.org_id) "
        "from runlane.api_logins as l join pg_catalog.pg_roles as r on r.oid = l.role_oid "
        "where r.rolcanlogin"
    )


def _distribute(conn: psycopg.Connection) -> None:
    """Each step is skipped where it is done, so a run that stopped half way finishes."""
    done = _distributed_tables(conn)
    with conn.transaction():
        for table in FILLED_BY_TRIGGER:
            conn.execute(f"drop trigger if exists {table}_org_id on runlane.{table}")
        for table, key in KEYS_CITUS_CANNOT_HOLD:
            conn.execute(f"alter table runlane.{table} drop constraint if exists {key}")
        if "messages" not in done:
            conn.execute(
                "alter table runlane.runs drop constraint if exists runs_source_message_of_run_fk"
            )
    # create_distributed_table moves a table's rows into its shards; each call commits.
    for table in DISTRIBUTED:
        if table not in done:
            conn.execute(
                "select create_distributed_table(%s, 'org_id', colocate_with => %s)",
                (
                    f"runlane.{table}",
                    "none" if table == "platform_settings" else "runlane.platform_settings",
                ),
            )
    if one(
        conn.execute(
            "select not exists (select 1 from pg_constraint "
            "where conname = 'runs_source_message_of_run_fk')"
        ).fetchone()
    )[0]:
        conn.execute(
            "alter table runlane.runs add constraint runs_source_message_of_run_fk "
            "foreign key (run_id, source_message_id, org_id) "
            "references runlane.messages (run_id, message_id, org_id) "
            # Citus runs a statement's CTE as a statement of its own: the run that a
            # message and its run, written together, insert first waits for its message
            # until the commit (submit_message, _dispatch_held_messages).
            "deferrable initially deferred"
        )
    for table in REFERENCE:
        if table not in done:
            conn.execute("select create_reference_table(%s)", (f"runlane.{table}",))
