"""0027 and 0028: the rows of threads, run_outputs, run_events, idempotency_keys,
charge_buckets and computer_leases name their organization. On a schema before them the
functions write these rows without it (a rolling upgrade runs them there); the
migrations fill every older row from its run, agent or owner, and the rows written
afterwards carry it from the start."""

from __future__ import annotations

import psycopg
import pytest

from runlane.migrate import migrate

TABLES = (
    "threads",
    "run_outputs",
    "run_events",
    "idempotency_keys",
    "charge_buckets",
    "computer_leases",
)

# Each table's rows (x) joined to the run, agent or owner (o) whose organization they must name.
OWNERS = {
    "threads": "runlane.threads x join runlane.agents o using (agent_id)",
    "run_outputs": "runlane.run_outputs x join runlane.runs o using (run_id)",
    "run_events": "runlane.run_events x join runlane.runs o using (run_id)",
    "idempotency_keys": "runlane.idempotency_keys x join runlane.agents o using (agent_id)",
    "charge_buckets": "runlane.charge_buckets x join runlane.users o on o.user_id = x.owner_id",
    "computer_leases": "runlane.computer_leases x join runlane.runs o using (run_id)",
}


def life_of_two_organizations(conn: psycopg.Connection, suffix: str) -> None:
    """A chat turn (keyed), and a computer-bound background run claimed, charged and left
    running (its computer lease live), in two organizations, through the functions."""
    for org in ("org-x", "org-y"):
        chat, box = f"agent-{org}-{suffix}", f"box-agent-{org}-{suffix}"
        conn.execute("select runlane.put_org(%s)", (org,))
        conn.execute("select runlane.put_user(%s, %s)", (f"owner-{org}", org))
        agent = (
            "select runlane.put_agent(%s, jsonb_build_object("
            "'org_id', %s::text, 'owner_id', %s::text, 'model', 'm', 'computer_id', %s::text))"
        )
        conn.execute(agent, (chat, org, f"owner-{org}", None))
        conn.execute(agent, (box, org, f"owner-{org}", f"box-{org}-{suffix}"))
        conn.execute(
            "select runlane.submit_message(%s, 'thread-1', 'hi', %s)", (chat, f"key-{suffix}")
        )
        conn.execute("select runlane.create_run(%s, 'manual')", (box,))
    claimed = conn.execute(
        "select run_id, fence, lane from runlane.claim_runs('worker-m', "
        "array['interactive', 'background'], 10)"
    ).fetchall()
    assert len(claimed) == 4
    for run_id, fence, lane in claimed:
        conn.execute("select runlane.append_output(%s, %s, 'text', 'hello')", (run_id, fence))
        if lane == "interactive":
            conn.execute("select runlane.finish_run(%s, %s, 'succeeded')", (run_id, fence))
        else:
            conn.execute("select runlane.charge(%s, %s, 1.5)", (run_id, fence))


def rows_and_strangers(conn: psycopg.Connection, table: str) -> tuple[int, int]:
    """(rows, rows whose org_id is not their owner's organization)."""
    rows = conn.execute(f"select x.org_id is not distinct from o.org_id from {OWNERS[table]}")
    named = [ok for (ok,) in rows.fetchall()]
    return len(named), named.count(False)


def test_rows_from_before_0027_name_their_organization_after_it(empty_db_dsn):
    with psycopg.connect(empty_db_dsn, autocommit=True) as conn:
        migrate(conn, to=26)
        life_of_two_organizations(conn, "old")

        migrate(conn)
        life_of_two_organizations(conn, "new")

        for table in TABLES:
            rows, strangers = rows_and_strangers(conn, table)
            assert rows > 0, table
            assert strangers == 0, (
                f"{table}: {strangers} of {rows} rows do not name their organization"
            )
        # rows of both generations, in both organizations
        assert conn.execute(
            "select count(distinct org_id), count(*) from runlane.computer_leases"
        ).fetchone() == (2, 4)


def test_0029_keys_name_the_organization_and_ids_stay_one_namespace(empty_db_dsn):
    with psycopg.connect(empty_db_dsn, autocommit=True) as conn:
        migrate(conn, to=28)
        life_of_two_organizations(conn, "old")
        # a row written by hand before 0029, without its organization
        conn.execute(
            "insert into runlane.run_events (run_id, event) "
            "select min(run_id), 'run.noted' from runlane.runs"
        )

        migrate(conn)

        keys = dict(
            conn.execute(
                "select conrelid::regclass::text, pg_get_constraintdef(oid) from pg_constraint "
                "where connamespace = 'runlane'::regnamespace and contype = 'p' "
                "and conrelid::regclass::text in ('runlane.runs', 'runlane.run_outputs', "
                "'runlane.agents', 'runlane.threads')"
            ).fetchall()
        )
        assert keys == {
            "runlane.runs": "PRIMARY KEY (run_id, org_id)",
            "runlane.run_outputs": "PRIMARY KEY (output_id, org_id)",
            "runlane.agents": "PRIMARY KEY (agent_id, org_id)",
            "runlane.threads": "PRIMARY KEY (agent_id, thread_id, org_id)",
        }
        for table in TABLES:
            assert rows_and_strangers(conn, table)[1] == 0, table
        # the id namespaces hold every agent and user, with its organization
        assert (
            conn.execute(
                "select count(*) from runlane.agents a "
                "join runlane.agent_orgs o using (agent_id, org_id)"
            ).fetchone()
            == conn.execute("select count(*) from runlane.agents").fetchone()
        )
        assert (
            conn.execute(
                "select count(*) from runlane.users u "
                "join runlane.user_orgs o using (user_id, org_id)"
            ).fetchone()
            == conn.execute("select count(*) from runlane.users").fetchone()
        )

        # An id another organization holds is taken, whoever creates it.
        with pytest.raises(
            psycopg.errors.UniqueViolation, match="agent id 'agent-org-x-old' is taken"
        ):
            conn.execute(
                "select runlane.put_agent('agent-org-x-old', "
                '\'{"org_id": "org-y", "owner_id": "owner-org-y"}\')'
            )
        with pytest.raises(psycopg.errors.UniqueViolation, match="user id 'owner-org-x' is taken"):
            conn.execute("select runlane.put_user('owner-org-x', 'org-y')")
        # A row cannot name another organization than its run's.
        run_x = conn.execute(
            "select run_id from runlane.runs where org_id = 'org-x' limit 1"
        ).fetchone()[0]
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            conn.execute(
                "insert into runlane.run_events (run_id, org_id, event) values (%s, 'org-y', 'x')",
                (run_x,),
            )
        # A row written by hand without its organization gets its run's.
        conn.execute(
            "insert into runlane.run_events (run_id, event) values (%s, 'run.noted_later')",
            (run_x,),
        )
        assert conn.execute(
            "select org_id from runlane.run_events where run_id = %s and event = 'run.noted_later'",
            (run_x,),
        ).fetchall() == [("org-x",)]
        # New agents and users enter their namespace, and leave it when erased.
        life_of_two_organizations(conn, "new")
        conn.execute("select runlane.erase_agent('agent-org-y-new')")
        assert conn.execute(
            "select org_id from runlane.agent_orgs where agent_id in "
            "('agent-org-x-new', 'agent-org-y-new') order by agent_id"
        ).fetchall() == [("org-x",)]
