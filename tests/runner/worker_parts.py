"""In-process helpers for the tests of one part of the worker (runlane.worker.*) at a
time, against the test's real PostgreSQL database: nothing here stands in for it."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterable
from datetime import timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from runlane.agents.echo import agent
from runlane.worker.config import WorkerConfig
from runlane.worker.db import Database
from runlane.worker.dispatcher import CLAIM_SESSION

# The reporting claim form the worker sends (six arguments), for runs claimed by a test.
CLAIM_ROWS = """
select * from runlane.claim_runs(
    p_worker => %(worker)s::text, p_lanes => array[%(lane)s::text], p_limit => %(limit)s::int,
    p_lease => interval '60 seconds', p_claim_key => null::uuid, p_report_skipped => true)
"""


def queue_chat_runs(conn: psycopg.Connection, org: str, agent: str, runs: int) -> list[int]:
    """`runs` queued chat runs of a new agent in a new organization (cap 1000), each on its
    own thread, inserted at once; their ids, oldest first."""
    conn.execute("select runlane_test.org(%s, 1000)", (org,))
    conn.execute("select runlane_test.agent(%s, %s)", (agent, org))
    return [
        r[0]
        for r in conn.execute(
            "select runlane_test.chat_backlog(%s, %s, %s)", (agent, runs, f"{agent}-")
        ).fetchall()
    ]


def worker_claim(
    worker: str, lane: str = "interactive", limit: int = 10, key: uuid.UUID | None = None
) -> dict[str, Any]:
    """The parameters of the worker's keyed claim (dispatcher.CLAIM) of up to `limit` runs
    of one lane and handler 'default', with a lease of 60 s, under `key` (a new one unless
    given)."""
    return {
        "worker": worker,
        "lanes": [lane],
        "limit": limit,
        "lease": timedelta(seconds=60),
        "claim_key": key or uuid.uuid4(),
        "handlers": ["default"],
    }


def claim_connection(dsn: str, durable: bool = False) -> psycopg.Connection:
    """A claim connection as the worker opens it: autocommit, its session set up
    (dispatcher.CLAIM_SESSION, bound 200). durable: its commits wait for their flush (the
    test cluster runs with synchronous_commit off)."""
    conn = psycopg.connect(dsn, autocommit=True)
    if durable:
        conn.execute("set synchronous_commit = on")
    conn.execute(CLAIM_SESSION, {"bound": "200"})
    return conn


def config(dsn: str, **options: Any) -> WorkerConfig:
    """A worker's settings for one lane, without maintenance (no leader to elect)."""
    options = {"lanes": ["interactive"], "agent": agent, "maintenance": None, **options}
    return WorkerConfig(dsn=dsn, **options)


class RecordingDatabase(Database):
    """The worker's Database, keeping a note of every statement it is asked to send (each
    still goes to PostgreSQL, and fails or succeeds there)."""

    def __init__(self, worker_config: WorkerConfig):
        super().__init__(worker_config)
        self.sent: list[tuple[str, str, Any]] = []  # (lane, sql, params)

    async def call(
        self,
        lane: str,
        sql: str,
        params: dict[str, Any] | None = None,
        fetch: str = "one",
        retries: int | None = None,
        orgs: Iterable[str] = (),
    ) -> Any:
        self.sent.append((lane, sql, params))
        return await super().call(lane, sql, params, fetch, retries, orgs)

    def count(self, sql: str) -> int:
        return sum(1 for _, sent, _ in self.sent if sent == sql)


@contextlib.asynccontextmanager
async def database(dsn: str, **options: Any) -> AsyncIterator[RecordingDatabase]:
    """The worker's Database, open, with the schema check done (numbered writes on)."""
    db = RecordingDatabase(config(dsn, **options))
    await db.open()
    try:
        await db.check_write_seqs()
        db.sent.clear()  # what the test's part sends, from here on
        yield db
    finally:
        await db.close()


def claim(
    conn: psycopg.Connection, lane: str = "interactive", limit: int = 10, worker: str = "w-test"
) -> list[dict[str, Any]]:
    """Claim rows as claim_runs returns them to a worker."""
    with conn.cursor(row_factory=dict_row) as cur:
        cur.execute(CLAIM_ROWS, {"worker": worker, "lane": lane, "limit": limit})
        return cur.fetchall()


class Timings:
    """The `timing` callback the parts are given: keeps every (event, row) it is handed."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def __call__(self, event: str, row: Any, **extra: Any) -> None:
        self.seen.append((event, row))

    def events(self) -> list[str]:
        return [event for event, _ in self.seen]
