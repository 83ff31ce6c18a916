"""`runlane demo` (what `make demo` runs) as a test: it exits 0 and its summary shows the
skipped "Run now", the coalesced tick, the reply of one chat run, the runs table and the
timing table, with the echo agent's deliberate delay named next to the timings."""

from __future__ import annotations

import os
import subprocess
import sys


def test_the_demo_runs_and_its_summary_shows_skips_coalescing_and_timing():
    proc = subprocess.run(
        [sys.executable, "-m", "runlane", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "RUNLANE_TABLES": "plain"},
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    # "Run now" on a busy agent is a visible skip.
    assert "pressed again -> run 4 skipped (already_running)" in out
    # The schedule fired once and the next slot coalesced into the still-pending run.
    fired = next(li for li in out.splitlines() if "triage" in li and "routine.fired" in li)
    coalesced = next(li for li in out.splitlines() if "triage" in li and "routine.coalesced" in li)
    assert fired.split()[-1] == coalesced.split()[-1]  # the same run
    assert "message 2 -> steering" in out and "-> held" in out
    # Live progress lines, then the runs table: every run ended, one with a coalesced tick.
    assert "first visible output" in out
    runs = out[out.index("\nRuns\n") : out.index("Timing (ms)")]
    rows = [li.split() for li in runs.splitlines()[4:] if li.strip()]
    assert len(rows) >= 7
    assert {r[4] for r in rows} <= {"succeeded", "skipped"}
    assert any(r[0] == fired.split()[-1] and r[-1] == "1" for r in rows)
    assert sum(r[5] == "already_running" for r in rows) >= 1
    # The timing table: first response over every run that answered, with p50 and p90.
    timing = out[out.index("Timing (ms)") :]
    first = next(
        li.split() for li in timing.splitlines() if li.startswith("all") and "first_response" in li
    )
    assert int(first[2]) >= 4 and int(first[3]) <= int(first[4])
    assert "first response over" in out and "p50" in out and "p90" in out
    # One reply is shown, read as a chat client reads it: grace's greeting echoed back.
    reply = next(li for li in out.splitlines() if "reply of run" in li)
    assert "grace-chat" in reply and reply.endswith("'Good morning!'")
    # The echo agent's deliberate delay is named wherever a first response is shown.
    assert "waits 350 ms before each chunk ON PURPOSE" in out
    firsts = [li for li in out.splitlines() if "first visible output" in li]
    assert firsts and all("deliberate 350 ms wait" in li for li in firsts)
    summary = out[out.index("first response over") :]
    assert "deliberate 350 ms wait" in summary and "make bench" in summary
    # No other message text reaches the output.
    assert "Hello! What can you do?" not in out and "One more thing" not in out
