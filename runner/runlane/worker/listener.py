"""The listener: one connection LISTENing on `runlane_runs`, fanning hints out.

Guarantees:
- one dedicated connection does nothing but LISTEN; its libpq handle is read from the
  socket's reader callback (no task switch per notification on the path to the claim);
- a readable payload wakes its lane (one more pass of that lane's dispatcher); a Stop
  hint ({"cancel": run_id, "lane": …}) is also handed to the supervisor, which asks the
  database before stopping anything; an unreadable or forged payload is counted and
  ignored (runlane.hints): the periodic scan finds the work anyway. Handling a payload
  never raises, so no notification behind it waits;
- after every (re)connect every lane is woken, so whatever was committed while nobody
  listened is scanned at once; a lost connection is retried at once, then with a short
  backoff (0.05 s doubling to 0.5 s) until stop(): the listener is the part that finds a
  promoted standby first (multi-host DSN), so it must not sleep through the promotion;
- a lost connection is reported (`lost`) as soon as the socket says so, before the
  retries: the worker's other connections to that server are presumed dead too (a
  failover, a restart), and the first (re)connect after it is reported (`back`): the
  server is reachable again, whatever waits out a backoff may try at once.
A notification is only ever a hint: every rule about which run may start is the
database's (claim_runs).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import pq

from .. import hints, log

CHANNEL = "runlane_runs"


def _as_bytes(payload: str | bytes) -> bytes:
    return payload if isinstance(payload, bytes) else payload.encode(errors="replace")


class Listener:
    """LISTENs for run hints and hands each to its lane (see the module's docstring)."""

    def __init__(
        self,
        dsn: str,
        conn_kwargs: dict[str, Any],
        worker_id: str,
        notify: Callable[[str | None], None],
        stop_hint: Callable[[int], None],
        lost: Callable[[], None] | None = None,
        back: Callable[[], None] | None = None,
    ):
        self.dsn = dsn
        self.conn_kwargs = conn_kwargs
        self.worker_id = worker_id
        self._notify = notify  # a lane (None: every lane) makes one more pass
        self._stop_hint = stop_hint  # a Stop may concern this run
        self._lost = lost  # the connection broke: the server may be gone (a failover)
        self._back = back  # connected again after a loss
        self.stopping = False

    def stop(self) -> None:
        """No reconnect from now on (the worker cancels the task it runs in)."""
        self.stopping = True

    async def run(self) -> None:
        """LISTENs until stop(), reconnecting at once after a loss, then with backoff
        (0.05 s doubling to 0.5 s) while the server stays away."""
        backoff, connected_before, lost = 0.0, False, False
        while not self.stopping:
            try:
                async with await psycopg.AsyncConnection.connect(
                    self.dsn, **self.conn_kwargs
                ) as conn:
                    await conn.execute(f"listen {CHANNEL}")
                    log.get().info(
                        "listener.reconnected" if connected_before else "listener.listening",
                        **{"worker.id": self.worker_id},
                    )
                    connected_before, backoff = True, 0.0
                    if lost and self._back is not None:
                        lost = False
                        self._back()
                    self._notify(None)  # every lane: scan whatever was missed meanwhile
                    await self._receive_notifications(conn.pgconn)
            except psycopg.Error as exc:
                log.get().warning("listener.lost", **log.error_fields(exc))
                if not lost and self._lost is not None:
                    lost = True
                    self._lost()
                if backoff:
                    await asyncio.sleep(backoff)
                backoff = min(max(backoff * 2, 0.05), 0.5)

    async def _receive_notifications(self, pgconn: Any) -> None:
        """Hands every notification to its lane from the socket's reader callback, until
        the connection breaks (raised). The connection does nothing but LISTEN, so its
        libpq handle is read directly: psycopg's notifies() costs a task switch and a
        re-armed wait per notification, about 0.1 ms on the path to the claim."""
        loop = asyncio.get_running_loop()
        lost: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            try:
                pgconn.consume_input()
                while (notification := pgconn.notifies()) is not None:
                    self._on_notify(notification.extra)
                if pgconn.status != pq.ConnStatus.OK:  # never spin on a dead socket
                    raise psycopg.OperationalError("the listening connection is gone")
            except psycopg.Error as exc:
                if not lost.done():
                    lost.set_exception(exc)

        fd = pgconn.socket
        loop.add_reader(fd, readable)
        try:
            readable()  # what arrived with the LISTEN reply
            await lost
        finally:
            loop.remove_reader(fd)

    def _on_notify(self, payload: str | bytes) -> None:
        """A `runlane_runs` payload is an untrusted hint (runlane.hints): a readable one
        wakes its lane, an unreadable or forged one is counted and ignored (the periodic
        scan finds the work anyway). Never raises, so no notification behind it waits."""
        lane = hints.lane_of(payload)
        if lane is not None:
            self._notify(lane)
            stopped = hints.stop_of(payload) if b"cancel" in _as_bytes(payload) else None
            if stopped is not None:
                self._stop_hint(stopped)
