"""Notification payloads are untrusted hints.

Any login that may NOTIFY can send anything on `runlane_runs` and `runlane_outputs`
(`pg_notify('runlane_runs', '{"lane":[]}')`, `{"run_id":1e400}`, text that is not JSON).
A payload only ever says "look again sooner": a consumer that cannot read one ignores
it and counts it, and the periodic scan (worker) or poll (stream) still finds the work.
Nothing here raises: one bad payload never strands the notifications behind it.

Ignored payloads are counted per channel (`IGNORED`, served by the worker's metrics as
`runlane_notifications_ignored_total{channel}`) and logged as `notify.payload_ignored`
at most once per `LOG_EVERY` seconds per channel, with the channel and the count so far,
never the payload's content.
"""

from __future__ import annotations

import json
import time
from collections import Counter

from . import log

RUNS, OUTPUTS = "runlane_runs", "runlane_outputs"
LANES = ("interactive", "background")
LOG_EVERY = 60.0
MAX_PAYLOAD = 1000  # ours are under 100 bytes; a longer one is not ours

IGNORED: Counter[str] = Counter()
_last_logged: dict[str, float] = {}


def ignored(channel: str, why: str) -> None:
    """Count an unreadable payload; a log line at most once per LOG_EVERY per channel."""
    IGNORED[channel] += 1
    now = time.monotonic()
    if now - _last_logged.get(channel, float("-inf")) >= LOG_EVERY:
        _last_logged[channel] = now
        log.get().warning(
            "notify.payload_ignored",
            **{
                "notify.channel": channel,
                "notify.reason": why,
                "notify.ignored_total": IGNORED[channel],
            },
        )


def _object(channel: str, payload: str | bytes) -> dict | None:
    try:
        if isinstance(payload, bytes):
            payload = payload.decode()
        if len(payload) > MAX_PAYLOAD:
            ignored(channel, "too_long")
            return None
        value = json.loads(payload)
    except (ValueError, TypeError, RecursionError):
        ignored(channel, "not_json")
        return None
    if not isinstance(value, dict):
        ignored(channel, "not_an_object")
        return None
    return value


def lane_of(payload: str | bytes) -> str | None:
    """The lane a `runlane_runs` payload names, or None when it is unreadable (counted)."""
    value = _object(RUNS, payload)
    if value is None:
        return None
    lane = value.get("lane")
    if lane not in LANES:  # also a list or a dict: `in` on a tuple never hashes
        ignored(RUNS, "bad_lane")
        return None
    return lane


def stop_of(payload: str | bytes) -> int | None:
    """The run a `runlane_runs` Stop hint names ({"cancel": run_id, "lane": …}, sent by
    runlane.cancel_run), or None when the payload is no Stop hint or unreadable (counted
    when it is a Stop hint with a bad run id). Only a hint: the worker asks the database
    (a heartbeat) before it stops anything, so a forged one stops nothing."""
    value = _object(RUNS, payload)
    if value is None or "cancel" not in value:
        return None
    run_id = value.get("cancel")
    if type(run_id) is not int or not 0 < run_id < 2**63:
        ignored(RUNS, "bad_run_id")
        return None
    return run_id


def run_id_of(payload: str | bytes) -> int | None:
    """The run id a `runlane_outputs` payload names, or None when it is unreadable
    (counted): only a JSON integer in the bigint range, never a float such as 1e400."""
    value = _object(OUTPUTS, payload)
    if value is None:
        return None
    run_id = value.get("run_id")
    if type(run_id) is not int or not 0 < run_id < 2**63:
        ignored(OUTPUTS, "bad_run_id")
        return None
    return run_id


def stream_of(payload: str | bytes) -> str | None:
    """The stream token a `runlane_outputs` payload names ({"stream": "<32 hex digits>"},
    runlane.stream_token), or None when it is unreadable (counted)."""
    return stream_hint(payload)[0]


def stream_hint(payload: str | bytes) -> tuple[str | None, bool]:
    """The stream token a `runlane_outputs` payload names (None when it is unreadable,
    counted) and whether it says its run finished ({"stream": …, "end": true},
    runlane._notify_stream_end), from one parse. Only a hint: a reader that wakes on an
    end reads run_status, so a forged one costs one read."""
    value = _object(OUTPUTS, payload)
    if value is None:
        return None, False
    token = value.get("stream")
    if not isinstance(token, str) or len(token) != 32:
        ignored(OUTPUTS, "bad_stream")
        return None, False
    return token, value.get("end") is True
