"""Agent and user ids are one namespace per database although every key includes org_id:
creators of one new id in different organizations at once, the first still uncommitted
while the others arrive, end with the id in exactly one organization. When the first
commits, every other organization's creator is refused 23505 ("… is taken"); when it
rolls back, exactly one of the waiters gets the id and the rest are refused."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

ORGS = 6
WAITING = (
    "select count(*) from pg_stat_activity "
    "where datname = current_database() and wait_event_type = 'Lock' "
    "and pid <> pg_backend_pid()"
)
CREATE = {
    "agent": (
        "select runlane.put_agent('agent-shared', jsonb_build_object("
        "'org_id', %(org)s::text, 'owner_id', 'owner-of-' || %(org)s, 'model', 'm'))"
    ),
    "user": "select runlane.put_user('user-shared', %(org)s)",
}
TABLE = {"agent": "agents", "user": "users"}


def _wait_for_waiters(conn, expected):
    deadline = time.monotonic() + 60
    while conn.execute(WAITING).fetchone()[0] < expected:
        assert time.monotonic() < deadline, "the other creators never waited on the first"
        time.sleep(0.02)


@pytest.mark.parametrize("kind", ["agent", "user"])
@pytest.mark.parametrize("commit_first", [True, False], ids=["first-commits", "first-rolls-back"])
def test_one_new_id_created_in_several_organizations_lands_in_one(db_dsn, conn, kind, commit_first):
    orgs = [f"org-{i}" for i in range(ORGS)]
    for org in orgs:
        conn.execute("select runlane_test.org(%s)", (org,))
        conn.execute("select runlane_test.owner(%s, %s)", (f"owner-of-{org}", org))
    outcomes: dict[str, str] = {}
    barrier = threading.Barrier(ORGS - 1)

    def creator(org):
        with psycopg.connect(db_dsn, autocommit=True) as c:
            barrier.wait()
            try:
                c.execute(CREATE[kind], {"org": org})
                outcomes[org] = "created"
            except psycopg.errors.UniqueViolation as exc:
                assert "is taken" in str(exc)
                outcomes[org] = "taken"

    with psycopg.connect(db_dsn) as first, psycopg.connect(db_dsn, autocommit=True) as watch:
        first.execute(CREATE[kind], {"org": orgs[0]})  # uncommitted
        threads = [threading.Thread(target=creator, args=(org,)) for org in orgs[1:]]
        for t in threads:
            t.start()
        _wait_for_waiters(watch, ORGS - 1)
        if commit_first:
            first.commit()
        else:
            first.rollback()
        for t in threads:
            t.join()

    created = sorted(org for org, outcome in outcomes.items() if outcome == "created")
    assert len(outcomes) == ORGS - 1
    assert len(created) == (0 if commit_first else 1), outcomes
    owner = orgs[0] if commit_first else created[0]
    rows = conn.execute(
        f"select org_id from runlane.{TABLE[kind]} where {kind}_id = %s", (f"{kind}-shared",)
    ).fetchall()
    assert rows == [(owner,)]
    assert conn.execute(
        f"select org_id from runlane.{kind}_orgs where {kind}_id = %s", (f"{kind}-shared",)
    ).fetchall() == [(owner,)]
