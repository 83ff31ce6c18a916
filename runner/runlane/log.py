"""Structured logs: one JSON object per line on stdout, `message` = the event name.

Fields are dotted names (`run.id`, `run.first_response_ms`, `queue.delayed_runs`), passed
as `log.info("run.finished", **row)`. What goes in: ids, lanes, triggers, counts,
durations, SQLSTATEs and exception class names. What never goes in: message text,
prompts, agent output, exception messages or personal identifiers.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Mapping
from typing import Any

import structlog

_configured = False


def configure(level: int = logging.INFO) -> None:
    global _configured
    if _configured:
        return
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True, key="time"),
            structlog.processors.EventRenamer("message"),
            structlog.processors.JSONRenderer(sort_keys=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.WriteLoggerFactory(file=sys.stdout),
        cache_logger_on_first_use=True,
    )
    _configured = True


def get() -> Any:
    configure()
    return structlog.get_logger()


def timing(event: str, row: Any, **extra: Any) -> None:
    """Log a timing row returned by the database; a bad or missing row never raises."""
    try:
        fields = dict(extra)
        if isinstance(row, Mapping):
            # The row names its own event ("event"); the log line's name is `message`.
            fields.update({str(k): v for k, v in row.items() if k not in ("event", "message")})
        get().info(event, **fields)
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
