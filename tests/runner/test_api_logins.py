"""API logins act only where a database says so, with real logins and two runlane
databases in one cluster.

Roles are the cluster's, entries (runlane.api_logins) each database's: a login scoped to
an organization in one database is refused in another until entered there; an entry
names the role, so a rename keeps it and a new login with the old name has none; a login
holding runlane_api with no entry is refused (42501, the hint names runlane grant-login);
a scoped login that is also a member of runlane_worker, however granted, is refused in
the API functions and in claim_runs. Upgrading to 0020 changes nobody's access.
"""

from __future__ import annotations

import subprocess
import sys
import uuid

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from runlane.migrate import migrate


@pytest.fixture
def second_db(pg_cluster, template_db, conn):
    """A second runlane database of the same cluster, with org-a and org-b as the first."""
    name = f"second_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_cluster.dsn, autocommit=True) as admin:
        admin.execute(f'create database "{name}" template "{template_db}"')
    dsn = pg_cluster.dsn_for(name)
    yield dsn
    with psycopg.connect(pg_cluster.dsn, autocommit=True) as admin:
        admin.execute(
            "select pg_terminate_backend(pid) from pg_stat_activity where datname = %s", (name,)
        )
        admin.execute(f'drop database "{name}"')


@pytest.fixture
def roles(conn):
    """new(*grants) -> a new login's name (unique: roles are cluster-wide); all dropped."""
    made: list[str] = []

    def new(*grants: str, name: str | None = None) -> str:
        name = name or f"tl_{uuid.uuid4().hex[:10]}"
        conn.execute(f'create role "{name}" login')
        made.append(name)
        for role in grants:
            conn.execute(f'grant "{role}" to "{name}"')
        return name

    new.made = made  # type: ignore[attr-defined]
    yield new
    for name in made:
        conn.execute(f'drop role if exists "{name}"')


def _orgs(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("select runlane_test.agent('agent-a', 'org-a')")
        c.execute("select runlane_test.agent('agent-b', 'org-b')")


def _call(dsn: str, user: str, sql: str, params=()) -> tuple[str, str, str]:
    """(sqlstate or 'ok', message, hint) of one call as `user`."""
    with psycopg.connect(make_conninfo(dsn, user=user), autocommit=True) as c:
        try:
            c.execute(sql, params)
        except psycopg.Error as exc:
            return exc.sqlstate, exc.diag.message_primary or "", exc.diag.message_hint or ""
    return "ok", "", ""


OWN = "select * from runlane.run_now('agent-a')"
FOREIGN = "select * from runlane.run_now('agent-b')"
READ = "select runlane.stream_token(1)"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "runlane", *args], capture_output=True, text=True, timeout=60
    )


def test_a_scope_is_this_databases_and_another_database_refuses_the_login(
    conn, db_dsn, second_db, roles
):
    _orgs(db_dsn)
    _orgs(second_db)
    name = roles("runlane_api")
    conn.execute("select runlane.scope_api_login(%s, 'org-a')", (name,))
    assert _call(db_dsn, name, OWN)[0] == "ok"
    assert _call(db_dsn, name, FOREIGN)[0] == "RL008"
    for sql in (OWN, FOREIGN, READ, "select * from runlane.lane_status()"):
        state, message, hint = _call(second_db, name, sql)
        assert state == "42501", sql
        assert f"login {name} holds runlane_api" in message
        assert f"runlane grant-login {name} --api" in hint
    with psycopg.connect(second_db, autocommit=True) as c:
        c.execute("select runlane.scope_api_login(%s, 'org-b')", (name,))
    assert _call(second_db, name, OWN)[0] == "RL008", "org-b only in the second database"
    assert _call(second_db, name, FOREIGN)[0] == "ok"
    assert _call(db_dsn, name, FOREIGN)[0] == "RL008", "and still org-a only in the first"


def test_a_rename_keeps_the_entry_and_a_new_login_with_the_old_name_has_none(conn, db_dsn, roles):
    _orgs(db_dsn)
    old = roles("runlane_api")
    conn.execute("select runlane.scope_api_login(%s, 'org-a')", (old,))
    new = f"tl_{uuid.uuid4().hex[:10]}"
    conn.execute(f'alter role "{old}" rename to "{new}"')
    roles.made.append(new)
    assert _call(db_dsn, new, OWN)[0] == "ok"
    assert _call(db_dsn, new, FOREIGN)[0] == "RL008", "the renamed login is still scoped"
    impostor = roles("runlane_api", name=old)
    state, _message, hint = _call(db_dsn, impostor, FOREIGN)
    assert (state, f"runlane grant-login {old} --api" in hint) == ("42501", True)
    assert conn.execute("select count(*) from runlane.api_logins").fetchone()[0] == 1


