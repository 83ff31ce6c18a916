"""Memory admission with a real worker and an injected probe: a declined run stays
queued while the dispatcher keeps going, one wait and one resume are logged per episode."""

from __future__ import annotations

import time

import worker_helpers
from worker_helpers import make_agent, run_state, submit, wait_until

workers = worker_helpers.workers  # the fixture: real worker processes, logs checked after


def test_admission_declines_then_resumes_with_one_wait_and_one_resume(conn, workers, tmp_path):
    probe = tmp_path / "available_bytes"
    probe.write_text(str(10 * 1024 * 1024))  # 10 MiB free, below the 64 MiB buffer
    make_agent(conn, "agent-m")
    worker = workers(
        "--no-maintenance",
        "--memory-probe",
        "worker_helpers:file_probe",
        "--scan-interval",
        "0.2",
        env={"RUNLANE_TEST_PROBE_FILE": str(probe)},
    )
    wait = worker.wait_for("run.admission_wait")
    assert wait["admission.buffer_bytes"] == 64 * 1024 * 1024
    run_id = submit(conn, "agent-m", "thread-1", "wait for memory")
    time.sleep(1.5)  # many passes decline meanwhile; none claims
    assert run_state(conn, run_id) == "queued"
    assert len(worker.events("run.admission_wait")) == 1

    probe.write_text(str(8 * 1024 * 1024 * 1024))
    resumed = worker.wait_for("run.admission_resumed")
    assert resumed["admission.wait_ms"] >= 0
    wait_until(lambda: run_state(conn, run_id) == "succeeded", what="admitted run finished")
    assert len(worker.events("run.admission_wait")) == 1
    assert len(worker.events("run.admission_resumed")) == 1
