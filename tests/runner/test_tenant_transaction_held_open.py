"""A tenant's transaction left open holds up that tenant's own rows, never another's.

A login scoped to org-a calls put_org, put_agent or put_user in a transaction and leaves
it open (a slow request does this). The scheduler's tick, the claims and every other
organization's writes go on: the patch locks its row `for no key update`, which the
foreign-key checks of new runs and messages (key share) never wait for, and the tick
skips an agent row it cannot lock at once. Each wait below is bounded by a
statement_timeout far under the functions' 5 s lock_timeout, so a wait fails the test
instead of slowing it.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

PATCHES = {
    "put_org": "select runlane.put_org('org-a', '{\"agent_iteration_cap\": 30}')",
    "put_agent": "select runlane.put_agent('agent-a1', '{\"prompt\": \"held\"}')",
    "put_user": "select runlane.put_user('owner-a', 'org-a', '{\"timezone\": \"Europe/Paris\"}')",
}


@pytest.fixture
def tenant(conn, db_dsn):
    """A login scoped to org-a, with org-a (agents a1, a2) and org-b (agent b1) in place."""
    name = f"held_{uuid.uuid4().hex[:10]}"
    conn.execute("select runlane_test.org('org-a'), runlane_test.org('org-b')")
    conn.execute(
        "select runlane_test.owner('owner-a', 'org-a'), runlane_test.owner('owner-b', 'org-b')"
    )
    for agent, org, owner in (
        ("agent-a1", "org-a", "owner-a"),
        ("agent-a2", "org-a", "owner-a"),
        ("agent-b1", "org-b", "owner-b"),
    ):
        conn.execute("select runlane_test.agent(%s, %s, null, %s)", (agent, org, owner))
    conn.execute(f'create role "{name}" login')
    conn.execute(f'grant runlane_api to "{name}"')
    conn.execute("select runlane.scope_api_login(%s, 'org-a')", (name,))
    yield make_conninfo(db_dsn, user=name)
    conn.execute(f'drop role "{name}"')


def _held(dsn: str, patch: str) -> psycopg.Connection:
    """The tenant's connection, its patch applied and its transaction left open."""
    held = psycopg.connect(dsn)
    held.execute(patch)
    return held


@pytest.mark.parametrize("patch", sorted(PATCHES))
def test_other_organizations_write_while_a_tenant_holds_a_patch_open(conn, tenant, patch):
    held = _held(tenant, PATCHES[patch])
    try:
        conn.execute("set statement_timeout = '1500ms'")
        b = conn.execute("select (runlane.run_now('agent-b1')).state").fetchone()[0]
        message = conn.execute(
            "select disposition from runlane.submit_message('agent-b1', 't-b', 'hello')"
        ).fetchone()[0]
        assert (b, message) == ("queued", "created")
        # the held organization's other agents take new runs too: a run's foreign key to its
        # organization takes a key-share lock, which a patch's lock never blocks
        a2 = conn.execute("select (runlane.run_now('agent-a2')).state").fetchone()[0]
        assert a2 == "queued"
    finally:
        held.rollback()
        held.close()


def test_the_tick_fires_every_other_agent_while_a_tenant_holds_its_agent(conn, tenant):
    due = datetime.now(UTC) - timedelta(minutes=1)
    for agent in ("agent-a1", "agent-a2", "agent-b1"):
        conn.execute(
            "update runlane.agents set schedule = 'every hour' where agent_id = %s", (agent,)
        )
        conn.execute("select runlane_test.due(%s, %s)", (agent, due))
    held = _held(tenant, PATCHES["put_agent"])  # holds agent-a1 and org-a's settings row
    held.execute(PATCHES["put_org"])
    try:
        conn.execute("set statement_timeout = '1500ms'")
        fired = {
            r[0]
            for r in conn.execute(
                "select agent_id from runlane.tick() where event = 'routine.fired'"
            )
        }
        # agent-a1 is skipped (its row is busy) and stays due for the next tick
        assert fired == {"agent-a2", "agent-b1"}
        still_due = conn.execute(
            "select next_run_at <= now() from runlane.agents where agent_id = 'agent-a1'"
        ).fetchone()[0]
        assert still_due
    finally:
        held.rollback()
        held.close()
    conn.execute("reset statement_timeout")
    fired_later = [
        r[0]
        for r in conn.execute("select agent_id from runlane.tick() where event = 'routine.fired'")
    ]
    assert fired_later == ["agent-a1"]
