"""`runlane worker --metrics-port`: scraped over HTTP after a few runs, the counters and
histograms hold exactly those runs, and the journal-backed counters see the skip."""

from __future__ import annotations

import re
import socket
import uuid

import httpx
import psycopg
import pytest
import worker_helpers
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from worker_helpers import WorkerProcess, make_agent, run_state, submit, wait_until

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _samples(text: str) -> dict[str, float]:
    found = {}
    for line in text.splitlines():
        match = re.match(r"^([a-z_]+(?:\{[^}]*\})?) (\S+)$", line)
        if match:
            found[match[1]] = float(match[2])
    return found


def test_metrics_count_the_runs_this_worker_did(conn, workers):
    make_agent(conn, "agent-m1")
    make_agent(conn, "agent-m2")
    port = _free_port()
    worker = workers(
        "--lease", "5", "--metrics-port", str(port), lanes=("interactive", "background")
    )
    worker.wait_for("dispatch.ready")
    chats = [
        submit(conn, "agent-m1", "thread-1", "first"),
        submit(conn, "agent-m2", "thread-1", "second"),
    ]
    manual = conn.execute("select run_id from runlane.run_now('agent-m1')").fetchone()[0]
    skipped = conn.execute("select state, reason from runlane.run_now('agent-m1')").fetchone()
    assert skipped == ("skipped", "already_running")
    conn.execute("select runlane.publish_run(%s)", (manual,))
    for run_id in [*chats, manual]:
        wait_until(lambda r=run_id: run_state(conn, r) == "succeeded", what=f"run {run_id}")

    def scraped() -> dict[str, float] | None:
        samples = _samples(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text)
        ready = (
            samples.get('runlane_runs_finished_total{lane="background",outcome="succeeded"}') == 1
            and samples.get('runlane_runs_skipped_total{reason="already_running"}')
            # a database snapshot taken after every run ended
            and samples.get('runlane_queue_depth{lane="interactive",state="running"}') == 0
            and samples.get('runlane_queue_depth{lane="background",state="running"}') == 0
            and samples.get('runlane_queue_depth{lane="interactive",state="due"}') == 0
            and samples.get('runlane_queue_depth{lane="background",state="due"}') == 0
        )
        return samples if ready else None

    samples = wait_until(scraped, what="metrics with the finished runs and the skip")
    assert samples['runlane_runs_claimed_total{lane="interactive"}'] == 2
    assert samples['runlane_runs_claimed_total{lane="background"}'] == 1
    assert samples['runlane_runs_finished_total{lane="interactive",outcome="succeeded"}'] == 2
    assert samples['runlane_run_first_response_seconds_count{lane="interactive"}'] == 2
    assert samples['runlane_run_first_response_seconds_count{lane="background"}'] == 1
    assert samples['runlane_run_queue_wait_seconds_count{lane="interactive"}'] == 2
    assert samples['runlane_run_total_seconds_count{lane="interactive",outcome="succeeded"}'] == 2
    assert samples['runlane_runs_skipped_total{reason="already_running"}'] == 1
    assert samples["runlane_routines_coalesced_total"] == 0
    assert samples['runlane_queue_depth{lane="interactive",state="sleeping"}'] == 0
    assert samples["runlane_interactive_delayed_runs"] == 0


@pytest.fixture
def worker_only_dsn(db_dsn, conn):
    """A login role holding runlane_worker and nothing else (the least a worker needs)."""
    role = f"metrics_worker_{uuid.uuid4().hex[:8]}"
    dbname = conninfo_to_dict(db_dsn)["dbname"]
    conn.execute(f'create role "{role}" login in role runlane_worker')
    conn.execute(f'grant connect on database "{dbname}" to "{role}"')
    yield make_conninfo(db_dsn, user=role)
    conn.execute(f'revoke connect on database "{dbname}" from "{role}"')
    conn.execute(f'drop owned by "{role}"')
    conn.execute(f'drop role "{role}"')


def test_metrics_refresh_as_a_login_with_only_the_worker_role(conn, worker_only_dsn):
    """`--metrics-port` under least privilege: the database-wide values are read through
    functions granted to runlane_worker, never from the tables (42501 before)."""
    with (
        pytest.raises(psycopg.errors.InsufficientPrivilege),
        psycopg.connect(worker_only_dsn) as login,
    ):
        login.execute("select count(*) from runlane.run_events")
    make_agent(conn, "agent-lp")
    queued = conn.execute("select run_id from runlane.run_now('agent-lp')").fetchone()[0]
    assert conn.execute("select reason from runlane.run_now('agent-lp')").fetchone() == (
        "already_running",
    )
    port = _free_port()
    worker = WorkerProcess(
        worker_only_dsn, "--metrics-port", str(port), lanes=("interactive", "background")
    )
    try:
        worker.wait_for("dispatch.ready")
        conn.execute("select runlane.publish_run(%s)", (queued,))
        wait_until(lambda: run_state(conn, queued) == "succeeded", what="the run as the login")

        def scraped() -> dict[str, float] | None:
            samples = _samples(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text)
            ready = (
                samples.get('runlane_runs_skipped_total{reason="already_running"}') == 1
                and samples.get('runlane_queue_depth{lane="background",state="due"}') == 0
                and samples.get('runlane_queue_depth{lane="background",state="running"}') == 0
            )
            return samples if ready else None

        wait_until(scraped, what="the journal counters read as the worker login")
        assert worker.events("metrics.refresh_failed") == []
    finally:
        worker.close()
    worker.check_logs()
