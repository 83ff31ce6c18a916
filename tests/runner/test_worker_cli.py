"""The runlane CLI around the worker: submit, run-now and tick (one maintenance pass that
fires a due routine and publishes its run), and database errors as one line with the
SQLSTATE; plus the iteration cap and a lost lease inside a real worker."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import worker_helpers
from worker_helpers import (
    MARKER,
    make_agent,
    run_row,
    run_state,
    submit,
    visible_outputs,
    wait_until,
)

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after


def cli(*args: str, dsn: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "runlane", *args],
        capture_output=True,
        text=True,
        env={"RUNLANE_DSN": dsn, "PATH": "/usr/bin:/bin"},
    )


def test_submit_and_run_now_create_and_publish_runs_a_worker_executes(conn, db_dsn, workers):
    make_agent(conn, "agent-c")
    worker = workers(
        "--no-maintenance", "--scan-interval", "600", lanes=("interactive", "background")
    )
    worker.wait_for("dispatch.ready")
    submitted = cli("submit", "agent-c", "thread-1", f"hi {MARKER}", dsn=db_dsn)
    assert submitted.returncode == 0, submitted.stderr
    assert "created" in submitted.stdout
    manual = cli("run-now", "agent-c", dsn=db_dsn)
    assert manual.returncode == 0, manual.stderr
    assert "queued" in manual.stdout
    runs = conn.execute("select run_id, lane from runlane.runs order by run_id").fetchall()
    assert {lane for _, lane in runs} == {"interactive", "background"}
    for run_id, _ in runs:  # the worker only learns of them through the publications
        wait_until(lambda r=run_id: run_state(conn, r) == "succeeded", what=f"run {run_id}")


def test_database_errors_are_one_line_with_the_sqlstate(db_dsn):
    result = cli("run-now", "no-such-agent", dsn=db_dsn)
    assert result.returncode == 2
    assert result.stderr.startswith("RL008"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_tick_fires_a_due_routine_and_publishes_its_run(conn, db_dsn, workers):
    make_agent(conn, "agent-r")
    conn.execute("update runlane.agents set schedule = 'every 6 hours' where agent_id = 'agent-r'")
    conn.execute(
        "update runlane.agents set next_run_at = now() - interval '1 minute' "
        "where agent_id = 'agent-r'"
    )
    worker = workers("--no-maintenance", "--scan-interval", "600", lanes=("background",))
    worker.wait_for("dispatch.ready")
    result = cli("tick", dsn=db_dsn)
    assert result.returncode == 0, result.stderr
    fired = [json.loads(line) for line in result.stdout.splitlines()]
    fired = [r for r in fired if r["message"] == "routine.fired"]
    assert len(fired) == 1
    run_id = fired[0]["run.id"]
    wait_until(lambda: run_state(conn, run_id) == "succeeded", what="the timer run ran")
    assert run_row(conn, run_id)["trigger"] == "scheduled"
    assert MARKER not in result.stdout


def test_a_run_reaching_the_iteration_cap_fails_with_that_reason(conn, workers):
    make_agent(conn, "agent-cap", org_id="org-cap")
    conn.execute(
        "update runlane.platform_settings set agent_iteration_cap = 2 where org_id = 'org-cap'"
    )
    workers("--no-maintenance", env={"RUNLANE_ECHO_CHUNKS": "5"})
    run_id = submit(conn, "agent-cap", "thread-1", "five chunks but only two steps")
    wait_until(lambda: run_state(conn, run_id) == "failed", what="capped run failed")
    assert run_row(conn, run_id)["reason"] == "iteration_cap"
    assert len(visible_outputs(conn, run_id)) == 2


def test_a_lost_lease_stops_the_agent_and_nothing_more_is_written(conn, workers):
    make_agent(conn, "agent-l")
    worker = workers(
        "--no-maintenance",
        "--lease",
        "1.5",
        env={"RUNLANE_ECHO_DELAY": "0.5", "RUNLANE_ECHO_CHUNKS": "50"},
    )
    run_id = submit(conn, "agent-l", "thread-1", "x" * 200)
    worker.wait_for("run.first_response", where=lambda r: r["run.id"] == run_id)
    # Another owner takes the run (as a claim after an expired lease would).
    conn.execute("select runlane_test.claimed(%s, 'someone-else')", (run_id,))
    lost = worker.wait_for("run.lease_lost", where=lambda r: r["run.id"] == run_id)
    assert lost["run.attempt"] == 1
    written = visible_outputs(conn, run_id)
    count = conn.execute(
        "select count(*) from runlane.run_outputs where run_id = %s", (run_id,)
    ).fetchone()[0]
    time.sleep(1.5)  # three of its former steps' worth: nothing more came from it
    assert (
        conn.execute(
            "select count(*) from runlane.run_outputs where run_id = %s", (run_id,)
        ).fetchone()[0]
        == count
    )
    assert visible_outputs(conn, run_id) == written
    assert not [r for r in worker.events("run.finished") if r.get("run.id") == run_id]
    assert run_row(conn, run_id)["lease_owner"] == "someone-else"


def test_a_failed_publication_after_tick_loses_nothing(conn, db_dsn, workers):
    make_agent(conn, "agent-p")
    conn.execute("update runlane.agents set schedule = 'every 6 hours' where agent_id = 'agent-p'")
    conn.execute(
        "update runlane.agents set next_run_at = now() - interval '1 minute' "
        "where agent_id = 'agent-p'"
    )
    # Publication breaks (the function is gone for this database only).
    conn.execute(
        "alter function runlane.publish_run(bigint, timestamptz) rename to publish_run_away"
    )
    result = cli("tick", dsn=db_dsn)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    fired = [r for r in records if r["message"] == "routine.fired"]
    failed = [r for r in records if r["message"] == "run.publish_failed"]
    assert len(fired) == 1 and [r["run.id"] for r in failed] == [fired[0]["run.id"]]
    run_id = fired[0]["run.id"]
    assert run_state(conn, run_id) == "queued"
    assert conn.execute(
        "select next_run_at > now() from runlane.agents where agent_id = 'agent-p'"
    ).fetchone()[0]
    # The committed run is found by a worker's scan.
    workers("--no-maintenance", "--scan-interval", "0.3", lanes=("background",))
    wait_until(lambda: run_state(conn, run_id) == "succeeded", what="the unpublished run ran")


def test_a_worker_told_to_stop_while_its_database_is_out_of_reach_exits(db_dsn):
    """SIGTERM while nothing answers at the database's address: the worker stops without
    reaching it. Before, it waited out the startup schema check (the pool's 30 s) and
    then resent its registry row's last write for half a lease, a minute or more, and
    a platform's rolling restart waited on it. (The real database is not used: a port
    where nothing listens stands for one that went away.)"""
    import signal
    import socket

    with socket.socket() as s:  # a free port on loopback, closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "runlane",
            "worker",
            "--lane",
            "interactive",
            "--agent",
            "runlane.agents.echo:agent",
            "--no-maintenance",
            "--dsn",
            f"host=127.0.0.1 port={port} dbname=gone connect_timeout=2",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.0)  # inside its startup, trying the address
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=worker_helpers.DEADLINE / 2)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    messages = [
        json.loads(line).get("message") for line in out.splitlines() if line.startswith("{")
    ]
    assert proc.returncode == 0, err
    assert "worker.stopping" in messages and "worker.stopped" in messages


def test_every_worker_option_has_help_text():
    """`runlane worker --help` explains each option it lists: none is bare or hidden."""
    import click

    from runlane.cli import main

    worker = main.commands["worker"]
    bare = [
        max(p.opts, key=len)
        for p in worker.params
        if isinstance(p, click.Option) and (p.hidden or not (p.help or "").strip())
    ]
    assert bare == []
    shown = subprocess.run(
        [sys.executable, "-m", "runlane", "worker", "--help"], capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    for p in worker.params:
        if isinstance(p, click.Option):
            assert max(p.opts, key=len) in shown.stdout
