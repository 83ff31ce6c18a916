"""The CLI commands with real logins: `status`, `timing`, `journal`,
`follow`, `submit` and `run-now` work for a login that is only in runlane_api; a login
in neither role is refused with one line naming the role it needs and the
`runlane grant-login` command that gives it, and a non-zero exit code."""

from __future__ import annotations

import json
import uuid

import psycopg
import pytest
from click.testing import CliRunner
from psycopg.conninfo import make_conninfo

from runlane.cli import main


@pytest.fixture
def login(conn, db_dsn):
    """make(*roles) -> (name, dsn) of a new login holding exactly those roles."""
    made: list[str] = []

    def make(*roles: str) -> tuple[str, str]:
        name = f"t13_{uuid.uuid4().hex[:10]}"
        conn.execute(f'create role "{name}" login')
        made.append(name)
        for role in roles:
            conn.execute(f'grant "{role}" to "{name}"')
        if "runlane_api" in roles:  # an API login acts where the database has its entry
            conn.execute("select runlane.scope_api_login(%s, null)", (name,))
        return name, make_conninfo(db_dsn, user=name)

    yield make
    for name in reversed(made):
        conn.execute(f'drop owned by "{name}"')
        conn.execute(f'drop role "{name}"')


@pytest.fixture
def finished_run(conn) -> int:
    """agent-o of org-o, and one finished run of it with a visible output 'done'."""
    conn.execute("select runlane_test.agent('agent-o', 'org-o')")
    run_id = conn.execute(
        "select runlane_test.queued_run('agent-o', 'interactive', 'interactive')"
    ).fetchone()[0]
    fence = conn.execute("select runlane_test.claimed(%s)", (run_id,)).fetchone()[0]
    conn.execute("select runlane.append_output(%s, %s, 'text', 'done')", (run_id, fence))
    conn.execute("select runlane.finish_run(%s, %s, 'succeeded', null, 0)", (run_id, fence))
    return run_id


def _invoke(dsn: str, *args: str):
    return CliRunner(env={"RUNLANE_TABLES": "plain"}).invoke(main, [*args, "--dsn", dsn])


def _commands(run_id: int) -> dict[str, list[str]]:
    return {
        "status": ["status", "--json"],
        "timing": ["timing", "--json"],
        "journal": ["journal", "agent-o", "--json"],
        "follow": ["follow", str(run_id)],
        "submit": ["submit", "agent-o", "thread-1", "hello"],
        "run-now": ["run-now", "agent-o"],
    }


COMMANDS = ["status", "timing", "journal", "follow", "submit", "run-now"]


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_works_for_a_login_only_in_runlane_api(conn, login, finished_run, command):
    _name, dsn = login("runlane_api")
    result = _invoke(dsn, *_commands(finished_run)[command])
    assert result.exit_code == 0, result.output
    out = result.output
    if command == "status":
        agents = json.loads(out)["agents"]
        assert [a["agent_id"] for a in agents] == ["agent-o"]
    elif command == "timing":
        totals = {m["measure"]: m["samples"] for m in json.loads(out)["measures"]}
        assert totals["total"] == 1
    elif command == "journal":
        runs = json.loads(out)["runs"]
        assert [(r["run_id"], r["state"]) for r in runs] == [(finished_run, "succeeded")]
    elif command == "follow":
        assert out.splitlines()[0] == "done"  # (then, on stderr, the run's final state)
    elif command == "submit":
        assert out.startswith("message ") and " created run " in out
        assert (
            conn.execute(
                "select count(*) from runlane.messages where thread_id = 'thread-1'"
            ).fetchone()[0]
            == 1
        )
    else:
        run_id = int(out.split()[1])
        assert out.strip() == f"run {run_id} queued"
        assert (
            conn.execute(
                "select trigger from runlane.runs where run_id = %s", (run_id,)
            ).fetchone()[0]
            == "manual"
        )


