"""Management through a real login that holds only runlane_api.

An application creates an organization, a user and a scheduled agent, switches the agent
off and on and locks it, with put_org, put_user and put_agent alone: the tables stay
closed to it, and next_run_at follows each change. A login scoped to one organization
manages that organization only.
"""

from __future__ import annotations

import uuid

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from psycopg.types.json import Jsonb


@pytest.fixture
def api_login(conn, db_dsn):
    """make(org=None) -> dsn of a new login whose only grant is runlane_api."""
    made: list[str] = []

    def make(org: str | None = None) -> str:
        name = f"t13_{uuid.uuid4().hex[:10]}"
        conn.execute(f'create role "{name}" login')
        conn.execute(f'grant runlane_api to "{name}"')
        made.append(name)
        conn.execute("select runlane.scope_api_login(%s, %s)", (name, org))
        return make_conninfo(db_dsn, user=name)

    yield make
    conn.execute("delete from runlane.api_logins")
    for name in made:
        conn.execute(f'drop role "{name}"')


def _agent(c: psycopg.Connection, agent_id: str, patch: dict) -> dict:
    cur = c.execute("select * from runlane.put_agent(%s, %s)", (agent_id, Jsonb(patch)))
    names = [d.name for d in cur.description]
    return dict(zip(names, cur.fetchone(), strict=True))


def test_the_life_of_an_agent_through_runlane_api_alone(conn, api_login):
    dsn = api_login()
    with psycopg.connect(dsn, autocommit=True) as c:
        assert c.execute("""select array_agg(b.rolname::text) from pg_auth_members as m
                            join pg_roles as b on b.oid = m.roleid
                            where m.member = (select oid from pg_roles where rolname = session_user)
                         """).fetchone()[0] == ["runlane_api"]
        patch = Jsonb({"timezone": "Europe/Berlin", "agent_weekly_budget": 50})
        org = c.execute(
            "select org_id, timezone from runlane.put_org('acme', %s)", (patch,)
        ).fetchone()
        assert org == ("acme", "Europe/Berlin")
        user = c.execute("select org_id from runlane.put_user('ada', 'acme')").fetchone()
        assert user == ("acme",)
        agent = _agent(
            c,
            "digest",
            {
                "org_id": "acme",
                "owner_id": "ada",
                "model": "m-1",
                "prompt": "Summarize the day",
                "schedule": "daily at 08:00",
            },
        )
        assert agent["schedule"] == "daily at 08:00" and agent["next_run_at"] is not None
        first_slot = agent["next_run_at"]

        off = _agent(c, "digest", {"enabled": False})
        assert (off["enabled"], off["next_run_at"]) == (False, None)
        on = _agent(c, "digest", {"enabled": True})
        assert (on["enabled"], on["next_run_at"]) == (True, first_slot)
        locked = _agent(c, "digest", {"admin_locked": True})
        assert (locked["admin_locked"], locked["next_run_at"]) == (True, None)

        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("update runlane.agents set enabled = true")
        with pytest.raises(psycopg.Error) as err:
            _agent(c, "digest", {"enabled": "yes"})
        assert err.value.sqlstate == "22023" and "'enabled'" in err.value.diag.message_primary
    assert conn.execute(
        "select enabled, admin_locked, next_run_at, prompt from runlane.agents"
        " where agent_id = 'digest'"
    ).fetchone() == (True, True, None, "Summarize the day")


def test_a_scoped_login_manages_its_own_organization_only(conn, api_login):
    conn.execute("select runlane.put_org('org-a'), runlane.put_org('org-b')")
    conn.execute("select runlane.put_user('owner-b', 'org-b')")
    conn.execute(
        "select runlane.put_agent('agent-b', %s)",
        (Jsonb({"org_id": "org-b", "owner_id": "owner-b"}),),
    )
    dsn = api_login(org="org-a")
    with psycopg.connect(dsn, autocommit=True) as c:
        patched = c.execute(
            "select agent_max_concurrency "
            """from runlane.put_org('org-a', '{"agent_max_concurrency": 2}')"""
        ).fetchone()[0]
        assert patched == 2
        c.execute("select runlane.put_user('owner-a', 'org-a')")
        _agent(c, "agent-a", {"org_id": "org-a", "owner_id": "owner-a"})
        refused = {
            "create another organization": ("select runlane.put_org('org-new')", "RL008"),
            "patch another organization": ("select runlane.put_org('org-b')", "RL008"),
            # a taken id cannot be created: that one answer says "taken" and nothing more
            "a user of another organization": (
                "select runlane.put_user('owner-b', 'org-a')",
                "23505",
            ),
            # another organization's agent is an unknown one: a patch cannot create it
            "another organization's agent": (
                """select runlane.put_agent('agent-b', '{"enabled": false}')""",
                "22023",
            ),
            "move an agent": (
                """select runlane.put_agent('agent-a', '{"org_id": "org-b"}')""",
                "RL008",
            ),
            "an owner of another organization": (
                """select runlane.put_agent('agent-a', '{"owner_id": "owner-b"}')""",
                "RL008",
            ),
        }
        for what, (sql, code) in refused.items():
            with pytest.raises(psycopg.Error) as err:
                c.execute(sql)
            assert err.value.sqlstate == code, what
    assert (
        conn.execute(
            "select count(*) from runlane.platform_settings where org_id = 'org-new'"
        ).fetchone()[0]
        == 0
    )
    assert conn.execute(
        "select org_id, owner_id, enabled from runlane.agents order by agent_id"
    ).fetchall() == [("org-a", "owner-a", True), ("org-b", "owner-b", True)]
