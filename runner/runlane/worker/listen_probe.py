"""The startup proof that the worker's LISTEN works on its connection string.

A transaction- (or statement-) pooled PgBouncer runs each transaction on whichever server
session is free: the listener's LISTEN is made on one server session, which goes back to
the pool when the statement ends, and nothing is ever forwarded to the idle listening
client. A worker behind it would wait for notifications that never come and dispatch
only on its periodic scan (seconds instead of milliseconds; a Stop only at the next
heartbeat), without a word. So before it starts, the worker proves LISTEN works:

- a connection made exactly as the listener makes its own (same DSN, same settings)
  LISTENs on a private random channel, then waits for notifications on it;
- from another connection, a lane pool's (as runlane's notifications come from other
  sessions), NOTIFYs with a random payload are sent on that channel every RESEND_EVERY
  seconds, each in its own transaction (autocommit);
- the proof holds when one of them arrives on the listening connection. A direct
  connection or a session-pooled PgBouncer delivers the first within milliseconds. A
  transaction-pooled one cannot deliver any, however long it is given: the listening
  client sends nothing after its LISTEN, so it is linked to no server session. When
  none arrived `timeout` seconds (PROBE_TIMEOUT) after the first NOTIFY committed (the
  clock starts there: a slow pool cannot fake a failure), the worker refuses to start
  (ListenUnavailable; `runlane worker --scan-only` skips the proof and runs without
  LISTEN, see scan_mode.py). This is not a guess from settings or names: it is the very
  thing the listener needs, done once.

A connection that cannot be made or breaks (or any other error of the LISTEN) is retried
with backoff, as the listener retries (a worker may start before its database), until
the caller stops waiting. A NOTIFY the server refuses (a
full notification queue) proves nothing either way: `worker.listen_unproven` is logged
and the worker starts, as it did before this check.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool

from .. import log
from .db import is_connection_error

PROBE_TIMEOUT = 10.0  # seconds a notification may take on a connection that works
RESEND_EVERY = 0.5
DOCS = "docs/operations.md#pgbouncer"


class ListenUnavailable(RuntimeError):
    """LISTEN cannot work on the worker's connection string: refuse to start."""


def where(dsn: str) -> str:
    """host:port/dbname of a DSN, for a message (never its password)."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "the --dsn"
    return (
        f"{parts.get('host') or 'localhost'}:{parts.get('port') or 5432}"
        f"/{parts.get('dbname') or ''}"
    )


def refusal(dsn: str, timeout: float) -> str:
    return (
        f"LISTEN does not work on {where(dsn)}: a notification sent on a private "
        f"channel did not reach the listening connection within {timeout:g} s. A "
        "transaction- or statement-pooled PgBouncer does this (it hands each "
        "transaction to any server connection, so a LISTEN outlives nothing). "
        "Connect workers to PostgreSQL directly or through a session-pooled PgBouncer "
        "(pool_mode = session); applications may use transaction pooling. To run this "
        f"worker on its scan alone, start it with --scan-only. See {DOCS}."
    )


async def _send_until(
    pool: AsyncConnectionPool,
    channel: str,
    payload: str,
    sent: asyncio.Event,
    refused: asyncio.Future[psycopg.Error],
) -> None:
    """NOTIFY channel every RESEND_EVERY seconds until cancelled, setting `sent` once one
    committed; a refusal by the server (not a broken connection, which is retried) is
    handed to `refused` and ends the sending."""
    while True:
        try:
            async with pool.connection() as conn:
                # prepare=False: never a server-side prepared statement, whatever pools
                # the connection (a transaction-pooled bouncer loses them).
                await conn.execute(
                    "select pg_catalog.pg_notify(%s, %s)", (channel, payload), prepare=False
                )
            sent.set()
        except psycopg.Error as exc:
            if not is_connection_error(exc):
                if not refused.done():
                    refused.set_result(exc)
                return
        await asyncio.sleep(RESEND_EVERY)


async def _prove_once(
    dsn: str, conn_kwargs: dict[str, Any], pool: AsyncConnectionPool, timeout: float
) -> bool | None:
    """True: a notification arrived; False: none did within `timeout` of the first NOTIFY
    that committed; None: the server refused the NOTIFY (no proof either way). Errors of
    the listening connection are raised."""
    channel = f"runlane_probe_{secrets.token_hex(8)}"
    payload = secrets.token_hex(8)
    async with await psycopg.AsyncConnection.connect(dsn, **conn_kwargs) as conn:
        await conn.execute(f"listen {channel}")
        sent = asyncio.Event()
        refused: asyncio.Future[psycopg.Error] = asyncio.get_running_loop().create_future()
        sender = asyncio.create_task(_send_until(pool, channel, payload, sent, refused))
        try:
            deadline = None  # counted from the first NOTIFY that committed
            while deadline is None or time.monotonic() < deadline:
                async with contextlib.aclosing(conn.notifies(timeout=RESEND_EVERY)) as notes:
                    async for note in notes:
                        if note.channel == channel and note.payload == payload:
                            return True
                if refused.done():
                    log.get().warning(
                        "worker.listen_unproven", **log.error_fields(refused.result())
                    )
                    return None
                if deadline is None and sent.is_set():
                    deadline = time.monotonic() + timeout
            return False
        finally:
            sender.cancel()
            await asyncio.gather(sender, return_exceptions=True)


async def prove_listen(
    dsn: str,
    conn_kwargs: dict[str, Any],
    pool: AsyncConnectionPool,
    worker_id: str,
    timeout: float = PROBE_TIMEOUT,
) -> None:
    """Returns once LISTEN is proven to work on `dsn` (or the proof was impossible: a
    refused NOTIFY); raises ListenUnavailable when a notification never arrived. Retries
    other errors with backoff (0.1 s doubling to 5 s) for as long as it is awaited."""
    backoff = 0.1
    log.get().info("worker.listen_checking", **{"worker.id": worker_id})
    while True:
        started = time.monotonic()
        try:
            proven = await _prove_once(dsn, conn_kwargs, pool, timeout)
        except psycopg.Error as exc:  # as the listener would: retried, never fatal
            log.get().warning("worker.listen_check_retry", **log.error_fields(exc))
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 5.0)
            continue
        if proven is False:
            log.get().error(
                "worker.listen_refused", **{"worker.id": worker_id, "listen.timeout_s": timeout}
            )
            raise ListenUnavailable(refusal(dsn, timeout))
        if proven:
            log.get().info(
                "worker.listen_proven",
                **{
                    "worker.id": worker_id,
                    "listen.proof_ms": round((time.monotonic() - started) * 1000, 1),
                },
            )
        return
