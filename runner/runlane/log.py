"""Structured logs: one JSON object per line on stdout (stderr for a command whose stdout is
its result, `runlane follow`), `message` = the event name.

Fields are dotted names (`run.id`, `run.first_response_ms`, `queue.delayed_runs`), passed
as `log.info("run.finished", **row)`. What goes in: ids, lanes, triggers, counts,
durations, SQLSTATEs and exception class names. What never goes in: message text,
prompts, agent output or personal identifiers, and by default no exception message
either: an agent's exception can quote what a user wrote (`ValueError(f"bad reply to
{question}")`). The message is stored with the run (runlane.run_detail, `runlane run
ID`); `configure(log_errors=True)` (`--log-errors`) also logs it as `error.message`.
At DEBUG level error lines carry `error.stack`: the traceback's frames (file, line,
function, source line), without the exception's message.

Standard-library `logging` records (an agent's own `logging.getLogger(...).info(...)`)
reach the same output, `message` = the record's text and `logger` = its name; they say
what their author wrote, so what an agent logs is the agent's business. The chatty
libraries below (psycopg's pool logs every connection it lends) stay at WARNING.

`configure(fmt="text")` writes a readable line instead of JSON (development):
`2026-01-02T03:04:05.123456Z warning run.attempt_failed run.id=7 error.type=ValueError`.

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
import traceback
from collections.abc import Mapping
from typing import Any, TextIO, cast

import structlog
from structlog.typing import EventDict

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
    """Lines to stdout (or stderr: `configure(stream="stderr")`); within an event loop,
    flushed once at the end of the iteration."""

    def __init__(self) -> None:
        self.pending: list[str] = []
        self.scheduled = False
        self.stream = "stdout"

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
        with contextlib.suppress(Exception):  # a closed stream never fails the caller
            out = sys.stderr if self.stream == "stderr" else sys.stdout
            out.write(text)
            out.flush()


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


def _add_time(_logger: Any, _method: str, event_dict: EventDict) -> EventDict:
    event_dict["time"] = _clock.now()
    return event_dict


def _render(_logger: Any, _method: str, event_dict: EventDict) -> str:
    return _dumps(event_dict)


def _text_value(value: Any) -> str:
    """A string bare when it can be (quoted when empty or holding a space, quote, `=` or
    a line break); anything else as JSON (7, true, null, ["interactive"])."""
    if not isinstance(value, str):
        return _dumps(value)
    if value == "" or any(c in value for c in ' ="\n\t'):
        return _dumps(value)
    return value


def _render_text(_logger: Any, _method: str, event_dict: EventDict) -> str:
    """`time level message key=value …`; a stack follows on indented lines."""
    fields = dict(event_dict)
    head = [
        str(fields.pop("time", "")),
        str(fields.pop("level", "")),
        str(fields.pop("message", "")),
    ]
    stack = fields.pop("error.stack", None)
    line = " ".join(head + [f"{k}={_text_value(v)}" for k, v in fields.items()])
    if stack:
        line += "\n" + "\n".join("    " + s for s in str(stack).rstrip().splitlines())
    return line


FORMATS = ("json", "text")
LEVELS = ("debug", "info", "warning", "error")
# Libraries that log at INFO on every call (psycopg_pool: each connection lent and
# returned) stay at WARNING whatever the level.
QUIET_LOGGERS = ("psycopg", "psycopg_pool", "httpx", "httpcore", "asyncio", "urllib3")


class _Errors:
    messages = False  # error.message in error lines (--log-errors)
    tracebacks = False  # error.stack in error lines (DEBUG)


class _Timing:
    # JSON lines at INFO or below (the default): timing() writes its line itself, the
    # same line structlog's chain makes, without the chain (two lines per run).
    direct = False


class _StdlibBridge(logging.Handler):
    """Standard-library records into the same output (and format) as runlane's own."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            fields: dict[str, Any] = {"logger": record.name}
            if record.exc_info and record.exc_info[1] is not None:
                fields.update(error_fields(record.exc_info[1]))
            get().log(record.levelno, record.getMessage(), **fields)
        except Exception:  # noqa: BLE001 - logging never fails the caller
            self.handleError(record)


