"""The whole life of an agent through a login that is ONLY in runlane_api: create an
organization, a user and agents; schedule one, switch it off and on, lock and unlock it;
chat with it (a real worker process answers), press Run now (also with an idempotency
key), Stop a slow agent's run, read its status and timing, and see the finished runs
purged: by a login in runlane_worker, since purge_finished is the worker's and the api
login is refused it. Everything the api login does goes through functions: it may
neither read nor write the tables themselves.

The worker runs as a login that is only in runlane_worker, so the test also shows the
two roles together are enough to run runlane without a superuser. The superuser
connection (`conn`) only reads, and ages the finished runs for the purge.
"""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from worker_helpers import WorkerProcess, wait_until


@pytest.fixture
def logins(conn, db_dsn):
    """(api dsn, worker dsn): two new logins, one only in runlane_api, one only in
    runlane_worker."""
    names = [f"life_api_{uuid.uuid4().hex[:8]}", f"life_worker_{uuid.uuid4().hex[:8]}"]
    conn.execute(f'create role "{names[0]}" login in role runlane_api')
    conn.execute("select runlane.scope_api_login(%s, null)", (names[0],))
    conn.execute(f'create role "{names[1]}" login in role runlane_worker')
    yield make_conninfo(db_dsn, user=names[0]), make_conninfo(db_dsn, user=names[1])
    for name in names:
        conn.execute(f'drop role "{name}"')


def one(api: psycopg.Connection, sql: str, *params: object) -> dict:
    cur = api.execute(sql, params)
    names = [d.name for d in cur.description]
    row = cur.fetchone()
    assert row is not None, sql
    return dict(zip(names, row, strict=True))


def status(api: psycopg.Connection, run_id: int) -> dict:
    return one(api, "select * from runlane.run_status(%s)", run_id)


def finished(api: psycopg.Connection, run_id: int) -> dict:
    return wait_until(
        lambda: (s := status(api, run_id))["finished_at"] is not None and s,
        what=f"run {run_id} finished",
    )


def outputs(api: psycopg.Connection, run_id: int) -> list[tuple[int, int, str]]:
    return [
        tuple(r)
        for r in api.execute(
            "select output_id, attempt, body from runlane.outputs_since(%s, 0, 500)", (run_id,)
        ).fetchall()
    ]


def sqlstate(api: psycopg.Connection, sql: str, *params: object) -> str | None:
    try:
        api.execute(sql, params)
    except psycopg.Error as exc:
        return exc.sqlstate
    return None


def test_an_api_only_login_lives_an_agent_s_whole_life(conn, logins):
    api_dsn, worker_dsn = logins
    api = psycopg.connect(api_dsn, autocommit=True)
    worker: WorkerProcess | None = None

    def start_worker() -> WorkerProcess:
        nonlocal worker
        worker = WorkerProcess(
            worker_dsn,
            "--agent",
            "life_agent:agent",
            "--no-maintenance",
            "--scan-interval",
            "0.5",
            lanes=("interactive", "background"),
        )
        return worker

    try:
        _life(conn, api, worker_dsn, start_worker)
    finally:
        api.close()
        if worker is not None:
            worker.close()
            worker.check_logs()


