"""`runlane worker --metrics-port`: scraped over HTTP after a few runs, the counters and
histograms hold exactly those runs, and the journal-backed counters see the skip."""

from __future__ import annotations

import re
import socket

import httpx
import worker_helpers
from worker_helpers import make_agent, run_state, submit, wait_until

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
    worker = workers("--lease", "5", "--metrics-port", str(port),
                     lanes=("interactive", "background"))
    worker.wait_for("dispatch.ready")
    chats = [submit(conn, "agent-m1", "thread-1", "first"),
             submit(conn, "agent-m2", "thread-1", "second")]
    manual = conn.execute("select run_id from runlane.run_now('agent-m1')").fetchone()[0]
    skipped = conn.execute(
        "select state, reason from runlane.run_now('agent-m1')").fetchone()
    assert skipped == ("skipped", "already_running")
    conn.execute("select runlane.publish_run(%s)", (manual,))
    for run_id in [*chats, manual]:
        wait_until(lambda r=run_id: run_state(conn, r) == "succeeded", what=f"run {run_id}")

    def scraped() -> dict[str, float] | None:
        samples = _samples(httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text)
        ready = (samples.get('runlane_runs_finished_total{lane="background",outcome="succeeded"}')
                 == 1 and samples.get('runlane_runs_skipped_total{reason="already_running"}')
                 # a database snapshot taken after every run ended
                 and samples.get('runlane_queue_depth{lane="interactive",state="running"}') == 0
                 and samples.get('runlane_queue_depth{lane="background",state="running"}') == 0
                 and samples.get('runlane_queue_depth{lane="interactive",state="due"}') == 0
                 and samples.get('runlane_queue_depth{lane="background",state="due"}') == 0)
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
