"""The README's quickstart, run as written: it keeps the README true.

The blocks fenced ```sh quickstart in README.md are joined in order into one bash script
and run against a fresh, empty database of the test cluster: `runlane migrate`, the two
logins and their roles, put_org / put_user / put_agent as the application's login, a
worker as the worker's login (the block marked `background`, started where it stands and
left running, as in its own terminal), `runlane submit` and `runlane follow`. The only
changes made to the text: the documented address `localhost:5432/runlane` becomes the
test database's, and the install lines (a virtualenv, `pip install .`) are checked
against the package instead of run: this checkout is installed already. The streamed
reply must arrive on follow's stdout. It runs twice: on the test cluster, and on a
cluster of its own where every TCP login needs a password, as on a stock server.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import psycopg
import pytest
from conftest import new_database
from psycopg import sql

from runlane.pgcluster import LocalCluster

ROOT = Path(__file__).parent.parent.parent
README = ROOT / "README.md"
FENCE = re.compile(r"^```sh quickstart( background)?\n(.*?)^```", re.M | re.S)
DOCUMENTED_DB = "localhost:5432/runlane"
LOGINS = ("app", "worker")
INSTALL = re.compile(r"^(pip install|python3? -m venv|\. \S+/bin/activate)")


def quickstart_blocks() -> list[tuple[bool, str]]:
    """(background?, text) for each quickstart block of the README, in order."""
    return [(bool(m.group(1)), m.group(2)) for m in FENCE.finditer(README.read_text())]


def test_the_quickstart_has_every_documented_step():
    """The steps the first screen must show, in the order a newcomer needs them."""
    text = "\n".join(block for _, block in quickstart_blocks())
    steps = [
        "pip install",
        "runlane migrate",
        "runlane grant-login app --api",
        "runlane grant-login worker --worker",
        "runlane.put_org(",
        "runlane.put_user(",
        "runlane.put_agent(",
        "runlane worker ",
        "runlane submit ",
        "runlane follow ",
    ]
    positions = [text.find(step) for step in steps]
    assert -1 not in positions, dict(zip(steps, positions, strict=True))
    assert positions == sorted(positions)
    assert [bg for bg, _ in quickstart_blocks()].count(True) == 1, "one background worker"
    # The quickstart is the README's first section: it is on the first screen.
    first_section = re.search(r"^## (.*)$", README.read_text(), re.M).group(1)
    assert first_section.startswith("Quickstart")


def test_the_install_line_installs_this_package():
    installs = [
        line.split("#")[0].split()
        for _, block in quickstart_blocks()
        for line in block.splitlines()
        if line.startswith("pip install")
    ]
    assert installs == [["pip", "install", "."]]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "runlane"
    assert project["scripts"]["runlane"] == "runlane.cli:main"


def test_the_readme_installs_build_before_python_m_build():
    """`python -m build` needs the `build` package, which a fresh virtualenv lacks."""
    lines = [line.split("#")[0].strip() for line in README.read_text().splitlines()]
    builds = [i for i, line in enumerate(lines) if re.match(r"python3? -m build\b", line)]
    assert builds, "the README shows how to build a wheel"
    for i in builds:
        assert "pip install build" in lines[:i], "pip install build comes before python -m build"


def _script(blocks: list[tuple[bool, str]], address: str, worker_log: Path) -> str:
    lines = ["set -euo pipefail"]
    for background, block in blocks:
        block = block.replace(DOCUMENTED_DB, address)
        block = "\n".join(line for line in block.splitlines() if not INSTALL.match(line))
        if background:
            lines.append(f"( {block}\n) >{worker_log} 2>&1 &")
        else:
            lines.append(block)
    return "\n".join(lines) + "\n"


def _stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM the script's session (the worker drains and exits), SIGKILL what lingers."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    proc.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture
def fresh_db(pg_cluster):
    """An empty database (the quickstart migrates it) and no logins named app or worker."""
    with psycopg.connect(pg_cluster.dsn, autocommit=True) as admin:
        taken = admin.execute(
            "select rolname from pg_roles where rolname = any(%s)", (list(LOGINS),)
        ).fetchall()
        assert taken == [], f"the cluster already has {taken}: the quickstart creates them"
        dsn, janitor = new_database(pg_cluster, None)
        try:
            yield dsn
        finally:
            janitor.drop()
            for login in LOGINS:
                admin.execute(f'drop role if exists "{login}"')


def _run_quickstart(address: str, tmp_path: Path) -> str:
    """Run the README's blocks against `address` (host:port/dbname); returns stdout after
    checking the script succeeded and the reply streamed."""
    worker_log = tmp_path / "worker.log"
    script = _script(quickstart_blocks(), address, worker_log)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("RUNLANE_", "PG")) and k != "DATABASE_URL"
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.Popen(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        # The worker runs on in the script's session, as in its own terminal: stop it.
        _stop_group(proc)
    detail = f"stdout:\n{out}\nstderr:\n{err}\nworker:\n{worker_log.read_text()}"
    assert proc.returncode == 0, detail
    assert "message 1 created run 1" in out, detail
    assert "Hello, runlane!" in out.split("message 1 created run 1", 1)[1], detail
    return out


def _check_the_reply_was_stored(dsn: str) -> None:
    with psycopg.connect(dsn) as conn:
        state = conn.execute("select state from runlane.runs where run_id = 1").fetchone()[0]
        body = conn.execute(
            "select string_agg(body, '' order by output_id) "
            "from runlane.run_outputs where run_id = 1"
        ).fetchone()[0]
        memberships = dict(
            conn.execute(
                "select r.rolname, array_agg(g.rolname::text order by g.rolname) "
                "from pg_auth_members as m join pg_roles as r on r.oid = m.member "
                "join pg_roles as g on g.oid = m.roleid where r.rolname = any(%s) "
                "group by r.rolname",
                (list(LOGINS),),
            ).fetchall()
        )
    assert state == "succeeded"
    assert body == "Hello, runlane!"
    assert memberships == {"app": ["runlane_api"], "worker": ["runlane_worker"]}


def test_the_quickstart_streams_a_reply(pg_cluster, fresh_db, tmp_path):
    dbname = fresh_db.rsplit("/", 1)[1]
    _run_quickstart(f"127.0.0.1:{pg_cluster.port}/{dbname}", tmp_path)
    _check_the_reply_was_stored(fresh_db)


def test_the_quickstart_works_where_tcp_needs_a_password(tmp_path):
    """A stock server asks every TCP login for a password: the quickstart, run as written
    against such a server (its own cluster: scram-sha-256 for every host line, the
    superuser's password the one the README documents), still streams the reply."""
    documented = re.search(
        r"^export RUNLANE_DSN=postgresql://postgres:([^@\s]+)@" + re.escape(DOCUMENTED_DB),
        "\n".join(block for _, block in quickstart_blocks()),
        re.M,
    )
    assert documented, "the quickstart's RUNLANE_DSN carries the superuser's password"
    password = documented.group(1)
    cluster = LocalCluster()
    cluster.start()
    try:
        with psycopg.connect(cluster.dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("alter role postgres password {}").format(sql.Literal(password)))
            admin.execute("create database runlane")
        (cluster.datadir / "pg_hba.conf").write_text(
            "local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n"
        )
        cluster._run("pg_ctl", "-D", str(cluster.datadir), "reload")
        deadline = time.monotonic() + 30
        while True:  # the reload is asynchronous: until a password-less login is refused
            try:
                psycopg.connect(cluster.dsn, connect_timeout=2).close()
            except psycopg.OperationalError as exc:
                assert "password" in str(exc), exc
                break
            assert time.monotonic() < deadline, "pg_hba.conf was not reloaded"
            time.sleep(0.05)
        _run_quickstart(f"127.0.0.1:{cluster.port}/runlane", tmp_path)
        _check_the_reply_was_stored(
            f"postgresql://postgres:{password}@127.0.0.1:{cluster.port}/runlane"
        )
    finally:
        cluster.destroy()
