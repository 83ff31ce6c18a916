"""The package a user installs: `python -m build` makes an sdist and, from it, a wheel that
carry the SQL and the LICENSE; the wheel installed into a FRESH venv (not this one, not the
source tree) migrates an empty database, runs a worker and answers one message, all
through its own `runlane` command, and reports the version of runlane.__version__.

The runtime dependencies' wheels are kept in a cache directory (RUNLANE_WHEEL_CACHE,
default ~/.cache/runlane-wheel-test) and installed with --no-index from it; they are
downloaded from the index only when the cache cannot satisfy the wheel's requirements.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import psycopg
import pytest
from psycopg.types.json import Jsonb
from worker_helpers import wait_until

import runlane

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("RUNLANE_WHEEL_CACHE") or Path.home() / ".cache" / "runlane-wheel-test")
SQL_FILES = {p.relative_to(ROOT / "sql").as_posix() for p in (ROOT / "sql").rglob("*.sql")}


def run(cmd: list[str | Path], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, timeout=600, **kwargs
    )
    assert result.returncode == 0 or not kwargs.get("check", True), result.stderr
    return result


def clean_env() -> dict[str, str]:
    """The environment without this venv or the source tree on the import path."""
    return {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    dist = tmp_path_factory.mktemp("dist")
    # No --sdist/--wheel: the sdist first, then the wheel built from the unpacked sdist,
    # so the wheel proves the sdist is complete too.
    run([sys.executable, "-m", "build", "--outdir", dist, ROOT], cwd=dist)
    (sdist,) = dist.glob("runlane-*.tar.gz")
    (wheel,) = dist.glob("runlane-*.whl")
    return sdist, wheel


@pytest.fixture(scope="module")
def venv(built, tmp_path_factory) -> Path:
    _, wheel = built
    home = tmp_path_factory.mktemp("venv") / "venv"
    run([sys.executable, "-m", "venv", home])
    pip = home / "bin" / "pip"
    install = [pip, "install", "-q", "--no-index", "--find-links", CACHE, wheel]
    if run(install, check=False, env=clean_env()).returncode != 0:
        CACHE.mkdir(parents=True, exist_ok=True)
        run([pip, "download", "-q", "--dest", CACHE, wheel], env=clean_env())
        for copy in CACHE.glob("runlane-*"):
            copy.unlink()  # the cache holds dependencies only
        run(install, env=clean_env())
    return home


def test_the_sdist_and_the_wheel_carry_the_sql_and_the_license(built):
    sdist, wheel = built
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
    in_wheel = {n.removeprefix("runlane/sql/") for n in names if n.startswith("runlane/sql/")}
    assert in_wheel == SQL_FILES
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    with tarfile.open(sdist) as t:
        members = t.getnames()
    prefix = sdist.name.removesuffix(".tar.gz")
    in_sdist = {
        m.removeprefix(f"{prefix}/runner/runlane/sql/")
        for m in members
        if m.startswith(f"{prefix}/runner/runlane/sql/") and m.endswith(".sql")
    }
    assert in_sdist == SQL_FILES
    assert f"{prefix}/LICENSE" in members
    # the dashboard's templates and its vendored chart library (no CDN at run time)
    dashboard = {
        p.relative_to(ROOT / "runner").as_posix()
        for sub in ("templates", "static")
        for p in (ROOT / "runner" / "runlane" / "dashboard" / sub).iterdir()
    }
    assert "runlane/dashboard/static/uPlot.iife.min.js" in dashboard
    assert dashboard <= set(names)
    assert (ROOT / "LICENSE").read_text().lstrip().startswith("Apache License")


def test_the_installed_wheel_migrates_runs_a_worker_and_answers_a_message(
    venv, empty_db_dsn, tmp_path
):
    bin_ = venv / "bin"
    env = clean_env()
    where = run(
        [
            bin_ / "python",
            "-c",
            "import importlib.metadata as m, runlane; "
            "print(m.version('runlane'), runlane.__version__, runlane.__file__)",
        ],
        cwd=tmp_path,
        env=env,
    ).stdout.split()
    assert where[0] == where[1]  # one source for the version
    assert Path(where[2]).is_relative_to(venv), "runlane was not imported from the venv"
    assert where[0] == runlane.__version__
    shown = run([bin_ / "runlane", "--version"], cwd=tmp_path, env=env).stdout
    assert runlane.__version__ in shown, "runlane --version names the installed version"

    migrated = run([bin_ / "runlane", "migrate", "--dsn", empty_db_dsn], cwd=tmp_path, env=env)
    assert "applied 0001" in migrated.stdout
    with psycopg.connect(empty_db_dsn, autocommit=True) as conn:
        conn.execute("select runlane.put_org('org-wheel')")
        conn.execute("select runlane.put_user('owner-wheel', 'org-wheel')")
        conn.execute(
            "select runlane.put_agent('agent-wheel', %s)",
            (Jsonb({"org_id": "org-wheel", "owner_id": "owner-wheel", "model": "m"}),),
        )

    log = (tmp_path / "worker.log").open("w")
    worker = subprocess.Popen(
        [
            bin_ / "runlane",
            "worker",
            "--dsn",
            empty_db_dsn,
            "--lane",
            "interactive",
            "--agent",
            "runlane.agents.echo:agent",
            "--no-maintenance",
        ],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        submitted = run(
            [
                bin_ / "runlane",
                "submit",
                "--dsn",
                empty_db_dsn,
                "agent-wheel",
                "thread-1",
                "hello from the wheel",
            ],
            cwd=tmp_path,
            env=env,
        )
        assert "created" in submitted.stdout
        run_id = submitted.stdout.split()[-1]
        followed = run(
            [bin_ / "runlane", "follow", "--dsn", empty_db_dsn, run_id], cwd=tmp_path, env=env
        )
        assert followed.stdout == "hello from the wheel\n"
        with psycopg.connect(empty_db_dsn) as conn:
            wait_until(
                lambda: (
                    conn.execute(
                        "select state from runlane.runs where run_id = %s", (int(run_id),)
                    ).fetchone()[0]
                    == "succeeded"
                ),
                what="the run succeeded",
            )
    finally:
        worker.kill()
        worker.wait(30)
        log.close()
    assert worker.returncode is not None
