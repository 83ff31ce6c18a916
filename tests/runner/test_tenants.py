"""Tenants, with real logins of the test cluster.

A login limited to organization A (`runlane.scope_api_login`, `runlane grant-login --api
--org`) gets, in every function runlane_api may execute, exactly the error an unknown
object gets for organization B's agents, runs, messages and owners, and works as usual
on its own; run_now returns no prompt (get_agent returns the one the application
wrote); a login with no runlane grant that LISTENs on runlane_outputs learns no run id;
claim_runs holds one worker to runlane.max_per_org running runs of one organization, and
a real worker with --max-per-org-strict stays within it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import psycopg
import pytest
import worker_helpers
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from worker_helpers import wait_until

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after

# Every function runlane_api may execute, called on ORGANIZATION B's objects, and the
# same call on an object that does not exist: both must fail alike for a login scoped
# to organization A. {run} is org B's run, {missing} a run id nobody has.
FOREIGN_CALLS = {
    "submit_message": ("select * from runlane.submit_message(%(agent)s, 't-x', 'hi')", "RL008"),
    "run_now": ("select * from runlane.run_now(%(agent)s)", "RL008"),
    # the keyed forms (an overload is "name/what"): scope is checked before any key is read
    "submit_message/keyed": (
        "select * from runlane.submit_message(%(agent)s, 't-x', 'hi', 'k-1')",
        "RL008",
    ),
    "run_now/keyed": ("select * from runlane.run_now(%(agent)s, 'k-1')", "RL008"),
    "send_message": ("select * from runlane.send_message(%(agent)s, 't-x', 'hi')", "RL008"),
    "send_message/keyed": (
        "select * from runlane.send_message(%(agent)s, 't-x', 'hi', 'k-1')",
        "RL008",
    ),
    "create_run": ("select runlane.create_run(%(agent)s, 'reaction')", "RL008"),
    "publish_run": ("select runlane.publish_run(%(run)s, now() + interval '1 day')", "RL008"),
    "outputs_since": ("select * from runlane.outputs_since(%(run)s)", "RL008"),
    "run_timing": ("select runlane.run_timing(%(run)s)", "RL008"),
    "stream_token": ("select runlane.stream_token(%(run)s)", "RL008"),
    "cancel_run": ("select runlane.cancel_run(%(run)s)", "RL008"),
    "run_status": ("select * from runlane.run_status(%(run)s)", "RL008"),
    "message_status": ("select * from runlane.message_status(%(message)s)", "RL008"),
    "superseded_through": ("select runlane.superseded_through(%(run)s)", "RL008"),
    "run_detail": ("select * from runlane.run_detail(%(run)s)", "RL008"),
    "weekly_spend": ("select runlane.weekly_spend(%(owner)s)", "22023"),
    # management: another organization answers as an unknown one
    "put_org": ("select runlane.put_org(%(org)s, '{\"agent_max_concurrency\": 1}')", "RL008"),
    "put_user": ('select runlane.put_user(%(owner)s, %(org)s, \'{"timezone": "UTC"}\')', "RL008"),
    "put_agent": (
        "select runlane.put_agent(%(agent)s, jsonb_build_object('org_id', %(org)s::text,"
        " 'owner_id', %(owner)s::text, 'model', 'stolen'))",
        "RL008",
    ),
    "get_agent": ("select runlane.get_agent(%(agent)s)", "RL008"),
    # the operator views: one agent's journal names an object
    "agent_journal": ("select * from runlane.agent_journal(%(agent)s)", "RL008"),
    # erasure: another organization's objects are unknown ones, and nothing is erased
    "erase_thread": ("select runlane.erase_thread(%(agent)s, 't-x')", "RL008"),
    "erase_agent": ("select runlane.erase_agent(%(agent)s)", "RL008"),
    "erase_user": ("select runlane.erase_user(%(owner)s)", "RL008"),
    "erase_org": ("select runlane.erase_org(%(org)s)", "RL008"),
    "run_reply": ("select * from runlane.run_reply(%(run)s)", "RL008"),
}
# Pure functions of their arguments, or one number of the server's: no organization's
# object to protect.
NO_OBJECTS = {"parse_schedule", "next_slot", "notify_queue_usage", "org_node"}
# Views over every object of the login's organization: they filter instead of refusing
# (test_a_scoped_api_login_sees_only_its_organization_in_the_operator_views).
FILTERED_VIEWS = {
    "lane_status",
    "org_status",
    "agent_schedules",
    "timing_summary",
    "lane_minutes",
    "queue_delay_status",
    "owner_spend",
    "agent_last_runs",
    "lane_overview",
    "agent_page",
    "runs_page",
    "workers_page",
    "failure_minutes",
    "unserved_handlers",
    # many runs' outputs in one read: a run the login may not read gives no row
    # (test_outputs_since_many_gives_no_row_of_a_foreign_or_unknown_run)
    "outputs_since_many",
}


def _db(dsn: str) -> str:
    return conninfo_to_dict(dsn)["dbname"]


@pytest.fixture
def login(conn, db_dsn):
    """make(*roles, org=None) -> dsn of a new login in those roles, limited to `org`."""
    made: list[str] = []

    def make(*roles: str, org: str | None = None, entry: bool = True) -> str:
        """entry: enter the login in this database (for `org`, or every organization)."""
        name = f"t12_{uuid.uuid4().hex[:10]}"
        conn.execute(f'create role "{name}" login')
        made.append(name)
        for role in roles:
            conn.execute(f'grant "{role}" to "{name}"')
        if entry and "runlane_worker" not in roles:
            conn.execute("select runlane.scope_api_login(%s, %s)", (name, org))
        return make_conninfo(db_dsn, user=name)

    def group(*roles: str) -> str:
        name = f"t12g_{uuid.uuid4().hex[:10]}"
        conn.execute(f'create role "{name}" nologin')
        made.append(name)
        for role in roles:
            conn.execute(f'grant "{role}" to "{name}"')
        return name

    make.group = group  # type: ignore[attr-defined]
    yield make
    conn.execute("delete from runlane.api_logins")
    for name in reversed(made):
        conn.execute(f'drop role "{name}"')


@pytest.fixture
def tenants(conn):
    """Organizations org-a and org-b, an agent each (with a prompt), and a run of org-b
    with a message and a visible output."""
    conn.execute("select runlane_test.agent('agent-a', 'org-a')")
    conn.execute("select runlane_test.agent('agent-b', 'org-b')")
    run_b = conn.execute(
        "select runlane_test.queued_run('agent-b', 'interactive', 'interactive')"
    ).fetchone()[0]
    fence = conn.execute("select runlane_test.claimed(%s)", (run_b,)).fetchone()[0]
    conn.execute("select runlane.append_output(%s, %s, 'text', 'b private reply')", (run_b, fence))
    message_b = conn.execute(
        "insert into runlane.messages (org_id, agent_id, thread_id, body, run_id) "
        "values ('org-b', 'agent-b', 't-b', 'b private message', %s) returning message_id",
        (run_b,),
    ).fetchone()[0]
    missing = conn.execute("select coalesce(max(run_id), 0) + 1000 from runlane.runs").fetchone()[0]
    return {"run_b": run_b, "message_b": message_b, "missing": missing}


def _error(dsn: str, sql: str, params: dict) -> tuple[str, str]:
    with psycopg.connect(dsn, autocommit=True) as c:
        try:
            c.execute(sql, params)
        except psycopg.Error as exc:
            return exc.sqlstate, exc.diag.message_primary
    return "no error", ""


def test_every_api_function_is_covered(conn):
    api = {
        name
        for (name,) in conn.execute("""
        select p.proname::text from pg_proc as p
        where p.pronamespace = 'runlane'::regnamespace
          and has_function_privilege('runlane_api', p.oid, 'execute')""")
    }
    covered = {name.split("/")[0] for name in FOREIGN_CALLS}
    assert api - NO_OBJECTS - FILTERED_VIEWS == covered, "classify every new api function here"
    overloads = conn.execute("""
        select count(*) from pg_proc as p
        where p.pronamespace = 'runlane'::regnamespace
          and p.proname in ('submit_message', 'run_now')
          and has_function_privilege('runlane_api', p.oid, 'execute')""").fetchone()[0]
    assert overloads == sum(
        name.split("/")[0] in ("submit_message", "run_now") for name in FOREIGN_CALLS
    ), "list every overload of both"


@pytest.mark.parametrize("function", sorted(FOREIGN_CALLS))
def test_a_scoped_login_sees_another_organization_as_unknown(conn, login, tenants, function):
    scoped = login("runlane_api", org="org-a")
    sql, code = FOREIGN_CALLS[function]
    wake_before = conn.execute(
        "select wake_at from runlane.runs where run_id = %s", (tenants["run_b"],)
    ).fetchone()[0]
    org_b_before = conn.execute(
        "select row(s.*)::text || (select string_agg(row(a.*)::text, ',') from runlane.agents as a"
        " where a.org_id = 'org-b') from runlane.platform_settings as s where s.org_id = 'org-b'"
    ).fetchone()[0]
    foreign = _error(
        scoped,
        sql,
        {
            "agent": "agent-b",
            "run": tenants["run_b"],
            "message": tenants["message_b"],
            "owner": "owner-of-org-b",
            "org": "org-b",
        },
    )
    unknown = _error(
        scoped,
        sql,
        {
            "agent": "agent-zz",
            "run": tenants["missing"],
            "message": tenants["missing"],
            "owner": "owner-zz",
            "org": "org-zz",
        },
    )
    assert foreign[0] == code
    # word for word the unknown object's message, the id aside: nothing leaks by existence
    assert foreign[1].replace("agent-b", "X").replace(str(tenants["run_b"]), "X").replace(
        str(tenants["message_b"]), "X"
    ).replace("owner-of-org-b", "X").replace("org-b", "X") == unknown[1].replace(
        "agent-zz", "X"
    ).replace(str(tenants["missing"]), "X").replace("owner-zz", "X").replace("org-zz", "X")
    # nothing was written for organization B
    assert (
        conn.execute("select count(*) from runlane.runs where org_id = 'org-b'").fetchone()[0] == 1
    )
    assert (
        conn.execute("select count(*) from runlane.messages where org_id = 'org-b'").fetchone()[0]
        == 1
    )
    assert conn.execute("select count(*) from runlane.idempotency_keys").fetchone()[0] == 0
    assert (
        conn.execute(
            "select wake_at from runlane.runs where run_id = %s", (tenants["run_b"],)
        ).fetchone()[0]
        == wake_before
    )
    assert (
        conn.execute(
            "select row(s.*)::text || (select string_agg(row(a.*)::text, ',') "
            "from runlane.agents as a where a.org_id = 'org-b') "
            "from runlane.platform_settings as s where s.org_id = 'org-b'"
        ).fetchone()[0]
        == org_b_before
    )
    assert (
        conn.execute(
            "select count(*) from runlane.platform_settings where org_id = 'org-zz'"
        ).fetchone()[0]
        == 0
    )


# Every call of a runlane_api function that names an object by id, as (sql, params for
# organization B's objects, params for objects nobody has). A login scoped to org-a must
# get the same SQLSTATE, message and hint for both, the ids aside.
B = {"agent": "agent-b", "owner": "owner-of-org-b", "org": "org-b"}
Z = {"agent": "agent-zz", "owner": "owner-zz", "org": "org-zz"}
ANSWERS = {
    "submit_message": "select * from runlane.submit_message(%(agent)s, 't-x', 'hi')",
    "submit_message/keyed": "select * from runlane.submit_message(%(agent)s, 't-x', 'hi', 'k')",
    "run_now": "select * from runlane.run_now(%(agent)s)",
    "run_now/keyed": "select * from runlane.run_now(%(agent)s, 'k')",
    "send_message": "select * from runlane.send_message(%(agent)s, 't-x', 'hi')",
    "send_message/keyed": "select * from runlane.send_message(%(agent)s, 't-x', 'hi', 'k')",
    "create_run": "select runlane.create_run(%(agent)s, 'reaction')",
    "publish_run": "select runlane.publish_run(%(run)s)",
    "publish_run/wake": "select runlane.publish_run(%(run)s, now() + interval '1 day')",
    "outputs_since": "select * from runlane.outputs_since(%(run)s)",
    "run_timing": "select runlane.run_timing(%(run)s)",
    "stream_token": "select runlane.stream_token(%(run)s)",
    "cancel_run": "select runlane.cancel_run(%(run)s)",
    "run_status": "select * from runlane.run_status(%(run)s)",
    "message_status": "select * from runlane.message_status(%(message)s)",
    "get_agent": "select runlane.get_agent(%(agent)s)",
    "superseded_through": "select runlane.superseded_through(%(run)s)",
    "run_detail": "select * from runlane.run_detail(%(run)s)",
    "run_reply": "select * from runlane.run_reply(%(run)s)",
    "weekly_spend": "select runlane.weekly_spend(%(owner)s)",
    "agent_journal": "select * from runlane.agent_journal(%(agent)s)",
    "put_org": "select runlane.put_org(%(org)s)",
    "put_org/patch": "select runlane.put_org(%(org)s, '{\"agent_max_concurrency\": 1}')",
    "put_user": "select runlane.put_user(%(owner)s, %(org)s)",
    "put_user/patch": 'select runlane.put_user(%(owner)s, %(org)s, \'{"timezone": "UTC"}\')',
    # an agent patch that cannot create answers as for an agent that does not exist
    "put_agent/empty": "select runlane.put_agent(%(agent)s, '{}')",
    "put_agent/enabled": "select runlane.put_agent(%(agent)s, '{\"enabled\": false}')",
    "put_agent/own_org": 'select runlane.put_agent(%(agent)s, \'{"org_id": "org-a"}\')',
    "put_agent/owner": 'select runlane.put_agent(%(agent)s, \'{"owner_id": "owner-of-org-a"}\')',
    "put_agent/foreign_owner": "select runlane.put_agent(%(agent)s, jsonb_build_object("
    "'org_id', 'org-a', 'owner_id', %(owner)s::text))",
    "put_agent/other_org": "select runlane.put_agent(%(agent)s, jsonb_build_object("
    "'org_id', %(org)s::text, 'owner_id', %(owner)s::text))",
    "erase_thread": "select runlane.erase_thread(%(agent)s, 't-x')",
    "erase_agent": "select runlane.erase_agent(%(agent)s)",
    "erase_user": "select runlane.erase_user(%(owner)s)",
    "erase_org": "select runlane.erase_org(%(org)s)",
}


def _answer(dsn: str, sql: str, params: dict, ids: dict) -> tuple[str, str, str]:
    with psycopg.connect(dsn, autocommit=True) as c:
        try:
            c.execute(sql, params)
        except psycopg.Error as exc:
            answer = (exc.sqlstate, exc.diag.message_primary or "", exc.diag.message_hint or "")
        else:
            answer = ("no error", "", "")
    for value in sorted(ids.values(), key=lambda v: -len(str(v))):
        answer = tuple(part.replace(str(value), "<id>") for part in answer)
    return answer


def test_every_api_function_answers_a_foreign_id_exactly_as_an_unknown_one(conn, login, tenants):
    covered = {name.split("/")[0] for name in ANSWERS}
    assert covered == {name.split("/")[0] for name in FOREIGN_CALLS}, "list every function"
    scoped = login("runlane_api", org="org-a")
    foreign = {**B, "run": tenants["run_b"], "message": tenants["message_b"]}
    unknown = {**Z, "run": tenants["missing"], "message": tenants["missing"]}
    differing = {}
    for name, sql in sorted(ANSWERS.items()):
        got = (_answer(scoped, sql, foreign, foreign), _answer(scoped, sql, unknown, unknown))
        if got[0] != got[1] or got[0][0] == "no error":
            differing[name] = got
    assert differing == {}


def test_a_taken_id_says_taken_and_nothing_else_to_every_login(conn, login, tenants):
    conn.execute("select runlane_test.agent('agent-c', 'org-c')")  # org-c, owner-of-org-c
    scoped = login("runlane_api", org="org-a")
    unscoped = login("runlane_api")
    create = (
        "select runlane.put_agent(%(agent)s, jsonb_build_object('org_id', 'org-a', "
        "'owner_id', 'owner-of-org-a', 'model', 'm'))"
    )
    adopt = "select runlane.put_user(%(owner)s, 'org-a')"
    answers = {
        (_answer(dsn, sql, {"agent": agent, "owner": owner}, {"a": agent, "o": owner}))
        for dsn in (scoped, unscoped)
        for sql in (create, adopt)
        for agent, owner in (("agent-b", "owner-of-org-b"), ("agent-c", "owner-of-org-c"))
    }
    assert {
        (state, message.replace("agent", "X").replace("user", "X"), hint.split(":")[1])
        for state, message, hint in answers
    } == {
        (
            "23505",
            "X id '<id>' is taken",
            " choose another id (ids that carry the organization, or random ids, never collide).",
        )
    }
    assert conn.execute("select count(*) from runlane.agents").fetchone()[0] == 3
    assert (
        conn.execute("select count(*) from runlane.users where org_id = 'org-a'").fetchone()[0] == 1
    )


def test_a_scoped_login_works_on_its_own_organization(conn, login, tenants):
    scoped = login("runlane_api", org="org-a")
    with psycopg.connect(scoped, autocommit=True) as c:
        _m, run_id, disposition = c.execute(
            "select * from runlane.submit_message('agent-a', 't-1', 'hello')"
        ).fetchone()
        assert disposition == "created"
        c.execute("select runlane.publish_run(%s)", (run_id,))
        assert (
            c.execute("select count(*) from runlane.outputs_since(%s)", (run_id,)).fetchone()[0]
            == 0
        )
        assert c.execute("select runlane.run_timing(%s) ->> 'run.id'", (run_id,)).fetchone()[
            0
        ] == str(run_id)
        assert len(c.execute("select runlane.stream_token(%s)", (run_id,)).fetchone()[0]) == 32
        assert c.execute("select runlane.weekly_spend('owner-of-org-a')").fetchone()[0] == 0
        manual = c.execute(
            "select run_id, state, prompt from runlane.run_now('agent-a')"
        ).fetchone()
        assert manual[1:] == ("queued", None), "run_now returns no prompt"
        assert c.execute("select runlane.create_run('agent-a', 'reaction')").fetchone()[0]
    assert (
        conn.execute("select prompt from runlane.runs where run_id = %s", (manual[0],)).fetchone()[
            0
        ]
        == "Summarize the day"
    )


def test_a_scope_cannot_be_shed_or_changed_by_its_login(conn, login, tenants):
    scoped = login("runlane_api", org="org-a")
    # through a group: the scope names the login, whatever path its grants take
    via_group = login(login.group("runlane_api"), org="org-a")
    for dsn in (scoped, via_group):
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("set role runlane_api")  # current_user changes, session_user does not
            with pytest.raises(psycopg.Error) as err:
                c.execute("select * from runlane.submit_message('agent-b', 't-x', 'hi')")
            assert err.value.sqlstate == "RL008"
            c.execute("reset role")
            for sql in (
                "select runlane.scope_api_login(session_user, null)",
                "delete from runlane.api_logins",
            ):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    c.execute(sql)


def test_an_unscoped_api_login_acts_on_every_organization_and_reads_prompts_in_get_agent_only(
    conn, login, tenants
):
    unscoped = login("runlane_api")
    with psycopg.connect(unscoped, autocommit=True) as c:
        assert (
            c.execute(
                "select count(*) from runlane.outputs_since(%s)", (tenants["run_b"],)
            ).fetchone()[0]
            == 1
        )
        assert c.execute("select state, prompt from runlane.run_now('agent-b')").fetchone() == (
            "queued",
            None,
        )
        # the agent as the application wrote it, prompt included
        assert (
            c.execute("select runlane.get_agent('agent-b') ->> 'prompt'").fetchone()[0]
            == "Summarize the day"
        )


def test_naming_an_organization_narrows_a_login_for_every_one_and_never_widens(
    conn, login, tenants
):
    """runlane.org_id: a login for every organization that names org-a acts as one held
    to it (org-b's run is unknown, org-a's agent works), for the transaction with SET
    LOCAL; a login held to org-a may name only org-a."""
    unscoped = login("runlane_api")
    with psycopg.connect(unscoped, autocommit=True) as c:
        c.execute("set runlane.org_id = 'org-a'")
        with pytest.raises(psycopg.Error) as foreign:
            c.execute("select * from runlane.run_status(%s)", (tenants["run_b"],))
        assert foreign.value.sqlstate == "RL008"
        assert foreign.value.diag.message_primary == f"unknown run {tenants['run_b']}"
        assert c.execute("select runlane.get_agent('agent-a') ->> 'org_id'").fetchone() == (
            "org-a",
        )
        c.execute("reset runlane.org_id")
        assert c.execute("select state from runlane.run_status(%s)", (tenants["run_b"],)).fetchone()
        with c.transaction():
            c.execute("set local runlane.org_id = 'org-a'")
            with pytest.raises(psycopg.Error) as within:
                c.execute("select runlane.get_agent('agent-b')")
            assert within.value.sqlstate == "RL008"
        assert c.execute("select runlane.get_agent('agent-b') ->> 'org_id'").fetchone() == (
            "org-b",
        )
        # Any text is a name compared whole, never SQL: it narrows to nobody's organization.
        for hostile in ("org-b' or true --", "org-%", "x" * 10_000):
            c.execute("select set_config('runlane.org_id', %s, false)", (hostile,))
            with pytest.raises(psycopg.Error) as nobody:
                c.execute("select runlane.get_agent('agent-b')")
            assert nobody.value.sqlstate == "RL008", hostile[:20]
        c.execute("reset runlane.org_id")
    scoped = login("runlane_api", org="org-a")
    with psycopg.connect(scoped, autocommit=True) as c:
        c.execute("set runlane.org_id = 'org-a'")
        assert c.execute("select runlane.get_agent('agent-a') ->> 'org_id'").fetchone() == (
            "org-a",
        )
        c.execute("set runlane.org_id = 'org-b'")
        with pytest.raises(psycopg.Error) as widened:
            c.execute("select runlane.get_agent('agent-b')")
        assert widened.value.sqlstate == "42501"
        assert "acts for organization 'org-a' only" in widened.value.diag.message_primary
        c.execute("select set_config('runlane.org_id', %s, false)", ("y" * 10_000,))
        with pytest.raises(psycopg.Error) as long_name:
            c.execute("select runlane.get_agent('agent-a')")
        assert long_name.value.sqlstate == "42501"
        assert len(long_name.value.diag.message_primary) < 600, "a name is cut in the message"


def test_scope_api_login_refuses_workers_group_roles_and_unknown_organizations(
    conn, login, tenants
):
    worker = conninfo_to_dict(login("runlane_worker"))["user"]
    group = login.group("runlane_api")
    plain = conninfo_to_dict(login(entry=False))["user"]
    cases = [
        ((worker, "org-a"), "22023"),
        ((group, "org-a"), "22023"),
        ((plain, "org-zz"), "RL008"),
    ]
    for args, code in cases:
        with pytest.raises(psycopg.Error) as err:
            conn.execute("select runlane.scope_api_login(%s, %s)", args)
        assert err.value.sqlstate == code, args
    assert (
        conn.execute("select runlane.scope_api_login(%s, 'org-a')", (plain,)).fetchone()[0]
        == "org-a"
    )
    assert conn.execute("select runlane.scope_api_login(%s, null)", (plain,)).fetchone()[0] is None
    assert conn.execute("select count(*), max(org_id) from runlane.api_logins").fetchone() == (
        1,
        None,
    ), "NULL enters the login for every organization"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "runlane", *args], capture_output=True, text=True, timeout=60
    )


def test_grant_login_gives_the_role_and_records_or_lifts_the_scope(conn, db_dsn, login, tenants):
    name = conninfo_to_dict(login(entry=False))["user"]
    out = cli("grant-login", name, "--api", "--org", "org-a", "--dsn", db_dsn)
    assert out.returncode == 0, out.stderr
    assert conn.execute("select pg_has_role(%s, 'runlane_api', 'member')", (name,)).fetchone()[0]
    assert conn.execute(
        "select org_id from runlane.api_logins where role_oid = %s::regrole", (name,)
    ).fetchone() == ("org-a",)
    assert (
        _error(make_conninfo(db_dsn, user=name), FOREIGN_CALLS["run_now"][0], {"agent": "agent-b"})[
            0
        ]
        == "RL008"
    )

    refused = cli("grant-login", name, "--worker", "--dsn", db_dsn)
    assert refused.returncode != 0 and "organization org-a" in refused.stderr
    assert not conn.execute(
        "select pg_has_role(%s, 'runlane_worker', 'member')", (name,)
    ).fetchone()[0]

    out = cli("grant-login", name, "--api", "--dsn", db_dsn)
    assert out.returncode == 0, out.stderr
    assert conn.execute(
        "select org_id from runlane.api_logins where role_oid = %s::regrole", (name,)
    ).fetchone() == (None,), "--api alone: every organization"

    worker = conninfo_to_dict(login(entry=False))["user"]
    out = cli("grant-login", worker, "--worker", "--dsn", db_dsn)
    assert out.returncode == 0, out.stderr
    assert conn.execute("select pg_has_role(%s, 'runlane_worker', 'member')", (worker,)).fetchone()[
        0
    ]
    bad = cli("grant-login", worker, "--api", "--org", "org-a", "--dsn", db_dsn)
    assert bad.returncode != 0 and "runlane_worker" in bad.stderr


def test_a_login_with_no_grant_listening_on_outputs_learns_no_run_id(conn, login, tenants):
    stranger = login()
    run_ids = []
    with psycopg.connect(stranger, autocommit=True) as spy:
        spy.execute("LISTEN runlane_outputs")
        for agent in ("agent-a", "agent-b"):
            run_id = conn.execute(
                "select runlane_test.queued_run(%s, 'interactive', 'interactive')", (agent,)
            ).fetchone()[0]
            fence = conn.execute("select runlane_test.claimed(%s)", (run_id,)).fetchone()[0]
            for n in range(2):
                conn.execute(
                    "select runlane.append_output(%s, %s, 'text', %s)",
                    (run_id, fence, f"reply {n}"),
                )
            run_ids.append(run_id)
        notes = [json.loads(n.payload) for n in spy.notifies(timeout=5, stop_after=4)]
    assert len(notes) == 4
    ids = {str(i) for i in run_ids}
    for note in notes:
        assert set(note) == {"stream"}
        assert not ids & {str(v) for v in note.values()}
    tokens = [conn.execute("select runlane.stream_token(%s)", (i,)).fetchone()[0] for i in run_ids]
    assert [n["stream"] for n in notes] == [tokens[0]] * 2 + [tokens[1]] * 2
    assert tokens[0] != tokens[1]


def _queue_chat(conn, agent: str, n: int) -> list[int]:
    return [
        conn.execute(
            "select runlane_test.queued_run(%s, 'interactive', 'interactive')", (agent,)
        ).fetchone()[0]
        for _ in range(n)
    ]


def _claim(conn, worker: str, limit: int = 20) -> list[str]:
    return [
        org
        for (org,) in conn.execute(
            "select org_id from runlane.claim_runs(%s, array['interactive'], %s)", (worker, limit)
        ).fetchall()
    ]


def test_claim_runs_holds_a_worker_to_its_bound_per_organization(conn, tenants):
    _queue_chat(conn, "agent-a", 30)
    conn.execute("set runlane.max_per_org = 5")
    first = _claim(conn, "w1")
    assert first == ["org-a"] * 5
    late_b = _queue_chat(conn, "agent-b", 2)
    second = _claim(conn, "w1")
    assert second == ["org-b", "org-b"], "the other organization still gets this worker"
    assert _claim(conn, "w1") == [], "org-a stays at the bound of worker w1"
    assert _claim(conn, "w2").count("org-a") == 5, "the bound is per worker"

    (run, fence) = conn.execute(
        "select run_id, fence from runlane.runs where lease_owner = 'w1' and org_id = 'org-a' "
        "and state = 'running' limit 1"
    ).fetchone()
    conn.execute("select runlane.finish_run(%s, %s, 'succeeded')", (run, fence))
    assert _claim(conn, "w1") == ["org-a"], "a finished run makes room for one more"
    assert all(
        conn.execute("select state from runlane.runs where run_id = %s", (r,)).fetchone()[0]
        == "running"
        for r in late_b
    )

    conn.execute("set runlane.max_per_org = 0")  # no bound
    assert _claim(conn, "w1", limit=50) == ["org-a"] * 19, "unbounded: all the rest (30 - 11)"
    conn.execute("set runlane.max_per_org = 'lots'")
    with pytest.raises(psycopg.Error) as err:
        _claim(conn, "w1")
    assert err.value.sqlstate == "22023"


def test_a_worker_with_a_strict_max_per_org_keeps_that_many_of_one_organization_in_flight(
    conn, workers
):
    conn.execute("select runlane_test.agent('agent-a', 'org-a')")
    runs = _queue_chat(conn, "agent-a", 24)
    worker = workers(
        "--agent",
        "stream_agent:agent",
        "--max-per-org",
        "3",
        "--max-per-org-strict",
        "--no-maintenance",
        env={"STREAM_AGENT_CHUNKS": "3", "STREAM_AGENT_DELAY": "0.05"},
    )
    most = 0

    def all_done() -> bool:
        nonlocal most
        held, left = conn.execute(
            "select count(*) filter (where state = 'running' and lease_owner = %s), "
            "count(*) filter (where state in ('queued', 'running')) "
            "from runlane.runs where run_id = any(%s)",
            (worker.worker_id, runs),
        ).fetchone()
        most = max(most, held)
        return left == 0

    wait_until(all_done, what="every run finished")
    assert 1 <= most <= 3
    assert (
        conn.execute(
            "select count(*) from runlane.runs where run_id = any(%s) and state = 'succeeded'",
            (runs,),
        ).fetchone()[0]
        == 24
    )


def test_a_scoped_api_login_sees_only_its_organization_in_the_operator_views(conn, login, tenants):
    """What an application reads about its agents and runs (the views behind `runlane
    status`, `timing`, `journal` and the dashboard) is runlane_api's too, and a login
    limited to one organization counts, lists and summarizes that organization only."""
    conn.execute("select runlane_test.queued_run('agent-a', 'interactive', 'interactive')")
    (run_a,) = conn.execute(
        "select runlane_test.queued_run('agent-a', 'interactive', 'interactive')"
    ).fetchone()
    fence = conn.execute("select runlane_test.claimed(%s)", (run_a,)).fetchone()[0]
    conn.execute("select runlane.finish_run(%s, %s, 'succeeded')", (run_a, fence))
    conn.execute("select runlane_test.queued_run('agent-b', 'interactive', 'interactive')")

    def views(dsn: str) -> dict:
        with psycopg.connect(dsn, autocommit=True) as c:
            return {
                "lanes": c.execute(
                    "select lane, queued, running from runlane.lane_status() order by lane"
                ).fetchall(),
                "orgs": [r[0] for r in c.execute("select org_id from runlane.org_status()")],
                "agents": [
                    r[0]
                    for r in c.execute(
                        "select agent_id from runlane.agent_schedules() order by agent_id"
                    )
                ],
                "started": c.execute(
                    "select samples from runlane.timing_summary() where measure = 'queue_wait'"
                ).fetchone()[0],
                "journal_a": len(
                    c.execute("select * from runlane.agent_journal('agent-a')").fetchall()
                ),
                # the dashboard's: runs waiting now, per lane, and the queue-delay warning
                "waiting": c.execute(
                    "select lane, queued from runlane.lane_minutes('1 minute') order by lane"
                ).fetchall(),
                "delayed": c.execute(
                    "select delayed_runs from runlane.queue_delay_status('0 seconds')"
                ).fetchone()[0],
                "owners": [r[0] for r in c.execute("select owner_id from runlane.owner_spend()")],
                "last_runs": [
                    r[0] for r in c.execute("select agent_id from runlane.agent_last_runs()")
                ],
                # the overview's one read and the agents page
                "overview": c.execute(
                    "select lane, queued, running, delayed_runs from runlane.lane_overview("
                    "'0 seconds') order by lane"
                ).fetchall(),
                "page": [r[0] for r in c.execute("select agent_id from runlane.agent_page()")],
                # the runs and workers pages: every worker, its runs of the organization
                "runs": [
                    r[0] for r in c.execute("select agent_id from runlane.runs_page() order by 1")
                ],
                "workers": c.execute(
                    "select worker_id, running from runlane.workers_page()"
                ).fetchall(),
                # no worker is registered: every handler with queued runs is unserved
                "unserved": c.execute(
                    "select handler, lane, queued from runlane.unserved_handlers()"
                ).fetchall(),
            }

    assert views(login("runlane_api")) == {
        "lanes": [("background", 0, 0), ("interactive", 2, 1)],
        "orgs": ["org-a", "org-b"],
        "agents": ["agent-a", "agent-b"],
        "started": 2,
        "journal_a": 2,
        "waiting": [("background", 0), ("interactive", 2)],
        "delayed": 2,
        "owners": ["owner-of-org-a", "owner-of-org-b"],
        "last_runs": ["agent-a", "agent-b"],
        "overview": [("background", 0, 0, 0), ("interactive", 2, 1, 2)],
        "page": ["agent-a", "agent-b"],
        "runs": ["agent-a", "agent-a", "agent-b", "agent-b"],
        "workers": [("worker-test", 1)],
        "unserved": [("default", "interactive", 2)],
    }
    scoped = login("runlane_api", org="org-a")
    assert views(scoped) == {
        "lanes": [("background", 0, 0), ("interactive", 1, 0)],
        "orgs": ["org-a"],
        "agents": ["agent-a"],
        "started": 1,
        "journal_a": 2,
        "waiting": [("background", 0), ("interactive", 1)],
        "delayed": 1,
        "owners": ["owner-of-org-a"],
        "last_runs": ["agent-a"],
        "overview": [("background", 0, 0, 0), ("interactive", 1, 0, 1)],
        "page": ["agent-a"],
        "runs": ["agent-a", "agent-a"],
        "workers": [],  # worker-test, unregistered, holds only org-b's run
        "unserved": [("default", "interactive", 1)],
    }
    assert _error(scoped, "select * from runlane.agent_journal('agent-b')", {})[0] == "RL008"


def test_outputs_since_many_gives_no_row_of_a_foreign_or_unknown_run(conn, login, tenants):
    """A scoped login reads another organization's run in outputs_since_many exactly as an
    unknown one: no row, no error; an unscoped login reads it."""
    sql = "select body from runlane.outputs_since_many(%s::bigint[], %s::bigint[])"
    runs = [tenants["run_b"], tenants["missing"]]
    with psycopg.connect(login("runlane_api", org="org-a"), autocommit=True) as c:
        assert c.execute(sql, (runs, [0, 0])).fetchall() == []
    with psycopg.connect(login("runlane_api"), autocommit=True) as c:
        assert c.execute(sql, (runs, [0, 0])).fetchall() == [("b private reply",)]
