"""The worker's timing lines (two per run) are written without structlog's chain when the
output is JSON at INFO or below: they must be the very line the chain makes, and follow
the configured level and format like every other line. Each case runs in a fresh
interpreter: the log configuration is process-wide."""

from __future__ import annotations

import json
import subprocess
import sys

ROW = {
    "event": "run.finished",
    "run.id": 7,
    "run.lane": "interactive",
    "run.total_ms": 12,
    "run.outcome": "succeeded",
}


def lines_of(code: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", "from runlane import log\n" + code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.splitlines()


def without_time(line: str) -> tuple[list[str], dict]:
    fields = json.loads(line)
    del fields["time"]
    return list(json.loads(line)), fields


def test_a_timing_line_is_the_line_structlogs_chain_makes():
    direct, chain = lines_of(
        "log.configure('info')\n"
        "assert log._Timing.direct  # the line below skips the chain\n"
        f"log.timing('run.finished', {ROW!r}, **{{'run.fence': 3}})\n"
        "fields = {'run.fence': 3, **{k: v for k, v in %r.items() if k != 'event'}}\n"
        "log.get().info('run.finished', **fields)\n" % ROW
    )
    assert without_time(direct) == without_time(chain)
    keys, fields = without_time(direct)
    assert keys[-3:] == ["level", "time", "message"]  # the chain's order
    assert fields == {
        "run.fence": 3,
        "run.id": 7,
        "run.lane": "interactive",
        "run.total_ms": 12,
        "run.outcome": "succeeded",
        "level": "info",
        "message": "run.finished",
    }


def test_a_timing_line_follows_the_configured_level_and_format():
    assert lines_of(f"log.configure('warning')\nlog.timing('run.finished', {ROW!r})\n") == []
    text = lines_of(f"log.configure('info', fmt='text')\nlog.timing('run.finished', {ROW!r})\n")
    assert len(text) == 1
    assert " info run.finished run.id=7 run.lane=interactive run.total_ms=12" in text[0]
    # unconfigured (a library user's process): JSON at INFO, as get() configures it
    (line,) = lines_of(f"log.timing('run.finished', {ROW!r}, **{{'run.fence': 3}})\n")
    assert json.loads(line)["message"] == "run.finished"


def test_a_bad_timing_row_still_logs_the_event_and_never_raises():
    (line,) = lines_of("log.configure('info')\nlog.timing('run.finished', None, **{'run.id': 9})\n")
    assert json.loads(line)["run.id"] == 9
    (line,) = lines_of("log.configure('info')\nlog.timing('run.finished', {'run.id': object()})\n")
    assert json.loads(line)["message"] == "run.finished"  # the value as repr(), not a raise
