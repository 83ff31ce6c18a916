"""Follow a run's visible outputs as they commit: `runlane.stream(dsn, run_id, after=0)`.

    async for output in runlane.stream(dsn, run_id, after=last_seen_id):
        show(output["body"])
        last_seen_id = output["output_id"]      # resume from here after a reconnect

An async iterator of the rows of `runlane.outputs_since` (dicts: output_id, run_id,
attempt, kind, body, created_at), visible kinds only, in output_id order. It follows the
end-of-stream rule of the README ("Ending a stream"), the same for every language:

1. LISTEN on `runlane_outputs` first (so nothing committed before the LISTEN is missed).
2. Read `runlane.run_status` (state, attempt, last_output_id) BEFORE paging, then page
   with `outputs_since` until a page is short.
3. The stream has ended when that status was terminal (succeeded, failed, canceled,
   skipped) and every output up to its last_output_id was seen: a terminal run never
   gets another output. The run ended well only when the state is succeeded.
4. Otherwise wait for a notification whose payload carries the run's stream token
   (`runlane.stream_token`, never the run id; every output and the run's finish send
   one), or `poll` seconds (notifications are hints). On an output hint read what is
   new (step 2 without the status: an output hint never ends a stream); on the end hint
   (`"end": true`) or after `poll` seconds, go to 2. While the server's NOTIFY queue is
   at least UNTRUSTED_FROM full (`runlane.notify_queue_usage()`, read at most once every
   QUEUE_CHECK seconds by the streams sharing a listener; from 0.5 runlane sends no
   notification at all) the wait is at most FAST_POLL seconds: outputs arrive by paging
   alone.
5. Whenever the attempt changes (in run_status, or in an output row), read
   `runlane.superseded_through`: outputs with output_id <= it are the partial output of
   an attempt that did not finish and that a later attempt, starting over without a
   checkpoint, replaced.

Each output is yielded once (only ids above the last one yielded). A consumer that stops
early and calls it again with its last output_id sees neither a gap nor a repeat, across
attempts and resumes of the run: within a run, output ids are taken and committed in
order (each append holds the run's row lock until its commit).

With `events=True` every item has an "event" key: "output" (the row above), "superseded"
(through: the highest superseded output id; attempts: the attempts of the superseded
outputs this iterator yielded), yielded right after the last superseded output, and a
last "end" (state, reason, attempt, last_output_id, superseded_through) once the stream
has ended; `runlane follow` prints these.

It needs only what `runlane_api` may execute (stream_token, outputs_since,
outputs_since_many, run_status, superseded_through, notify_queue_usage) and a connection
of its own that pages. The LISTEN connection is shared: every stream() of one event loop
on one dsn listens through one connection (`_Listener`), since PostgreSQL wakes every
listening connection of the database on every notifying commit. The listener also reads
for its streams: the hints of one commit name every stream it wrote to, and one
`outputs_since_many` call (on a second connection of its own) reads the new outputs of
all of them; a stream pages alone when that read failed or filled its limit, and on an
older schema or a login without the function.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator
from typing import Any

import psycopg
from psycopg.rows import dict_row

from . import hints
from .rows import one as one_row

PAGE = """
select o.output_id, o.run_id, o.attempt, o.kind, o.body, o.created_at
from runlane.outputs_since(
    p_run_id => %(run_id)s::bigint, p_after_output_id => %(after)s::bigint,
    p_limit => %(limit)s::int
) as o
"""
STATUS = """
select s.state, s.reason, s.attempt, s.last_output_id
from runlane.run_status(p_run_id => %(run_id)s::bigint) as s
"""
SUPERSEDED = "select runlane.superseded_through(p_run_id => %(run_id)s::bigint) as through"
TOKEN = "select runlane.stream_token(p_run_id => %(run_id)s::bigint) as token"
USAGE = "select runlane.notify_queue_usage() as usage"
MANY = """
select o.output_id, o.run_id, o.attempt, o.kind, o.body, o.created_at
from runlane.outputs_since_many(
    p_run_ids => %(ids)s::bigint[], p_after_output_ids => %(afters)s::bigint[],
    p_limit => %(limit)s::int
) as o
"""
MANY_LIMIT = 500  # rows per stream per read; a stream with more pages on its own

# While notifications cannot be counted on (the NOTIFY queue at least UNTRUSTED_FROM full,
# the workers' warning level), a follower pages every FAST_POLL seconds; the queue is read
# at most every QUEUE_CHECK seconds.
UNTRUSTED_FROM = 0.25
FAST_POLL = 0.1
QUEUE_CHECK = 1.0

# run_status states after which a run never gets another output.
TERMINAL = frozenset({"succeeded", "failed", "canceled", "skipped"})
# `runlane follow`'s exit code per outcome (clients/node/follow.js uses the same): 0 only
# when the run succeeded; 1 stays any other error and 2 a usage error.
FOLLOW_EXIT = {"succeeded": 0, "failed": 3, "canceled": 4, "skipped": 5, "unknown": 6}


def ended(status: dict[str, Any], last_seen: int) -> bool:
    """The end-of-stream rule: a terminal state (read before the last page) and every
    visible output up to its last_output_id seen."""
    return status["state"] in TERMINAL and (
        status["last_output_id"] is None or last_seen >= status["last_output_id"]
    )


async def _queue_untrusted(reader: psycopg.AsyncConnection[dict[str, Any]]) -> bool:
    """Whether the NOTIFY queue is at least UNTRUSTED_FROM full; False when it cannot be
    read (a schema or a login without notify_queue_usage: notifications are then waited
    for as usual)."""
    try:
        row = await (await reader.execute(USAGE)).fetchone()
    except psycopg.Error as exc:
        if reader.broken:
            raise
        if exc.sqlstate not in ("42501", "42883"):  # not granted, no such function
            raise
        return False
    return row is not None and row["usage"] is not None and row["usage"] >= UNTRUSTED_FROM


class _Listener:
    """One LISTEN connection on `runlane_outputs` for every stream() of one event loop on
    one dsn. Each stream subscribes with its token and gets an asyncio.Event per hint
    (set on an output hint; `end` marks the end hint). When the connection breaks, every
    subscriber wakes and raises its error, and the next stream() opens a fresh one."""

    _open: dict[tuple[int, str], _Listener] = {}

    def __init__(self, dsn: str):
        self.dsn = dsn
        self.subscribers: dict[str | None, set[_Subscription]] = {}
        self.conn: psycopg.AsyncConnection[Any] | None = None
        self.task: asyncio.Task | None = None
        self.ready: asyncio.Future[None] | None = None
        self.error: BaseException | None = None
        # The NOTIFY queue as its streams last read it (runlane.notify_queue_usage): when,
        # and whether it was at least UNTRUSTED_FROM full.
        self.checked_at: float | None = None
        self.untrusted = False
        # Streams a hint named since the last read, read together (outputs_since_many) on
        # a connection of the listener's own; False once the schema or the login cannot.
        self.due: dict[_Subscription, bool] = {}
        self.reading: asyncio.Task | None = None
        self.reader: psycopg.AsyncConnection[dict[str, Any]] | None = None
        self.batch_reads = True

    @classmethod
    async def subscribe(cls, dsn: str, token: str | None) -> _Subscription:
        key = (id(asyncio.get_running_loop()), dsn)
        listener = cls._open.get(key)
        if listener is None or listener.error is not None:
            listener = cls._open[key] = cls(dsn)
            listener.ready = asyncio.get_running_loop().create_future()
            listener.task = asyncio.ensure_future(listener._listen(key))
        assert listener.ready is not None
        sub = _Subscription(listener, token)
        listener.subscribers.setdefault(token, set()).add(sub)
        try:
            await asyncio.shield(listener.ready)  # LISTEN is in effect from here on
        except BaseException:
            sub.close()
            raise
        return sub

    async def _listen(self, key: tuple[int, str]) -> None:
        assert self.ready is not None
        try:
            self.conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
            await self.conn.execute("LISTEN runlane_outputs")
            self.ready.set_result(None)
            async for note in self.conn.notifies():
                token, end = hints.stream_hint(note.payload)
                for sub in (*self.subscribers.get(token, ()), *self.subscribers.get(None, ())):
                    if not self.batch_reads or sub.run_id is None:
                        sub.wake(end)
                        continue
                    self.due[sub] = self.due.get(sub, False) or end
                    if self.reading is None:
                        self.reading = asyncio.ensure_future(self._read_due())
        except BaseException as exc:  # noqa: BLE001 - every subscriber raises it
            self.error = exc if isinstance(exc, Exception) else ConnectionError("closed")
            if not self.ready.done():
                self.ready.set_exception(self.error)
            for subs in self.subscribers.values():
                for sub in subs:
                    sub.wake(True)
            if not isinstance(exc, Exception):
                raise
        finally:
            if self._open.get(key) is self:
                del self._open[key]
            if self.reading is not None:
                self.reading.cancel()
            for conn in (self.conn, self.reader):
                if conn is not None:
                    with contextlib.suppress(psycopg.Error):
                        await conn.close()

    async def _read_due(self) -> None:
        """Reads the new outputs of every stream a hint named, in one call per burst of
        hints (the hints that arrive while a read is on the wire make the next), and
        hands each stream its rows; a stream whose read failed or filled the limit pages
        on its own."""
        await asyncio.sleep(0)  # the rest of this burst's hints first
        try:
            while self.due:
                due, self.due = self.due, {}
                rows: dict[int, list[dict[str, Any]]] | None = None
                try:
                    rows = await self._read_many(list(due))
                except psycopg.Error as exc:
                    if exc.sqlstate in ("42883", "42501"):  # an older schema, or not granted
                        self.batch_reads = False
                    if self.reader is not None and (self.reader.broken or self.reader.closed):
                        self.reader = None
                for sub, end in due.items():
                    got = None if rows is None else rows.get(sub.run_id or 0, [])
                    sub.wake(end, got, got is not None and len(got) >= MANY_LIMIT)
        finally:
            self.reading = None

    async def _read_many(self, subs: list[_Subscription]) -> dict[int, list[dict[str, Any]]]:
        if self.reader is None:
            self.reader = await psycopg.AsyncConnection.connect(
                self.dsn, autocommit=True, row_factory=dict_row
            )
        cur = await self.reader.execute(
            MANY,
            {
                "ids": [sub.run_id for sub in subs],
                "afters": [sub.last for sub in subs],
                "limit": MANY_LIMIT,
            },
        )
        rows: dict[int, list[dict[str, Any]]] = {}
        for row in await cur.fetchall():
            rows.setdefault(row["run_id"], []).append(row)
        return rows

    def unsubscribe(self, sub: _Subscription) -> None:
        subs = self.subscribers.get(sub.token)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self.subscribers[sub.token]
        if not self.subscribers and self.task is not None and not self.task.done():
            self.task.cancel()  # the last stream left: close the connection
            if self._open.get((id(asyncio.get_running_loop()), self.dsn)) is self:
                self.error = ConnectionError("closed")


class _Subscription:
    """One stream's hints: `wait` returns "output", "end" or "timeout"; after "output",
    `rows` holds what the listener read for it (None: page on your own), `full` whether
    that read stopped at its limit. `run_id` and `last` (the last output id yielded) are
    what the listener's reads ask for."""

    def __init__(self, listener: _Listener, token: str | None):
        self.listener = listener
        self.token = token
        self.event = asyncio.Event()
        self.end = False
        self.run_id: int | None = None
        self.last = 0
        self.rows: list[dict[str, Any]] | None = None
        self.full = False

    def wake(self, end: bool, rows: list[dict[str, Any]] | None = None, full: bool = False) -> None:
        self.end = self.end or end
        self.rows, self.full = rows, full
        self.event.set()

    async def wait(self, timeout: float) -> str:
        if not self.event.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):  # (no task per wait, unlike wait_for)
                    await self.event.wait()
        if self.listener.error is not None:
            raise self.listener.error
        if not self.event.is_set():
            return "timeout"
        self.event.clear()
        end, self.end = self.end, False
        return "end" if end else "output"

    def take_rows(self) -> tuple[list[dict[str, Any]] | None, bool]:
        rows, full, self.rows, self.full = self.rows, self.full, None, False
        return rows, full

    def close(self) -> None:
        self.listener.unsubscribe(self)


