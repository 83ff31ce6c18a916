"""Failures a developer can see, content a user keeps private: an agent raising with the
user's words (the marker) in its exception's message. The message is stored with the run
and shown by `runlane run ID` and `runlane journal`; the worker's logs carry only its
class (and at --log-level debug its stack's frames) unless the worker runs with
--log-errors. The agent's own standard-library logging reaches the same log output."""

from __future__ import annotations

import json
import subprocess
import sys

import worker_helpers
from worker_helpers import MARKER, WorkerProcess, make_agent, run_state, wait_until

workers = worker_helpers.workers  # the fixture: every line checked for the marker after


def cli(*args: str, dsn: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "runlane", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={"RUNLANE_DSN": dsn, "PATH": "/usr/bin:/bin", "RUNLANE_TABLES": "plain"},
    )  # cells unwrapped


def failing_chat_run(conn, agent_id: str, body: str = f"hi {MARKER}") -> int:
    """A chat message whose run has one attempt (so the first failure fails it)."""
    make_agent(conn, agent_id)
    _message_id, run_id, _ = conn.execute(
        "select * from runlane.submit_message(%s, 'thread-1', %s)", (agent_id, body)
    ).fetchone()
    conn.execute("update runlane.runs set max_attempts = 1 where run_id = %s", (run_id,))
    conn.execute("select runlane.publish_run(%s)", (run_id,))
    return run_id


def test_the_error_is_in_run_and_journal_and_only_its_class_in_the_logs(conn, db_dsn, workers):
    run_id = failing_chat_run(conn, "agent-raise")
    worker = workers("--no-maintenance", "--agent", "raising_agent:agent", "--log-level", "debug")
    wait_until(lambda: run_state(conn, run_id) == "failed", what="the failed run")
    failed = worker.wait_for("run.attempt_failed")

    shown = cli("run", str(run_id), dsn=db_dsn)
    assert shown.returncode == 0, shown.stderr
    assert "state:             failed" in shown.stdout
    assert "reason:            attempts_exhausted" in shown.stdout
    assert "error class:       ValueError" in shown.stdout
    assert f"error:             hi {MARKER}" in shown.stdout
    as_json = json.loads(cli("run", str(run_id), "--json", dsn=db_dsn).stdout)
    assert (as_json["state"], as_json["attempts"], as_json["error_class"], as_json["error"]) == (
        "failed",
        1,
        "ValueError",
        f"hi {MARKER}",
    )
    journal = cli("journal", "agent-raise", dsn=db_dsn)
    assert journal.returncode == 0, journal.stderr
    assert f"ValueError: hi {MARKER}" in journal.stdout
    entries = json.loads(cli("journal", "agent-raise", "--json", dsn=db_dsn).stdout)["runs"]
    assert [(r["run_id"], r["error_class"], r["error"]) for r in entries] == [
        (run_id, "ValueError", f"hi {MARKER}")
    ]

    unknown = cli("run", "987654321", dsn=db_dsn)
    assert unknown.returncode == 2 and unknown.stderr.startswith("RL008"), unknown.stderr

    # The log: the class, the stack's frames at debug, never the message.
    assert failed["error.type"] == "ValueError"
    assert "error.message" not in failed
    assert "raising_agent.py" in failed["error.stack"]
    # the agent's own logging line, in the same JSON output
    step = worker.wait_for("raising_agent.step 0")
    assert step["logger"] == "raising_agent" and step["level"] == "info"
    # the fixture then checks every line and stderr for the marker


def test_a_long_error_is_kept_to_the_bound_the_database_keeps(conn, db_dsn, workers):
    """The database keeps 1,000 characters of an error (class included); the worker sent
    only 500, so the end of a long message was lost before it reached the table."""
    body = f"hi {MARKER} " + "0123456789" * 90  # with "ValueError: ", 962 characters
    run_id = failing_chat_run(conn, "agent-long-error", body)
    workers("--no-maintenance", "--agent", "raising_agent:agent")
    wait_until(lambda: run_state(conn, run_id) == "failed", what="the failed run")
    shown = json.loads(cli("run", str(run_id), "--json", dsn=db_dsn).stdout)
    assert (shown["error_class"], shown["error"]) == ("ValueError", body)


def test_log_errors_puts_the_message_in_the_logs(conn, db_dsn):
    run_id = failing_chat_run(conn, "agent-raise-logged")
    worker = WorkerProcess(
        db_dsn, "--no-maintenance", "--agent", "raising_agent:agent", "--log-errors"
    )
    try:
        wait_until(lambda: run_state(conn, run_id) == "failed", what="the failed run")
        failed = worker.wait_for("run.attempt_failed")
    finally:
        worker.close()
    assert failed["error.type"] == "ValueError"
    assert failed["error.message"] == f"hi {MARKER}"
    assert "error.stack" not in failed  # tracebacks only at --log-level debug


def test_text_format_is_one_readable_line_per_event():
    code = (
        "import logging\n"
        "from runlane import log\n"
        "log.configure('info', fmt='text')\n"
        "log.get().info('run.finished', **{'run.id': 7, 'run.lane': 'interactive',"
        " 'worker.lanes': ['interactive'], 'note': 'a b'})\n"
        "logging.getLogger('myagent').warning('model slow')\n"
        "logging.getLogger('psycopg_pool').info('connection given')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 2, lines  # the pool's INFO chatter stays out
    assert lines[0].split(" ", 1)[1] == (
        'info run.finished run.id=7 run.lane=interactive worker.lanes=["interactive"] note="a b"'
    )
    assert lines[1].split(" ", 1)[1] == "warning model slow logger=myagent"
