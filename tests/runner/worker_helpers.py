"""Real `runlane worker` processes for the runner tests, and what the tests inject.

Workers run as `python -m runlane worker …` subprocesses writing JSON logs to a file;
tests wait on the database (or on a log event) with a generous deadline, never on time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from runlane.admission import Memory
from runlane.migrate import migrate

HERE = Path(__file__).parent
DEADLINE = 60.0
# Placed in every message body and prompt the tests create: it must never reach a log.
MARKER = f"secret-marker-{uuid.uuid4().hex}"


def wait_until(predicate: Callable[[], Any], timeout: float = DEADLINE, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        time.sleep(0.05)


def file_probe() -> Memory:
    """A memory probe the test controls: the file holds the available bytes."""
    path = os.environ["RUNLANE_TEST_PROBE_FILE"]
    return Memory(available=int(Path(path).read_text().strip()), headroom=None)


class WorkerProcess:
    def __init__(
        self,
        dsn: str,
        *args: str,
        lanes: tuple[str, ...] = ("interactive",),
        env: dict[str, str] | None = None,
    ):
        self.log_path = Path(tempfile.mkstemp(prefix="runlane-worker-", suffix=".log")[1])
        self.worker_id = f"w-{uuid.uuid4().hex[:8]}"
        cmd = [
            sys.executable,
            "-m",
            "runlane",
            "worker",
            "--dsn",
            dsn,
            "--worker-id",
            self.worker_id,
        ]
        for lane in lanes:
            cmd += ["--lane", lane]
        if "--agent" not in args:  # a worker needs an agent: the echo one unless told
            cmd += ["--agent", "runlane.agents.echo:agent"]
        cmd += list(args)
        full_env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
            **(env or {}),
        }
        self._out = open(self.log_path, "w")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            cmd, stdout=self._out, stderr=subprocess.PIPE, env=full_env, text=True
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def raw_lines(self) -> list[str]:
        return [line for line in self.log_path.read_text().splitlines() if line.strip()]

    def events(self, message: str | None = None) -> list[dict[str, Any]]:
        found = []
        for line in self.raw_lines():
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a partial last line; check_logs() judges the finished file
            if message is None or record.get("message") == message:
                found.append(record)
        return found

    def wait_for(
        self,
        message: str,
        timeout: float = DEADLINE,
        where: Callable[[dict[str, Any]], bool] = lambda r: True,
    ) -> dict[str, Any]:
        def found():
            if self.proc.poll() is not None and not self.events(message):
                raise AssertionError(
                    f"worker exited ({self.proc.returncode}) before {message}: "
                    f"{self.proc.stderr.read() if self.proc.stderr else ''}"
                )
            return next((r for r in self.events(message) if where(r)), None)

        return wait_until(found, timeout, message)

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait_exit(self, timeout: float = DEADLINE) -> int:
        return self.proc.wait(timeout)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self._out.close()

    def check_logs(self) -> None:
        """Every line is one JSON object with a message, and no line holds the marker."""
        for line in self.raw_lines():
            record = json.loads(line)
            assert isinstance(record, dict) and isinstance(record.get("message"), str), line
            assert MARKER not in line, f"message text leaked into a log line: {line}"
        stderr = self.proc.stderr.read() if self.proc.stderr else ""
        assert MARKER not in stderr


def wait_until_blocked(conn: psycopg.Connection, pid: int) -> None:
    """Poll until backend `pid` waits on a lock (a condition, not a guess about timing)."""
    for _ in range(1000):
        waiting = conn.execute(
            "select wait_event_type = 'Lock' from pg_stat_activity where pid = %s", (pid,)
        ).fetchone()
        if waiting and waiting[0]:
            return
        time.sleep(0.01)
    raise AssertionError(f"backend {pid} never waited on a lock")


def run_state(conn: psycopg.Connection, run_id: int) -> str:
    return conn.execute("select state from runlane.runs where run_id = %s", (run_id,)).fetchone()[0]


def run_row(conn: psycopg.Connection, run_id: int) -> dict[str, Any]:
    cur = conn.execute("select * from runlane.runs where run_id = %s", (run_id,))
    names = [d.name for d in cur.description]
    return dict(zip(names, cur.fetchone(), strict=True))


def make_agent(conn: psycopg.Connection, agent_id: str, org_id: str = "org-w") -> str:
    conn.execute("select runlane_test.agent(%s, %s)", (agent_id, org_id))
    conn.execute(
        "update runlane.agents set prompt = %s where agent_id = %s",
        (f"Do the work {MARKER}", agent_id),
    )
    return agent_id


def submit(
    conn: psycopg.Connection, agent_id: str, thread_id: str, text: str, publish: bool = True
) -> int:
    """A chat message through the API path; returns its run id (published unless told)."""
    _message_id, run_id, _disposition = conn.execute(
        "select * from runlane.submit_message(%s, %s, %s)",
        (agent_id, thread_id, f"{text} {MARKER}"),
    ).fetchone()
    if publish:
        conn.execute("select runlane.publish_run(%s)", (run_id,))
    return run_id


def claimed_chat_run(
    conn: psycopg.Connection, agent_id: str, thread_id: str = "thread-1", text: str = "hello"
) -> tuple[int, int]:
    """A chat message's run, claimed by a test claimer (runlane_test.claimed): (run id, fence)."""
    run_id = submit(conn, agent_id, thread_id, text, publish=False)
    return run_id, conn.execute("select runlane_test.claimed(%s)", (run_id,)).fetchone()[0]


def background_run(conn: psycopg.Connection, agent_id: str, publish: bool = True) -> int:
    run_id = conn.execute(
        "select runlane_test.queued_run(%s, 'background', 'manual')", (agent_id,)
    ).fetchone()[0]
    if publish:
        conn.execute("select runlane.publish_run(%s)", (run_id,))
    return run_id


def first_chat_run(conn: psycopg.Connection, name: str) -> int:
    """On a database of a cluster the test started itself (no test fixtures there): the
    schema migrated, organization org-<name> with its owner and agent agent-<name> put
    through the API, and one chat message submitted on thread-<name>; its run's id
    (queued, not published). Committed."""
    migrate(conn)
    conn.execute("select runlane.put_org(%s)", (f"org-{name}",))
    conn.execute("select runlane.put_user(%s, %s)", (f"owner-{name}", f"org-{name}"))
    conn.execute(
        "select runlane.put_agent(%s, %s)",
        (
            f"agent-{name}",
            json.dumps({"org_id": f"org-{name}", "owner_id": f"owner-{name}", "model": "m"}),
        ),
    )
    run_id = conn.execute(
        "select run_id from runlane.submit_message(%s, %s, 'hello')",
        (f"agent-{name}", f"thread-{name}"),
    ).fetchone()[0]
    conn.commit()
    return run_id


def visible_outputs(conn: psycopg.Connection, run_id: int) -> list[tuple[int, str]]:
    return conn.execute(
        "select attempt, body from runlane.run_outputs where run_id = %s and kind = 'text' "
        "order by output_id",
        (run_id,),
    ).fetchall()


@pytest.fixture
def workers(db_dsn):
    """Start workers with `workers(*args, lanes=…, env=…)`; all are killed afterwards and
    every line they logged must be JSON without the marker."""
    started: list[WorkerProcess] = []

    def start(*args: str, **kwargs: Any) -> WorkerProcess:
        worker = WorkerProcess(db_dsn, *args, **kwargs)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.close()
    for worker in started:
        worker.check_logs()
    for worker in started:  # checked and clean: a failing test keeps its logs to read
        worker.log_path.unlink(missing_ok=True)
