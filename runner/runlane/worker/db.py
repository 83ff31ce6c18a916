"""How the worker's statements reach PostgreSQL: one connection pool per lane, and when a
statement is sent again.

Guarantees:
- one pool per lane, so background work never holds a connection chat work waits for;
  connections are autocommit and named `runlane-worker:<id>` (application_name);
- `call()` runs one statement in its own transaction and resends it only when the server
  cannot have applied it: the connection broke (class 08, no SQLSTATE, a terminated
  session) or the transaction was rolled back to break a deadlock, a serialization
  conflict or a lock_timeout (`is_resendable`). By default it keeps resending, with
  backoff, for up to half a lease; `retries=0` is for callers with their own schedule;
- after the listener lost its connection (`connection_lost`: a failover or a restart),
  a backoff between resends ends as soon as the listener is connected again
  (`connection_back`, `pause`), and every lane pool is replaced then by a fresh one:
  the old pool's idle connections lead to the dead server, and its own reconnect
  attempts back off for seconds (psycopg_pool: 1 s doubling), so a run's write would
  wait for them; statements running on the old pool finish there, whoever waits for
  one of its connections is turned away (PoolClosed) and resends on the new pool;
- a lane's statements take turns for its connections (FairGate, fair_gate.py): while
  every connection is busy, waiters are served round robin across the organizations of
  the runs they write for, so one organization's burst in flight never queues another's
  writes behind its own (memory admission, not a run count, limits what a worker takes);
  a statement waiting out a backoff before its resend holds no turn;
- `write_seqs` says whether the schema numbers writes and keys claims (migration 0004).
  Writes that carry a number are applied once even when resent; without it the worker
  sends NULL numbers and keys (the same calls, not deduplicated).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable, Iterable
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import set_json_loads
from psycopg_pool import AsyncConnectionPool

from .. import log
from ..eventloop import wait_event
from .config import WorkerConfig
from .fair_gate import FairGate

# Write sequence numbers and claim keys need migration 0004 (runs.write_seq,
# claim_receipts). Against an older schema (a rolling upgrade still at the expand step)
# the worker passes NULL numbers and keys: the same calls, not deduplicated.
# Whether Citus holds runlane.runs (runlane migrate --citus): its catalog exists only where
# Citus is installed, so it is asked for first.
HAS_CITUS = "select to_regclass('pg_catalog.pg_dist_partition') is not null as citus"
# Where it does: whether this server stores shards of runs (a worker node), the
# organizations a worker connected here claims.
RUNS_DISTRIBUTED = """
select
    exists (
        select 1 from pg_catalog.pg_dist_partition where logicalrelid = 'runlane.runs'::regclass
    ) as distributed,
    exists (
        select 1
        from pg_catalog.pg_dist_shard as s
        inner join pg_catalog.pg_dist_placement as p on p.shardid = s.shardid
        where s.logicalrelid = 'runlane.runs'::regclass
          and p.groupid = (select g.groupid from pg_catalog.pg_dist_local_group as g)
    ) as stores_runs
"""
# On a distributed schema each call names the organization of the runs it is for (one;
# '' for none or several), so that a fenced write runs on that organization's node alone
# (runlane._run_org_for_write). Sent in the call's pipeline, before it.
NAME_ORG = "select set_config('runlane.org_id', %(org)s::text, false)"


def by_organization(items: list[Any], org_of: Callable[[Any], str]) -> list[list[Any]]:
    """`items` grouped by organization, each group in the order given: on a distributed
    schema a batch call goes once per organization, each naming its own (NAME_ORG), so
    that it runs on that organization's node."""
    groups: dict[str, list[Any]] = {}
    for item in items:
        groups.setdefault(org_of(item), []).append(item)
    return list(groups.values())


class DistributedSchema(RuntimeError):
    """A distributed schema's server that stores no organization's runs (a coordinator):
    a worker there would claim nothing. Refuse to start, naming where to connect."""


WRITE_SEQS = """
select exists (
    select 1 from pg_catalog.pg_attribute
    where attrelid = 'runlane.runs'::regclass and attname = 'write_seq' and not attisdropped
) as ok
"""

# SQLSTATEs after which the same statement may be sent again on a fresh connection:
# the connection broke (class 08, or no SQLSTATE at all) or the server ended the session.
_RECONNECT_STATES = {"57P01", "57P02", "57P03"}
# SQLSTATEs of a transaction the server rolled back to break a conflict, or because a
# runlane function gave up waiting for a lock after its lock_timeout (55P03).
_ROLLED_BACK_STATES = {"40001", "40P01", "55P03"}