def _life(conn, api, worker_dsn, start_worker) -> None:  # noqa: PLR0915 - one story
    # -- the tables are not the api login's: neither to read nor to write -----------------
    assert sqlstate(api, "select * from runlane.runs") == "42501"
    assert sqlstate(api, "update runlane.agents set enabled = false") == "42501"
    assert sqlstate(api, "insert into runlane.platform_settings (org_id) values ('x')") == "42501"

    # -- create: an organization, a user, two agents --------------------------------------
    org = one(
        api,
        "select * from runlane.put_org('org-life', %s)",
        json.dumps({"timezone": "Europe/Berlin", "agent_iteration_cap": 100000}),
    )
    assert (org["org_id"], org["timezone"], org["agent_iteration_cap"]) == (
        "org-life",
        "Europe/Berlin",
        100000,
    )
    user = one(api, "select * from runlane.put_user('ada', 'org-life', '{}')")
    assert (user["user_id"], user["org_id"], user["timezone"]) == ("ada", "org-life", None)
    helper = one(
        api,
        "select * from runlane.put_agent('helper', %s)",
        json.dumps(
            {"org_id": "org-life", "owner_id": "ada", "model": "m-1", "prompt": "Summarize the day"}
        ),
    )
    assert (
        helper["enabled"],
        helper["admin_locked"],
        helper["schedule"],
        helper["next_run_at"],
    ) == (True, False, "", None)
    one(
        api,
        "select * from runlane.put_agent('slowpoke', %s)",
        json.dumps(
            {
                "org_id": "org-life",
                "owner_id": "ada",
                "model": "m-1",
                "prompt": "slow work, until stopped",
            }
        ),
    )

    # -- schedule: next_run_at is set, and agent_schedules shows it in Berlin time ---------
    scheduled = one(
        api,
        "select * from runlane.put_agent('helper', %s)",
        json.dumps({"schedule": "daily at 08:00"}),
    )
    slot = scheduled["next_run_at"]
    assert slot is not None
    row = one(api, "select * from runlane.agent_schedules() where agent_id = 'helper'")
    assert (row["status"], row["timezone"], row["next_run_at"]) == (
        "scheduled",
        "Europe/Berlin",
        slot,
    )
    assert row["next_run_local"].endswith(" 08:00")

    # -- switch off and on ------------------------------------------------------------------
    off = one(api, "select * from runlane.put_agent('helper', '{\"enabled\": false}')")
    assert (off["enabled"], off["next_run_at"]) == (False, None)
    assert (
        one(api, "select status from runlane.agent_schedules() where agent_id = 'helper'")["status"]
        == "off"
    )
    assert sqlstate(api, "select * from runlane.run_now('helper')") == "RL002"
    on = one(api, "select * from runlane.put_agent('helper', '{\"enabled\": true}')")
    assert (on["enabled"], on["next_run_at"]) == (True, slot)

    # -- admin lock and unlock: a locked agent's Run now is refused with RL003 -----------
    locked = one(api, "select * from runlane.put_agent('helper', '{\"admin_locked\": true}')")
    assert (locked["admin_locked"], locked["next_run_at"]) == (True, None)
    assert sqlstate(api, "select * from runlane.run_now('helper')") == "RL003"
    assert sqlstate(api, "select * from runlane.run_now('helper', 'key-locked')") == "RL003"
    unlocked = one(api, "select * from runlane.put_agent('helper', '{\"admin_locked\": false}')")
    assert (unlocked["admin_locked"], unlocked["next_run_at"]) == (False, slot)
    assert conn.execute("select count(*) from runlane.runs").fetchone()[0] == 0

    # -- a worker, connected as the login only in runlane_worker, serves both lanes --------
    start_worker()

    # -- chat: submit_message + publish_run; read the reply through outputs_since ---------
    message = one(api, "select * from runlane.submit_message('helper', 'thread-1', 'hello')")
    assert message["disposition"] == "created"
    chat_run = message["run_id"]
    api.execute("select runlane.publish_run(%s)", (chat_run,))
    chat = finished(api, chat_run)
    replies = outputs(api, chat_run)
    assert [(attempt, body) for _id, attempt, body in replies] == [(1, "echo: hello")]
    assert (chat["state"], chat["last_output_id"]) == ("succeeded", replies[-1][0])

    # -- Run now, then Run now with an idempotency key (a retry answers the same run) ---------
    manual = one(api, "select * from runlane.run_now('helper')")
    assert (manual["state"], manual["trigger"], manual["prompt"]) == ("queued", "manual", None)
    api.execute("select runlane.publish_run(%s)", (manual["run_id"],))
    assert finished(api, manual["run_id"])["state"] == "succeeded"
    assert [b for _i, _a, b in outputs(api, manual["run_id"])] == ["echo: Summarize the day"]
    keyed = one(api, "select * from runlane.run_now('helper', 'press-1')")
    again = one(api, "select * from runlane.run_now('helper', 'press-1')")
    assert again["run_id"] == keyed["run_id"] and keyed["state"] == "queued"
    api.execute("select runlane.publish_run(%s)", (keyed["run_id"],))
    assert finished(api, keyed["run_id"])["state"] == "succeeded"
    assert (
        conn.execute(
            "select count(*) from runlane.runs where agent_id = 'helper' and trigger = 'manual'"
        ).fetchone()[0]
        == 2
    )

    # -- Stop: a slow agent's running run is canceled; nothing is written after ----------
    slow = one(api, "select * from runlane.run_now('slowpoke')")
    api.execute("select runlane.publish_run(%s)", (slow["run_id"],))
    wait_until(lambda: len(outputs(api, slow["run_id"])) >= 1, what="the slow run's output")
    assert (
        api.execute("select runlane.cancel_run(%s)", (slow["run_id"],)).fetchone()[0] == "running"
    )
    at_stop = status(api, slow["run_id"])["last_output_id"]
    stopped = finished(api, slow["run_id"])
    assert (stopped["state"], stopped["reason"], stopped["last_output_id"]) == (
        "canceled",
        "canceled",
        at_stop,
    )
    assert (
        api.execute("select runlane.cancel_run(%s)", (slow["run_id"],)).fetchone()[0] == "canceled"
    )
    # the worker takes the next message normally
    follow_up = one(api, "select * from runlane.submit_message('helper', 'thread-1', 'again')")
    api.execute("select runlane.publish_run(%s)", (follow_up["run_id"],))
    assert finished(api, follow_up["run_id"])["state"] == "succeeded"

    # -- status: run_status, run_timing, lane_status, agent_journal -------------------------
    timing = api.execute("select runlane.run_timing(%s)", (chat_run,)).fetchone()[0]
    assert timing["run.outcome"] == "succeeded"
    lanes = {
        r[0]: r[1:]
        for r in api.execute("select lane, queued, running from runlane.lane_status()").fetchall()
    }
    assert lanes == {"interactive": (0, 0), "background": (0, 0)}
    journal = api.execute(
        "select run_id, trigger, state from runlane.agent_journal('helper')"
    ).fetchall()
    assert journal == [
        (follow_up["run_id"], "interactive", "succeeded"),
        (keyed["run_id"], "manual", "succeeded"),
        (manual["run_id"], "manual", "succeeded"),
        (chat_run, "interactive", "succeeded"),
    ]
    assert api.execute(
        "select run_id, state, reason from runlane.agent_journal('slowpoke')"
    ).fetchall() == [(slow["run_id"], "canceled", "canceled")]

    # -- purge: the worker's, refused to the api login ---------------------------------------
    assert sqlstate(api, "select runlane.purge_finished('8 days', 1000)") == "42501"
    conn.execute(
        "update runlane.runs set created_at = created_at - interval '30 days', "
        "finished_at = finished_at - interval '30 days' where org_id = 'org-life'"
    )
    with psycopg.connect(worker_dsn, autocommit=True) as purger:
        purged = purger.execute("select runlane.purge_finished('8 days', 1000)").fetchone()[0]
    assert purged == 5
    assert conn.execute("select count(*) from runlane.runs").fetchone()[0] == 0
    assert sqlstate(api, "select * from runlane.run_status(%s)", chat_run) == "RL008"
    assert sqlstate(api, "select * from runlane.outputs_since(%s)", chat_run) == "RL008"
    # the organization, its user and its agents stay, with their settings
    kept = one(api, "select * from runlane.put_agent('helper', '{}')")
    assert (kept["enabled"], kept["admin_locked"], kept["next_run_at"]) == (True, False, slot)