def test_a_scoped_login_given_runlane_worker_by_plain_grant_is_refused(conn, db_dsn, roles):
    _orgs(db_dsn)
    name = roles("runlane_api")
    conn.execute("select runlane.scope_api_login(%s, 'org-a')", (name,))
    group = f"tlg_{uuid.uuid4().hex[:10]}"
    conn.execute(f'create role "{group}" nologin in role runlane_worker')
    roles.made.insert(0, group)
    conn.execute(f'grant "{group}" to "{name}"')  # a worker through another role
    for sql in (OWN, "select * from runlane.lane_status()", READ):
        state, message, hint = _call(db_dsn, name, sql)
        assert state == "42501", sql
        assert "member of runlane_worker" in message and "revoke runlane_worker" in hint
    state, message, _hint = _call(
        db_dsn, name, "select * from runlane.claim_runs('w1', array['interactive'], 10)"
    )
    assert state == "42501" and "may not act as a worker" in message
    conn.execute(f'revoke "{group}" from "{name}"')
    assert _call(db_dsn, name, OWN)[0] == "ok"
    conn.execute(f'grant runlane_worker to "{name}"')  # and directly
    assert _call(db_dsn, name, OWN)[0] == "42501"
    assert (
        _call(db_dsn, name, "select * from runlane.claim_runs('w1', array['interactive'], 10)")[0]
        == "42501"
    )


def test_an_api_login_with_no_entry_is_refused_and_grant_login_enters_it(
    conn, db_dsn, second_db, roles
):
    _orgs(db_dsn)
    _orgs(second_db)
    name = roles("runlane_api")  # a plain GRANT: no entry in either database
    for dsn in (db_dsn, second_db):
        state, message, hint = _call(dsn, name, OWN)
        assert (state, message) == (
            "42501",
            f"login {name} holds runlane_api but may not act in this database",
        )
        assert f"runlane grant-login {name} --api [--org X]" in hint
    out = cli("grant-login", name, "--api", "--dsn", db_dsn)
    assert out.returncode == 0, out.stderr
    assert _call(db_dsn, name, FOREIGN)[0] == "ok", "--api alone: every organization"
    assert _call(second_db, name, FOREIGN)[0] == "42501", "entered in the first database only"
    out = cli("grant-login", name, "--api", "--org", "org-a", "--dsn", second_db)
    assert out.returncode == 0, out.stderr
    assert _call(second_db, name, FOREIGN)[0] == "RL008"
    assert _call(second_db, name, OWN)[0] == "ok"
    # a login outside runlane_api (a worker reading the views) needs no entry
    worker = roles("runlane_worker")
    assert _call(db_dsn, worker, "select * from runlane.lane_status()")[0] == "ok"


def test_the_cli_names_grant_login_for_a_login_with_no_entry(db_dsn, roles):
    _orgs(db_dsn)
    name = roles("runlane_api")
    out = cli("run-now", "agent-a", "--dsn", make_conninfo(db_dsn, user=name))
    assert out.returncode != 0
    assert out.stderr.startswith("42501: login ")
    assert f"runlane grant-login {name} --api [--org X]" in out.stderr
    assert "Traceback" not in out.stderr


def test_upgrading_to_0020_changes_nobodys_access(empty_db_dsn, conn, roles):
    with psycopg.connect(empty_db_dsn, autocommit=True) as db:
        migrate(db, to=18)
        db.execute("insert into runlane.platform_settings (org_id) values ('org-a')")
        scoped = roles("runlane_api")
        unscoped = roles("runlane_api")
        group = f"tlg_{uuid.uuid4().hex[:10]}"
        conn.execute(f'create role "{group}" nologin in role runlane_api')
        roles.made.insert(0, group)
        via_group = roles(group)
        worker = roles("runlane_worker")
        renamed = roles("runlane_api")
        db.execute(
            "insert into runlane.api_scopes (login, org_id) values (%s, 'org-a'), "
            "('no_such_login_any_more', 'org-a')",
            (scoped,),
        )
        migrate(db)
        entries = dict(
            db.execute(
                "select r.rolname::text, l.org_id from runlane.api_logins as l "
                "join pg_roles as r on r.oid = l.role_oid"
            ).fetchall()
        )
        # kept for sessions still running the earlier functions during the upgrade
        assert db.execute("select to_regclass('runlane.api_scopes')").fetchone()[0] is not None
    assert {k: v for k, v in entries.items() if k.startswith("tl")} == {
        scoped: "org-a",
        unscoped: None,
        via_group: None,
        renamed: None,
    }
    assert worker not in entries and group not in entries


def test_superusers_and_the_schema_owner_act_for_every_organization_without_an_entry(
    conn, db_dsn, roles
):
    _orgs(db_dsn)
    owner = roles("runlane_api")
    member = roles("runlane_api")
    superuser = conn.execute("select current_user").fetchone()[0]
    conn.execute(f'alter schema runlane owner to "{owner}"')
    conn.execute(f'grant "{owner}" to "{member}"')  # a member of the owner may act as it
    try:
        for name in (owner, member):
            assert _call(db_dsn, name, FOREIGN)[0] == "ok", name
        assert _call(db_dsn, superuser, FOREIGN)[0] == "ok"
    finally:
        conn.execute(f'alter schema runlane owner to "{superuser}"')
    assert _call(db_dsn, owner, FOREIGN)[0] == "42501", "no longer the owner: needs an entry"
    assert conn.execute("select count(*) from runlane.api_logins").fetchone()[0] == 0