_decode_json = json.JSONDecoder().decode


def json_from_utf8(data: bytes) -> Any:
    """What json.loads makes of the server's bytes (read as UTF-8, as json.loads reads
    them), without first sniffing their encoding: that was a fifth of decoding the two
    timing rows each run brings back."""
    return _decode_json(data.decode("utf-8", "surrogatepass"))


def configure_connection(conn: psycopg.AsyncConnection[Any]) -> None:
    """A worker connection's json and jsonb values decoded by json_from_utf8."""
    # psycopg's JSON loaders pass bytes (they copy a memoryview first); its type says str | bytes.
    set_json_loads(json_from_utf8, conn)  # type: ignore[arg-type]


async def _configure_pooled(conn: psycopg.AsyncConnection) -> None:
    configure_connection(conn)


def pg_array(values: list[Any]) -> str:
    """An array literal for a `%s::type[]` parameter: psycopg adapts long lists element
    by element in Python (a regex per text element); this is string joins in C."""
    if all(type(v) is int for v in values):  # ids, fences, counts: no quoting to decide
        return "{" + ",".join(map(str, values)) + "}"
    parts = []
    for v in values:
        if v is None:
            parts.append("NULL")
        elif isinstance(v, str):
            parts.append('"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"')
        elif isinstance(v, float):  # as PostgreSQL turns a float8 into numeric: 15 digits
            parts.append(format(v, ".15g"))
        else:
            parts.append(str(v))
    return "{" + ",".join(parts) + "}"


def is_connection_error(exc: BaseException) -> bool:
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in _RECONNECT_STATES


def is_resendable(exc: BaseException) -> bool:
    """The statement's whole transaction was rolled back without effect, so sending it
    again is safe: a broken connection, or a deadlock / serialization failure (one of
    two finish batches sharing a thread is chosen as the deadlock victim)."""
    return is_connection_error(exc) or (
        isinstance(exc, psycopg.Error) and exc.sqlstate in _ROLLED_BACK_STATES
    )