@pytest.mark.parametrize("command", COMMANDS)
def test_a_login_in_neither_role_is_told_which_role_to_grant(conn, login, finished_run, command):
    name, dsn = login()
    runs_before = conn.execute("select count(*) from runlane.runs").fetchone()[0]
    result = _invoke(dsn, *_commands(finished_run)[command])
    assert result.exit_code != 0
    lines = result.output.strip().splitlines()
    assert lines[0].startswith("42501: permission denied"), result.output
    assert "runlane_api" in lines[1]
    assert f"runlane grant-login {name} --api" in lines[1]
    assert f"grant runlane_api to {name};" in lines[1]
    assert "Traceback" not in result.output
    assert conn.execute("select count(*) from runlane.runs").fetchone()[0] == runs_before


@pytest.mark.parametrize("command", ["submit", "run-now"])
def test_a_worker_login_may_not_submit_and_is_told_to_grant_runlane_api(
    conn, login, finished_run, command
):
    name, dsn = login("runlane_worker")
    result = _invoke(dsn, *_commands(finished_run)[command])
    assert result.exit_code != 0
    assert result.output.startswith("42501: permission denied for function ")
    assert f"runlane grant-login {name} --api" in result.output


@pytest.mark.parametrize("command", ["status", "timing"])
def test_a_worker_login_reads_the_operator_views_too(login, finished_run, command):
    _name, dsn = login("runlane_worker")
    result = _invoke(dsn, *_commands(finished_run)[command])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("command", ["journal", "follow", "run"])
def test_a_worker_login_may_not_read_a_runs_text_or_error_and_is_told_to_grant_runlane_api(
    login, finished_run, command
):
    name, dsn = login("runlane_worker")
    args = ["run", str(finished_run)] if command == "run" else _commands(finished_run)[command]
    result = _invoke(dsn, *args)
    assert result.exit_code != 0
    assert result.output.startswith("42501: permission denied for function ")
    assert "it needs the runlane_api role. As the schema owner" in result.output
    assert f"runlane grant-login {name} --api" in result.output
    assert "done" not in result.output and "Traceback" not in result.output


# A worker reads a run's messages and thread only while it owns the run (fenced).
FENCED_READS = {"run_messages", "run_messages_many", "take_steering", "thread_history"}


def test_a_worker_login_cannot_read_any_runs_outputs_or_error_text(conn, login, finished_run):
    """What a worker never needs: another run's outputs and error text. Refused as a real
    worker login (42501) through the tables and through every function that shows them,
    and no other function the worker may execute returns a body or an error column."""
    conn.execute(
        "update runlane.runs set last_error = 'ValueError: secret' where run_id = %s",
        (finished_run,),
    )
    _name, dsn = login("runlane_worker")
    with psycopg.connect(dsn, autocommit=True) as worker:
        for sql in (
            "select body from runlane.run_outputs",
            "select last_error from runlane.runs",
            "select body from runlane.outputs_since(%(run)s)",
            "select error, error_class from runlane.run_detail(%(run)s)",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                worker.execute(sql, {"run": finished_run})
        exposing = worker.execute(
            """
            select p.proname
            from pg_proc as p
            where p.pronamespace = 'runlane'::regnamespace
              and has_function_privilege(p.oid, 'execute')
              and (coalesce(p.proargnames && array['body', 'error', 'last_error', 'error_class'],
                            false)
                   or p.prorettype in ('runlane.run_outputs'::regtype, 'runlane.runs'::regtype,
                                       'runlane.messages'::regtype))
              and p.proname <> all(%s)
            order by 1""",
            (sorted(FENCED_READS),),
        ).fetchall()
        assert exposing == []


def test_upgrade_status_names_runlane_worker_for_an_api_login(login):
    name, dsn = login("runlane_api")
    result = _invoke(dsn, "upgrade-status")
    assert result.exit_code != 0
    assert result.output.startswith("42501: permission denied for function upgrade_status")
    assert f"runlane grant-login {name} --worker" in result.output


def test_a_contract_error_gets_no_role_advice(login):
    _name, dsn = login("runlane_api")
    result = _invoke(dsn, "journal", "nobody")
    assert result.exit_code == 2
    assert result.output.startswith("RL008")
    assert "grant-login" not in result.output
