"""What the dashboard tests share: a seeded database, a runlane_api login (the dashboard
reads only what that role may execute), and real `runlane dashboard` processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from worker_helpers import HERE, MARKER, wait_until

# What seed() makes, as lane_status must count it.
SEEDED_LANES = {
    "interactive": {"queued": 3, "due": 2, "running": 1},
    "background": {"queued": 1, "due": 1, "running": 0},
}


def seed(conn: psycopg.Connection) -> dict:
    """Two organizations, agents in several states, runs in every lane and state, and a
    finished run with outputs carrying the marker (content the dashboard hides)."""
    conn.execute("select runlane_test.agent('agent-chat', 'org-one')")
    conn.execute("select runlane_test.agent('agent-night', 'org-one')")
    conn.execute(
        "select runlane_test.scheduled_agent('agent-timer', 'daily at 09:00', "
        "'Europe/Berlin', 'UTC', 'org-two')"
    )
    conn.execute("select runlane_test.agent('<b>agent-odd</b>', 'org-two')")
    conn.execute("update runlane.agents set enabled = false where agent_id = 'agent-night'")
    conn.execute("update runlane.agents set prompt = %s", (f"secret prompt {MARKER}",))
    conn.execute(
        "update runlane.platform_settings set agent_weekly_budget = 25 where org_id = 'org-one'"
    )
    timed = (
        "select runlane_test.timed_run(%s, %s, %s, %s, now() - %s::interval, "
        "%s, %s, %s, p_wake_at => %s)"
    )
    for args in [
        (
            "agent-chat",
            "interactive",
            "interactive",
            "queued",
            "10 seconds",
            None,
            None,
            None,
            None,
        ),
        (
            "agent-chat",
            "interactive",
            "interactive",
            "queued",
            "50 seconds",
            None,
            None,
            None,
            None,
        ),
        ("agent-chat", "interactive", "retry", "queued", "5 minutes", 1000, 1500, None, "tomorrow"),
        ("agent-chat", "interactive", "interactive", "running", "2 minutes", 300, 900, None, None),
        ("agent-timer", "background", "manual", "queued", "3 minutes", None, None, None, None),
        (
            "agent-timer",
            "background",
            "scheduled",
            "succeeded",
            "20 minutes",
            100,
            4000,
            9000,
            None,
        ),
    ]:
        conn.execute(timed, args)
    done = conn.execute(
        timed,
        (
            "<b>agent-odd</b>",
            "interactive",
            "interactive",
            "succeeded",
            "30 minutes",
            50,
            700,
            2000,
            None,
        ),
    ).fetchone()[0]
    conn.execute(
        "insert into runlane.run_outputs (run_id, attempt, kind, body) "
        "values (%s, 1, 'text', %s), (%s, 1, 'final', '<script>alert(1)</script>')",
        (done, f"hello {MARKER}", done),
    )
    conn.execute("select runlane_test.spent('agent-chat', 30, now())")
    return {"finished_run": done}


@pytest.fixture
def api_dsn(conn, db_dsn):
    """A login that holds runlane_api and nothing else."""
    name = f"dash_{uuid.uuid4().hex[:10]}"
    conn.execute(f'create role "{name}" login')
    conn.execute(f'grant runlane_api to "{name}"')
    conn.execute("select runlane.scope_api_login(%s, null)", (name,))
    yield make_conninfo(db_dsn, user=name)
    conn.execute(
        "select pg_terminate_backend(pid) from pg_stat_activity where usename = %s", (name,)
    )
    conn.execute(f'drop role "{name}"')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DashboardProcess:
    """`python -m runlane dashboard …` on a free loopback port, ready when it answers."""

    def __init__(self, dsn: str, *args: str, env: dict[str, str] | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(tempfile.mkstemp(prefix="runlane-dashboard-", suffix=".log")[1])
        self._out = open(self.log_path, "w")  # noqa: SIM115 - closed in close()
        full_env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
            **(env or {}),
        }
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "runlane",
                "dashboard",
                "--dsn",
                dsn,
                "--port",
                str(self.port),
                *args,
            ],
            stdout=self._out,
            stderr=subprocess.STDOUT,
            env=full_env,
        )

        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"dashboard exited: {self.log_path.read_text()}")
            try:
                return httpx.get(self.url + "/static/dashboard.css", timeout=2).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(ready, what="the dashboard answering")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._out.close()

    def log(self) -> str:
        return self.log_path.read_text()


@pytest.fixture
def dashboards():
    """Start dashboards with `dashboards(dsn, *args)`; all are stopped afterwards, and none
    logged the marker (message text and prompts never reach a log)."""
    started: list[DashboardProcess] = []

    def start(dsn: str, *args: str, **kwargs) -> DashboardProcess:
        d = DashboardProcess(dsn, *args, **kwargs)
        started.append(d)
        return d

    yield start
    for d in started:
        d.close()
    for d in started:
        assert MARKER not in d.log()
    for d in started:  # checked: a failing test keeps its logs to read
        d.log_path.unlink(missing_ok=True)