class Database:
    """The worker's lane pools and its resend rule (see the module's docstring)."""

    def __init__(self, config: WorkerConfig):
        self.config = config
        # One pool per lane: background work never holds a connection chat work waits for.
        # No ping before each use (it doubled the round trips): a broken connection fails
        # its statement, the pool drops it and call() resends on a fresh one.
        self.conn_kwargs: dict[str, Any] = {
            "autocommit": True,
            "application_name": config.application_name,
        }
        if config.scan_only:
            # Scan-only serves where LISTEN cannot work, a transaction-pooled PgBouncer
            # above all, which before 1.21 loses server-side prepared statements too.
            self.conn_kwargs["prepare_threshold"] = None
        self.pools = {lane: self._pool(lane) for lane in config.lanes}
        # Turns for each lane's connections, organizations round robin (fair_gate.py);
        # kept when a pool is renewed.
        self.gates = {lane: FairGate(config.pool_size) for lane in config.lanes}
        self.write_seqs = False  # migration 0004 applied: numbered writes, keyed claims
        self.distributed = False  # Citus holds runs: each call names its organization
        # Set while the listener's connection is up; a fresh, unset event after it broke,
        # set again when it reconnects (see pause()).
        self.reachable = asyncio.Event()
        self.reachable.set()
        self._renewals: set[asyncio.Task] = set()

    def connection_lost(self) -> None:
        """The listener's connection broke: the server may be gone (a failover, a
        restart); backoffs from now on end as soon as it is back (pause())."""
        if self.reachable.is_set():
            self.reachable = asyncio.Event()

    def _pool(self, lane: str) -> AsyncConnectionPool:
        return AsyncConnectionPool(
            self.config.dsn,
            min_size=1,
            max_size=self.config.pool_size,
            open=False,
            kwargs=self.conn_kwargs,
            configure=_configure_pooled,
            name=f"runlane-{lane}",
        )

    def connection_back(self) -> None:
        """The listener is connected again after a loss: whoever waits out a backoff
        tries at once, and every lane pool is replaced by a fresh one (see the module's
        docstring: the old one's connections lead to the dead server and its own
        reconnects back off for seconds)."""
        self.reachable.set()
        for lane in list(self.pools):
            task = asyncio.create_task(self._renew(lane))
            self._renewals.add(task)
            task.add_done_callback(self._renewals.discard)

    async def _renew(self, lane: str) -> None:
        fresh = self._pool(lane)
        try:
            await fresh.open(wait=False)
        except BaseException:
            await fresh.close()
            raise
        old, self.pools[lane] = self.pools[lane], fresh
        log.get().info("worker.pool_renewed", **{"run.lane": lane})
        try:
            await old.close(timeout=5.0)
        except Exception as exc:  # noqa: BLE001 - the old pool is gone either way
            log.get().warning("worker.pool_close_failed", **log.error_fields(exc))

    async def pause(self, seconds: float) -> None:
        """Sleep `seconds` before a resend; cut short when the listener reconnects after
        a loss (the server is back: a promoted standby, a restarted primary)."""
        event = self.reachable
        if event.is_set():
            await asyncio.sleep(seconds)
        else:
            await wait_event(event, seconds)

    async def open(self) -> None:
        for pool in self.pools.values():
            await pool.open(wait=False)

    async def close(self) -> None:
        for task in list(self._renewals):
            task.cancel()
        for pool in self.pools.values():
            await pool.close()

    async def call(
        self,
        lane: str,
        sql: str,
        params: dict[str, Any] | None = None,
        fetch: str = "one",
        retries: int | None = None,
        orgs: Iterable[str] = (),
    ) -> Any:
        """One statement in its own transaction; resent when the connection itself broke
        (on a fresh one: the pool drops broken connections) or the server rolled the
        transaction back to break a deadlock or a serialization conflict. `orgs`: the
        organizations of the runs it is for (none: the worker's own), whose turn it
        waits for while the lane's connections are busy (FairGate).

        By default it keeps resending, with backoff, for up to half a lease: a server
        restart or a terminated backend then costs a pause, not a failed attempt or an
        abandoned run, and the run's heartbeat keeps the lease meanwhile. `retries=0`
        is for callers that try again on their own schedule (claims, heartbeats)."""
        deadline = time.monotonic() + (self.config.lease / 2 if retries is None else 0)
        backoff = 0.1
        gate = self.gates[lane]
        for attempt in itertools.count():
            if not gate.take():  # (take: no coroutine on the common path)
                await gate.wait(orgs)
            try:
                try:
                    async with self.pools[lane].connection() as conn:
                        cur = conn.cursor(row_factory=dict_row)
                        if self.distributed:
                            named = set(orgs)
                            async with conn.pipeline():
                                await conn.execute(
                                    NAME_ORG, {"org": named.pop() if len(named) == 1 else ""}
                                )
                                await cur.execute(sql, params)
                        else:
                            await cur.execute(sql, params)
                        if fetch == "one":
                            return await cur.fetchone()
                        if fetch == "all":
                            return await cur.fetchall()
                        return None
                finally:
                    gate.release()  # before any backoff: a pause holds no turn
            except psycopg.Error as exc:
                if not is_resendable(exc):
                    raise
                if retries is not None:
                    if attempt >= retries:
                        raise
                elif time.monotonic() + backoff > deadline:
                    raise
                await self.pause(backoff)
                backoff = min(backoff * 2, 1.0)
        raise AssertionError("unreachable")

    async def check_distributed_schema(self) -> None:
        """Where Citus holds runlane.runs, the worker claims the organizations of the node
        it is connected to, and each call names its organization (NAME_ORG). Raises
        DistributedSchema on a server that stores none (a coordinator without shards):
        every claim there would fail, so it says why once instead."""
        lane = self.config.lanes[0]
        try:
            if not (await self.call(lane, HAS_CITUS, retries=0))["citus"]:
                return
            found = await self.call(lane, RUNS_DISTRIBUTED, retries=0)
        except psycopg.Error as exc:  # (out of reach: the claims will say so)
            log.get().warning("worker.schema_check_failed", **log.error_fields(exc))
            return
        if not found["distributed"]:
            return
        if not found["stores_runs"]:
            raise DistributedSchema(
                "this database's runlane schema is distributed by Citus (runlane migrate "
                "--citus) and this server stores no organization's runs: connect the "
                "worker to a worker node; each node's workers claim the organizations it "
                "holds (docs/scaling.md, Sharding by organization on Citus)"
            )
        self.distributed = True

    async def check_write_seqs(self) -> None:
        """Whether the schema has migration 0004 (asked at startup and, until it has, with
        every registry refresh: a rolling upgrade may apply it while this worker runs)."""
        try:
            row = await self.call(self.config.lanes[0], WRITE_SEQS, retries=0)
            self.write_seqs = bool(row and row["ok"])
        except psycopg.Error as exc:
            log.get().warning("worker.schema_check_failed", **log.error_fields(exc))