_bridge = _StdlibBridge()


def parse_level(name: str | int) -> int:
    if isinstance(name, int):
        return name
    if name.lower() not in LEVELS:
        raise ValueError(f"log level is one of {', '.join(LEVELS)}, not {name!r}")
    return logging.getLevelName(name.upper())


def configure(
    level: int | str = logging.INFO,
    *,
    fmt: str = "json",
    log_errors: bool = False,
    capture_stdlib: bool = True,
    stream: str = "stdout",
) -> None:
    """structlog with the shortest processor chain that gives our line: level, time,
    `message` = the event name, compact JSON (or `fmt="text"`). Re-configuring changes
    the level. `log_errors` adds exception messages to error lines; DEBUG adds their
    stacks. With `capture_stdlib` (runlane's own processes: the CLI) standard-library
    logging goes to the same output at the same level; a library user's process, which
    reaches here through get(), keeps its own logging setup. `stream="stderr"` is for a
    command whose stdout is its result (`runlane follow` prints the run's text there)."""
    level = parse_level(level)
    if fmt not in FORMATS:
        raise ValueError(f"log format is json or text, not {fmt!r}")
    if stream not in ("stdout", "stderr"):
        raise ValueError(f"log stream is stdout or stderr, not {stream!r}")
    _output.flush()
    _output.stream = stream
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            _add_time,
            structlog.processors.EventRenamer("message"),
            _render if fmt == "json" else _render_text,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        # structlog's WriteLogger calls write() and flush() only: all _BatchedFile has.
        logger_factory=structlog.WriteLoggerFactory(file=cast(TextIO, _BatchedFile())),
        cache_logger_on_first_use=True,
    )
    global _bound
    _bound = structlog.get_logger()
    _Timing.direct = fmt == "json" and level <= logging.INFO
    _Errors.messages = log_errors
    _Errors.tracebacks = level <= logging.DEBUG
    if not capture_stdlib:
        return
    root = logging.getLogger()
    if _bridge not in root.handlers:
        root.addHandler(_bridge)
    root.setLevel(level)
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))


_bound: Any = None


def get() -> Any:
    if _bound is None:
        configure(capture_stdlib=False)
    return _bound


def flush() -> None:
    """Write out the lines of the current loop iteration now."""
    _output.flush()


def timing(event: str, row: Any, **extra: Any) -> None:
    """Log a timing row returned by the database; a bad or missing row never raises.

    The worker writes two of these per run, so with JSON at INFO they skip structlog's
    chain: the fields, then level, time and message, in the order the chain puts them
    (test_log_lines.py holds the two to the same line)."""
    try:
        if isinstance(row, Mapping):
            # The row names its own event ("event"); the log line's name is `message`.
            for k, v in row.items():
                if k != "event" and k != "message":
                    extra[str(k)] = v
        if _bound is None:
            configure(capture_stdlib=False)
        if _Timing.direct:
            extra["level"] = "info"
            extra["time"] = _clock.now()
            extra["message"] = event
            _output.write(_dumps(extra) + "\n")
            return
        get().info(event, **extra)
    except Exception as exc:  # noqa: BLE001 - a timing log must never fail the operation
        with contextlib.suppress(Exception):
            get().warning("log.timing_failed", **{"log.event": event, **error_fields(exc)})


MESSAGE_LIMIT = 2000  # characters of error.message


def error_fields(exc: BaseException) -> dict[str, Any]:
    """What we may say about an error: its class and SQLSTATE; its message only when
    configured with log_errors (it can quote user content); at DEBUG its stack frames
    (never the message: format_tb leaves it out)."""
    fields: dict[str, Any] = {"error.type": type(exc).__name__}
    sqlstate = getattr(exc, "sqlstate", None)
    if sqlstate:
        fields["error.sqlstate"] = sqlstate
    if _Errors.messages:
        fields["error.message"] = str(exc)[:MESSAGE_LIMIT]
    if _Errors.tracebacks and exc.__traceback__ is not None:
        fields["error.stack"] = "".join(traceback.format_tb(exc.__traceback__))
    return fields
