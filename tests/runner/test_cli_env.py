"""The command line has no silent defaults: every environment variable the docs name
works under that name, a worker refuses to start without an agent, `--dsn` falls back to
RUNLANE_DSN then DATABASE_URL, `--agent` imports from the current folder, and
`--version` / `-h` answer.

The docs are walked, not copied: every RUNLANE_* and DATABASE_URL name in README.md and
docs/*.md must either be an option's variable, and then setting it must set that option
(checked through click's own parsing, one variable at a time), or be read by the
runner's code; and every option's variable must be in docs/operations.md.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from importlib.metadata import version as dist_version
from pathlib import Path

import click
import pytest
from worker_helpers import make_agent, run_state, submit, visible_outputs, wait_until

from runlane import cli

ROOT = Path(__file__).parent.parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNER = ROOT / "runner" / "runlane"
NAME = re.compile(r"\b(RUNLANE_[A-Z0-9_]*[A-Z0-9]|DATABASE_URL)\b")
RUNLANE = Path(sys.executable).parent / "runlane"  # the console script, as a user runs it


def documented_names() -> set[str]:
    return {name for doc in DOCS for name in NAME.findall(doc.read_text())}


def option_variables() -> dict[str, list[tuple[str, click.Command, click.Option]]]:
    found: dict[str, list[tuple[str, click.Command, click.Option]]] = {}
    for command_name, command in cli.main.commands.items():
        for param in command.params:
            if isinstance(param, click.Option) and param.envvar:
                envvars = [param.envvar] if isinstance(param.envvar, str) else param.envvar
                for envvar in envvars:
                    found.setdefault(envvar, []).append((command_name, command, param))
    return found


def runner_string_literals() -> set[str]:
    """Every string constant in the runner's code (a docstring or comment naming a
    variable is no constant equal to the name, so it does not count as reading it)."""
    return {
        node.value
        for path in RUNNER.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }


def read_by_runner(name: str) -> bool:
    return name in runner_string_literals()


def sample(param: click.Option) -> tuple[str, object]:
    """A value for the variable, and what the option must then hold (not its default)."""
    if param.multiple:
        return "interactive background", ("interactive", "background")
    if param.is_bool_flag:
        return ("false", False) if param.default else ("true", True)
    if isinstance(param.type, click.Choice):
        choice = next(c for c in reversed(param.type.choices) if c != param.default)
        return choice, choice
    if isinstance(param.type, click.types.IntParamType):
        return "7", 7
    if isinstance(param.type, click.types.FloatParamType):
        return "2.5", 2.5
    return "sample-value", "sample-value"


def parse(command_name: str, command: click.Command, under_test: click.Option) -> dict:
    """The command's parameters as click parses them (nothing runs): the arguments and
    the other required options on the command line, the variable under test in the env."""
    args = []
    for param in command.params:
        if param is under_test:
            continue
        if isinstance(param, click.Argument):
            args.append("1" if isinstance(param.type, click.types.IntParamType) else "x")
        elif param.required or param.name == "dsn":
            args += [param.opts[0], "interactive" if param.name == "lanes" else "x"]
    parent = click.Context(cli.main, info_name="runlane")
    with command.make_context(command_name, args, parent=parent) as ctx:
        return dict(ctx.params)


@pytest.fixture
def clean_env(monkeypatch):
    for name in list(os.environ):
        if name.startswith("RUNLANE_") or name == "DATABASE_URL":
            monkeypatch.delenv(name)
    return monkeypatch


def test_every_documented_variable_sets_its_option_or_is_read_by_the_runner(clean_env):
    names = documented_names()
    # the names a new user reaches for first are documented (and so checked below)
    assert {
        "RUNLANE_DSN",
        "DATABASE_URL",
        "RUNLANE_WORKER_AGENT",
        "RUNLANE_WORKER_LANE",
        "RUNLANE_LOG_ERRORS",
    } <= names
    options = option_variables()
    unread = []
    for name in sorted(names):
        if name not in options:
            if not read_by_runner(name):
                unread.append(name)
            continue
        for command_name, command, param in options[name]:
            for other in options:  # only the variable under test is set
                clean_env.delenv(other, raising=False)
            raw, expected = sample(param)
            clean_env.setenv(name, raw)
            got = parse(command_name, command, param)[param.name]
            assert got == expected, f"{name} does not set {command_name} {param.opts[0]}"
    assert unread == [], "documented, but neither an option's variable nor read by runlane"


def test_every_option_variable_is_documented_in_operations():
    section = (ROOT / "docs" / "operations.md").read_text()
    section = section.split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    listed = set(NAME.findall(section))
    assert set(option_variables()) - listed == set()
    assert {"RUNLANE_WORKER_FINISH_WINDOW", "RUNLANE_EVENT_LOOP"} <= listed


def test_the_old_derived_names_are_gone(clean_env):
    """RUNLANE_WORKER_AGENT_SPEC and RUNLANE_WORKER_LANES, the names click would derive
    from the Python parameters, set nothing (one rule: the option's name)."""
    assert "RUNLANE_WORKER_AGENT_SPEC" not in option_variables()
    assert "RUNLANE_WORKER_LANES" not in option_variables()
    clean_env.setenv("RUNLANE_WORKER_AGENT_SPEC", "runlane.agents.echo:agent")
    worker = cli.main.commands["worker"]
    agent = next(p for p in worker.params if p.name == "agent_spec")
    assert parse("worker", worker, agent)["agent_spec"] == ()  # (repeatable: none given)


def test_dsn_comes_from_the_option_then_runlane_dsn_then_database_url(clean_env):
    command = cli.main.commands["status"]
    parent = click.Context(cli.main, info_name="runlane")

    def dsn(*args: str) -> str:
        with command.make_context("status", list(args), parent=parent) as ctx:
            return ctx.params["dsn"]

    clean_env.setenv("DATABASE_URL", "postgresql:///from-database-url")
    assert dsn() == "postgresql:///from-database-url"
    clean_env.setenv("RUNLANE_DSN", "postgresql:///from-runlane-dsn")
    assert dsn() == "postgresql:///from-runlane-dsn"
    assert dsn("--dsn", "postgresql:///from-option") == "postgresql:///from-option"


def run_cli(
    *args: str, env: dict[str, str], cwd: Path | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(RUNLANE), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", **env},
    )


def test_a_database_url_alone_reaches_the_database(db_dsn, conn):
    make_agent(conn, "agent-url")
    result = run_cli("journal", "agent-url", "--json", env={"DATABASE_URL": db_dsn})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["agent_id"] == "agent-url"
    missing = run_cli("status", env={})
    assert missing.returncode == 2
    assert "RUNLANE_DSN or DATABASE_URL" in missing.stderr


def test_a_worker_without_an_agent_refuses_to_start_and_says_how_to_give_one(db_dsn, conn):
    # the name click would derive from the parameter is no way to give one either
    result = run_cli(
        "worker",
        "--lane",
        "interactive",
        env={"RUNLANE_DSN": db_dsn, "RUNLANE_WORKER_AGENT_SPEC": "runlane.agents.echo:agent"},
    )
    assert result.returncode == 2, result.stderr
    assert "needs an agent" in result.stderr
    assert "--agent" in result.stderr and "RUNLANE_WORKER_AGENT" in result.stderr
    assert "Traceback" not in result.stderr
    assert conn.execute("select count(*) from runlane.workers").fetchone()[0] == 0


def test_a_missing_agent_module_says_where_it_was_looked_for(tmp_path, db_dsn):
    result = run_cli(
        "worker",
        "--lane",
        "interactive",
        "--agent",
        "nosuchpkg.agents:helper",
        env={"RUNLANE_DSN": db_dsn},
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr
    assert "no module named 'nosuchpkg'" in result.stderr
    assert f"current folder ({tmp_path})" in result.stderr
    assert "Traceback" not in result.stderr


CWD_AGENT = """
from runlane.agents import done


async def step(ctx):
    return done(outputs=[("text", "answered by the project's own agent")])
"""


def test_a_worker_configured_only_by_documented_variables_runs_the_agent_of_the_current_folder(
    tmp_path, db_dsn, conn
):
    """DATABASE_URL, RUNLANE_WORKER_AGENT (a module of the current folder, like `python -m`
    finds it), RUNLANE_WORKER_LANE with two lanes, RUNLANE_WORKER_MAINTENANCE=false; the
    console script, as a user runs it. The reply is the project agent's, not an echo."""
    package = tmp_path / "myproject"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "agents.py").write_text(textwrap.dedent(CWD_AGENT))
    make_agent(conn, "agent-env")
    log_path = tmp_path / "worker.log"
    with open(log_path, "w") as out:
        proc = subprocess.Popen(
            [str(RUNLANE), "worker"],
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            env={
                "PATH": "/usr/bin:/bin",
                "DATABASE_URL": db_dsn,
                "RUNLANE_WORKER_AGENT": "myproject.agents:step",
                "RUNLANE_WORKER_LANE": "interactive background",
                "RUNLANE_WORKER_MAINTENANCE": "false",
            },
        )
        try:
            run_id = submit(conn, "agent-env", "thread-1", "hello")
            wait_until(
                lambda: proc.poll() is not None or run_state(conn, run_id) == "succeeded",
                what="the chat run",
            )
            assert proc.poll() is None, proc.stderr.read()
        finally:
            proc.kill()
            proc.wait(10)
            proc.stderr.close()
    assert visible_outputs(conn, run_id) == [(1, "answered by the project's own agent")]
    started = [
        json.loads(line) for line in log_path.read_text().splitlines() if '"worker.started"' in line
    ]
    assert started[0]["worker.lanes"] == ["interactive", "background"]


def test_version_and_short_help():
    version = run_cli("--version", env={})
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"runlane {dist_version('runlane')}"
    short = run_cli("-h", env={})
    assert short.returncode == 0, short.stderr
    assert "Usage: runlane" in short.stdout and "worker" in short.stdout
    worker = run_cli("worker", "-h", env={})
    assert worker.returncode == 0, worker.stderr
    assert "RUNLANE_WORKER_AGENT" in worker.stdout and "--log-errors" in worker.stdout
