"""The chaos soak, short: the same driver as `make soak` (soak/chaos.py) with ~1,500 runs,
3 real worker processes (one of them behind the reply-dropping proxy), a fixed seed and
every fault kind at least once: kill -9, SIGTERM, pg_terminate_backend, PostgreSQL
restarts in fast and immediate mode, a window without notifications, SIGSTOP of a worker
past its lease (with and without computer-bound runs), SIGSTOP of the maintenance leader,
lost acknowledgements (a committed claim, step and finish whose reply is lost), a pinned
NOTIFY queue, squatted locks, forged notifications, a NOTIFY queue held past half
(simulated) and an organization's settings row held open by its own API login past the
5 s lock_timeout, on its own durable throwaway cluster (it restarts it). It asserts what
the soak checks, never how fast: zero violations."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `soak` sits beside `tests`, outside the installed package
    sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402

from soak.chaos import CHECKS, FAULT_KINDS, Chaos, SoakConfig  # noqa: E402

pytestmark = pytest.mark.soak


def test_short_chaos_soak_has_no_violations():
    config = SoakConfig(
        runs=1500,
        workers=3,
        duration=25.0,
        seed=7,
        fault_gap=(1.0, 2.0),
        suppress_window=(2.0, 3.0),
        drain_timeout=120.0,
        leader_stop_leases=2.5,
        squat_window=(7.0, 8.0),
        notify_window=(2.0, 3.0),
        notify_fill_mb=32,
        forge_window=(2.0, 3.0),
        lost_ack_window=4.0,
        notify_half_window=(2.0, 3.0),
        org_lock_hold=(5.5, 6.5),
        faults=FAULT_KINDS,
    )
    report = Chaos(config).run()
    print(report.text())

    assert report.violations == [], report.text()
    assert report.runs >= 1500, "the load created the runs it was asked for"
    assert set(report.faults) == set(config.faults), "every kind of fault was injected"
    assert report.notify_half["windows"] >= 1, "the NOTIFY queue was held past half"
    assert report.org_lock["holds"] >= 1, "an organization's settings row was held open"
    assert set(report.violations_by_check) == set(CHECKS), "every check ran"
    assert report.recoveries["worker_restarted"] >= 2, "killed and stopped workers came back"
    assert report.recoveries["postgres_restarted"] >= 2, "both restarts completed"
    assert sum(report.lost_acks.values()) >= 1, "the proxy lost at least one committed reply"
    assert report.streams.get("followed", 0) > 0, "stream readers followed chat runs"
    assert report.attempts >= report.runs - report.by_lane_state.get("background/skipped", 0), (
        "every run that was not skipped was claimed at least once"
    )
    assert report.routine_fired > 0, "the maintenance leader fired scheduled occurrences"
    assert report.by_lane_state.get("interactive/succeeded", 0) > 0
    assert not any(k.endswith(("/queued", "/running")) for k in report.by_lane_state), (
        "nothing is left queued or running"
    )
