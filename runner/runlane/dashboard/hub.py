"""One LISTEN connection per dashboard process, fanned out to every browser watching.

The hub holds the only listener (channels runlane_runs and runlane_outputs) and the only
periodic reads: while at least one browser watches the overview it reads lane_overview
(lane_status and queue_delay_status in one read of the queue) at most once per `tick`
(1 s) and at once after a run hint, and lane_minutes and failure_minutes at most once per
`minutes_every` (then with lane_overview, in one snapshot, so that lane_minutes takes
its queued counts and the queue is counted once); while browsers watch runs it reads
their run_status in one statement per tick, and at once after a finish hint for a
watched run (a claim sends none: a start is seen within a tick). However many browsers
watch, the database sees one listener and these few reads, and never more than a fifth
of the time (a round is followed by four times its own duration of rest: with a very
long queue, updates slow down instead of the reads piling up). Each watcher waits on a
version number that the hub raises when what it shows may have changed; an output hint
({"stream": token}) raises the version of the run whose stream token it names. Payloads
are untrusted hints (runlane.hints): an unreadable or forged one is counted and ignored,
and a forged one at most makes a watcher page once more (outputs_since shows only what
is there).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from .. import eventloop, hints, log
from . import queries

REST = 4.0  # a refresh round is followed by at least REST times its own duration of rest
LANE_FIELDS = ("lane", "queued", "due", "running", "oldest_due_wait_ms")


def overview_of(rows: list[dict[str, Any]], threshold: timedelta) -> dict[str, Any]:
    """lane_overview's rows as the overview shows them: lane_status's rows and
    queue_delay_status's one (the lanes' delayed runs summed, the longest wait of any)."""
    waits = [r["oldest_delayed_wait_ms"] for r in rows if r["oldest_delayed_wait_ms"] is not None]
    return {
        "lanes": [{k: r[k] for k in LANE_FIELDS} for r in rows],
        "delay": {
            "delayed_runs": sum(r["delayed_runs"] for r in rows),
            "oldest_wait_ms": max(waits) if waits else None,
            "threshold_ms": threshold // timedelta(milliseconds=1),
        },
    }


@dataclass
class Topic:
    """Something browsers watch: a version raised on each possible change."""

    version: int = 0
    watchers: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def bump(self) -> None:
        self.version += 1
        self.changed.set()
        self.changed = asyncio.Event()

    async def wait(self, seen: int, timeout: float) -> bool:
        """Until the version passes `seen` (True) or `timeout` seconds pass (False)."""
        if self.version != seen:
            return True
        await eventloop.wait_event(self.changed, timeout)
        return self.version != seen


@dataclass
class RunTopic(Topic):
    token: str | None = None
    status: dict[str, Any] | None = None


class Hub:
    def __init__(
        self,
        dsn: str,
        pool: AsyncConnectionPool,
        *,
        tick: float = 1.0,
        minutes_every: float = 15.0,
        threshold: timedelta = timedelta(seconds=30),
    ):
        self.dsn, self.pool, self.tick = dsn, pool, tick
        self.minutes_every, self.threshold = minutes_every, threshold
        self.overview = Topic()
        self.snapshot: dict[str, Any] | None = None
        self.minutes: list[dict[str, Any]] | None = None
        self.failures: list[dict[str, Any]] | None = None
        self.minutes_version = 0
        self._minutes_at = float("-inf")
        self.runs: dict[int, RunTopic] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self.listening = asyncio.Event()  # set while the LISTEN connection is up

    # -- reads, through the pool --------------------------------------------------------
    async def rows(self, sql: str, params: dict | None = None) -> list[dict[str, Any]]:
        async with self.pool.connection() as conn:
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(sql, params or {})
            return await cur.fetchall()

    async def read_overview(self) -> dict[str, Any]:
        return overview_of(
            await self.rows(queries.OVERVIEW, {"threshold": self.threshold}), self.threshold
        )

    async def read_all(self) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
        """The overview, lane_minutes and failure_minutes in one snapshot (a read-only
        repeatable-read transaction): lane_minutes takes lane_overview's queued counts
        instead of counting the queue again, which holds only within one snapshot."""
        since = timedelta(hours=1)
        async with self.pool.connection() as conn, conn.transaction():
            await conn.execute("set transaction isolation level repeatable read, read only")
            cur = conn.cursor(row_factory=dict_row)
            await cur.execute(queries.OVERVIEW, {"threshold": self.threshold})
            lanes = await cur.fetchall()
            queued = {r["lane"]: r["queued"] for r in lanes}
            await cur.execute(
                queries.MINUTES,
                {"since": since, "queued": [queued["interactive"], queued["background"]]},
            )
            minutes = await cur.fetchall()
            await cur.execute(queries.FAILURES, {"since": since})
            failures = await cur.fetchall()
        return overview_of(lanes, self.threshold), minutes, failures

    # -- watching -----------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def watch_overview(self):
        self.overview.watchers += 1
        self._wake.set()
        try:
            yield self.overview
        finally:
            self.overview.watchers -= 1

    @contextlib.asynccontextmanager
    async def watch_run(self, run_id: int):
        topic = self.runs.get(run_id)
        if topic is None:
            topic = RunTopic()
            token = (await self.rows(queries.STREAM_TOKEN, {"run": run_id}))[0]["token"]
            topic = self.runs.setdefault(run_id, topic)
            topic.token = token
        topic.watchers += 1
        try:
            yield topic
        finally:
            topic.watchers -= 1
            if topic.watchers == 0 and self.runs.get(run_id) is topic:
                del self.runs[run_id]

    # -- the loop -----------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="dashboard-hub")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        refresher = asyncio.create_task(self._refresh_loop())
        try:
            while True:
                try:
                    await self._listen()
                except (psycopg.Error, OSError) as exc:
                    self.listening.clear()
                    log.get().warning("dashboard.listen_failed", **log.error_fields(exc))
                    await asyncio.sleep(1.0)
        finally:
            refresher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await refresher

    async def _listen(self) -> None:
        conn = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        try:
            await conn.execute(f"LISTEN {hints.RUNS}")
            await conn.execute(f"LISTEN {hints.OUTPUTS}")
            self.listening.set()
            self._wake.set()  # read once now: anything before the LISTEN is seen
            async for note in conn.notifies():
                self._hint(note.channel, note.payload)
        finally:
            self.listening.clear()
            with contextlib.suppress(psycopg.Error):
                await conn.close()

    def _hint(self, channel: str, payload: str) -> None:
        if channel == hints.OUTPUTS:
            token, end = hints.stream_hint(payload)
            if token is None:
                return
            watched = False
            for topic in self.runs.values():
                if topic.token is None or topic.token == token:
                    topic.bump()  # its watchers page outputs_since once more
                    watched = watched or bool(topic.watchers)
            if watched and end:
                self._wake.set()  # a watched run finished: read its status now
        elif channel == hints.RUNS and hints.lane_of(payload) is not None:
            self._wake.set()  # a run was published or stopped: read now, not in a tick

    async def _refresh_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await eventloop.wait_event(self._wake, self.tick)
            self._wake.clear()
            started = loop.time()
            try:
                await self.refresh()
            except psycopg.Error as exc:
                log.get().warning("dashboard.refresh_failed", **log.error_fields(exc))
            # GUARD: at most 1 / (1 + REST) of the time reading: a round that took 100 ms
            # (a queue of 100,000 runs) waits 400 ms more before the next, hints or not.
            await asyncio.sleep(REST * (loop.time() - started))

    async def refresh(self) -> None:
        """One round of the periodic reads, only for what someone watches."""
        loop = asyncio.get_running_loop()
        if self.overview.watchers:
            if loop.time() - self._minutes_at >= self.minutes_every:
                self._minutes_at = loop.time()
                snapshot, minutes, failures = await self.read_all()
                changed = snapshot != self.snapshot
                if minutes != self.minutes or failures != self.failures:
                    self.minutes, self.failures = minutes, failures
                    self.minutes_version += 1
                    changed = True
            else:
                snapshot = await self.read_overview()
                changed = snapshot != self.snapshot
            self.snapshot = snapshot  # after the minutes: a first event carries both
            if changed:
                self.overview.bump()
        watched = [run_id for run_id, topic in self.runs.items() if topic.watchers]
        if watched:
            for status in await self._statuses(watched):
                topic = self.runs.get(status["run_id"])
                if topic is not None and status != topic.status:
                    topic.status = status
                    topic.bump()

    async def _statuses(self, run_ids: list[int]) -> list[dict[str, Any]]:
        try:
            return await self.rows(queries.WATCHED, {"runs": run_ids})
        except psycopg.Error as exc:
            if exc.sqlstate != "RL008":
                raise
            # one of them is gone (purged): read them one by one, skip the missing
            found = []
            for run_id in run_ids:
                try:
                    found += await self.rows(queries.RUN_STATUS, {"run": run_id})
                except psycopg.Error as missing:
                    if missing.sqlstate != "RL008":
                        raise
            return found
