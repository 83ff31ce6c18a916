"""Structured logs: one JSON object per line on stdout, `message` = the event name.

Fields are dotted names (`run.id`, `run.first_response_ms`, `queue.delayed_runs`), passed
as `log.info("run.finished", **row)`. What goes in: ids, lanes, triggers, counts,
durations, SQLSTATEs and exception class names. What never goes in: message text,
prompts, agent output, exception messages or personal identifiers.

Lines are made by structlog. The worker logs three lines per run, so its chain is kept
short: the level, a timestamp whose seconds part is formatted once per second, the event
renamed to `message`, one compact json.dumps; and inside a running event loop the lines
of one loop iteration are written and flushed together at its end (one write instead of
one per line; outside a loop each line is written and flushed at once).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
import sys
import time
from collections.abc import Mapping
from typing import Any

import structlog

_dumps = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), default=repr).encode


class _Clock:
    """ISO 8601 UTC with microseconds (`2026-01-02T03:04:05.123456Z`)."""

    def __init__(self) -> None:
        self.second = -1
        self.prefix = ""

    def now(self) -> str:
        t = time.time()
        second = int(t)
        if second != self.second:
            self.second = second
            self.prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self.prefix}.{int((t - second) * 1e6):06d}Z"


class _Output:
    """Lines to stdout; within an event loop, flushed once at the end of the iteration."""

    def __init__(self) -> None:
        self.pending: list[str] = []
        self.scheduled = False

    def write(self, line: str) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        self.pending.append(line)
        if loop is None:
            self.flush()
        elif not self.scheduled:
            self.scheduled = True
            loop.call_soon(self.flush)

    def flush(self) -> None:
        self.scheduled = False
        if not self.pending:
            return
        text = "".join(self.pending)
        self.pending.clear()
        with contextlib.suppress(Exception):  # a closed stdout never fails the caller
            sys.stdout.write(text)
            sys.stdout.flush()


_output = _Output()
atexit.register(_output.flush)


class _BatchedFile:
    """What structlog writes to: lines go to the batched output; its per-line flush is a
    no-op because the batch is flushed once at the end of the loop iteration."""

    def write(self, text: str) -> None:
        _output.write(text)

    def flush(self) -> None:
        pass


_clock = _Clock()


def _add_time(_logger: Any, _method: str, event_dict: dict[str, Any]) -> dict[str, Any]:
    event_dict["time"] = _clock.now()
    return event_dict


def _render(_logger: Any, _method: str, event_dict: dict[str, Any]) -> str:
    return _dumps(event_dict)


def configure(level: int = logging.INFO) -> None:
    """structlog with the shortest processor chain that gives our line: level, time,
    `message` = the event name, compact JSON. Re-configuring changes the level."""
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            _add_time,
            structlog.processors.EventRenamer("message"),
            _render,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.WriteLoggerFactory(file=_BatchedFile()),
        cache_logger_on_first_use=True,
    )
    global _bound
    _bound = structlog.get_logger()


_bound: Any = None


def get() -> Any:
    if _bound is None:
        configure()
    return _bound


def flush() -> None:
    """Write out the lines of the current loop iteration now."""
    _output.flush()


def timing(event: str, row: Any, **extra: Any) -> None:
    """Log a timing row returned by the database; a bad or missing row never raises."""
    try:
        if isinstance(row, Mapping):
            # The row names its own event ("event"); the log line's name is `message`.
            for k, v in row.items():
                if k != "event" and k != "message":
                    extra[str(k)] = v
        get().info(event, **extra)
    except Exception as exc:  # noqa: BLE001 - a timing log must never fail the operation
        with contextlib.suppress(Exception):
            get().warning("log.timing_failed", **{"log.event": event, **error_fields(exc)})


def error_fields(exc: BaseException) -> dict[str, Any]:
    """What we may say about an error: its class and SQLSTATE, never its message."""
    fields: dict[str, Any] = {"error.type": type(exc).__name__}
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate:
        fields["error.sqlstate"] = sqlstate
    return fields