async def stream(
    dsn: str,
    run_id: int,
    after: int = 0,
    *,
    page_size: int = 500,
    poll: float = 1.0,
    events: bool = False,
) -> AsyncGenerator[dict[str, Any], None]:
    """Yield the run's visible outputs with output_id > `after`, in order, as they commit;
    end by the end-of-stream rule (see the module docstring). With `events`, also the
    "superseded" and "end" events. Raises psycopg errors as they are (RL008 for an
    unknown run)."""
    last = int(after)
    reader = await psycopg.AsyncConnection.connect(dsn, autocommit=True, row_factory=dict_row)
    try:

        async def one(query: str) -> dict[str, Any]:
            cur = await reader.execute(query, {"run_id": run_id})
            return one_row(await cur.fetchone())

        token = (await one(TOKEN))["token"]
        hints_of_run = await _Listener.subscribe(dsn, token)
        hints_of_run.run_id, hints_of_run.last = run_id, last
        try:
            checked_attempt: int | None = None
            reported = 0  # the superseded_through already announced
            pending: int | None = None
            attempts: set[int] = set()  # of yielded outputs not yet announced superseded
            with_status = True  # this pass reads run_status first (not after an output hint)

            def superseded(through: int) -> dict[str, Any]:
                nonlocal reported, attempts
                reported = through
                gone, attempts = attempts, set()
                return {
                    "event": "superseded",
                    "run_id": run_id,
                    "through": through,
                    "attempts": sorted(gone),
                }

            async def attempt_changed(attempt: int) -> None:
                nonlocal checked_attempt, pending
                checked_attempt = attempt
                through = (await one(SUPERSEDED))["through"]
                if through > reported:
                    pending = through

            status: dict[str, Any] | None = None
            while True:
                if with_status:
                    status = await one(STATUS)
                    if events and status["attempt"] != checked_attempt:
                        await attempt_changed(status["attempt"])
                # After an output hint the listener has usually read this stream's rows
                # already, with those of every stream the same commit announced.
                read, read_full = hints_of_run.take_rows()
                while True:
                    if read is not None and not with_status:
                        rows, full, read = read, read_full, None
                    else:
                        rows = await (
                            await reader.execute(
                                PAGE, {"run_id": run_id, "after": last, "limit": page_size}
                            )
                        ).fetchall()
                        full = len(rows) >= page_size
                    for row in rows:
                        if row["output_id"] <= last:
                            continue
                        if events and row["attempt"] != checked_attempt:
                            await attempt_changed(row["attempt"])  # a retry began
                        if pending is not None and row["output_id"] > pending:
                            yield superseded(pending)
                            pending = None
                        last = hints_of_run.last = row["output_id"]
                        if events:
                            attempts.add(row["attempt"])
                            yield {"event": "output", **row}
                        else:
                            yield row
                    if not full:
                        break
                if pending is not None:  # every output up to it was yielded above
                    yield superseded(pending)
                    pending = None
                if with_status and status is not None and ended(status, last):
                    if events:
                        yield {
                            "event": "end",
                            "run_id": run_id,
                            "state": status["state"],
                            "reason": status["reason"],
                            "attempt": status["attempt"],
                            "last_output_id": status["last_output_id"],
                            "superseded_through": reported,
                        }
                    return
                now = time.monotonic()
                shared = hints_of_run.listener  # one reading of the queue for its streams
                if shared.checked_at is None or now - shared.checked_at >= QUEUE_CHECK:
                    shared.checked_at = now
                    shared.untrusted = await _queue_untrusted(reader)
                untrusted = shared.untrusted
                # Wait for a hint about this run (or the poll interval), then page again.
                wait = min(poll, FAST_POLL) if untrusted else poll
                with_status = await hints_of_run.wait(wait) != "output"
        finally:
            hints_of_run.close()
    finally:
        with contextlib.suppress(psycopg.Error):
            await reader.close()
