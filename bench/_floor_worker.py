"""The wake-latency floor: a bare worker on a one-table queue (bench/durable_compare.py).

It LISTENs on channel `floor`; on each notification it claims one row with a single
UPDATE ... FOR UPDATE SKIP LOCKED ... RETURNING (one statement, its own commit), then
starts its handler, which appends "id time.time()" to FILE (claiming again until the
queue is empty, so notifications that arrive together lose no row).

With --with-writes it is the floor of a claim that keeps runlane's guarantees: the same
single statement, on tables of its own (WRITES_TABLES), also makes the writes a durable,
fenced, idempotent claim must make: a fence and a lease on the claimed row, a run.claimed
journal row, the claim's receipt under a key of its own. Nothing else: no fairness, caps,
bound, gates, computer leases or timing rows. (The claim ladder of bench/wake_hops.py
runs the same statement.)

    python -m bench._floor_worker DSN FILE [--with-writes]
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid

import asyncpg

# The bare floor's queue (the publisher inserts a row and notifies `floor`).
TABLE = """
create table floor_queue (
    id bigserial primary key, payload text, taken boolean not null default false)
"""

# The oldest row nobody holds, locked: the claim's one read, on either floor's queue.
_NEXT_ROW = """(
    select f.id from {queue} as f
    where not f.taken
    order by f.id
    limit 1
    for update skip locked
)"""

CLAIM = f"""
update floor_queue as q
set taken = true
where q.id = {_NEXT_ROW.format(queue="floor_queue")}
returning q.id
"""


# The tables of the floor --with-writes claims from (the publisher inserts into
# floor_writes_queue and notifies `floor`).
WRITES_TABLES = """
create table floor_writes_queue (
    id bigserial primary key, taken boolean not null default false,
    fence bigint not null default 0, owner text, lease_until timestamptz);
create table floor_writes_journal (
    id bigserial primary key, queue_id bigint not null references floor_writes_queue,
    event text not null, detail jsonb not null, at timestamptz not null default now());
create table floor_writes_receipts (
    worker text primary key, claim_key uuid not null, ids bigint[] not null default '{}',
    fences bigint[] not null default '{}');
insert into floor_writes_receipts (worker, claim_key) values ('floor', gen_random_uuid());
"""

# $1: the claim's key (a new one per claim), as a resend would send again.
CLAIM_WITH_WRITES = f"""
with claimed as (
    update floor_writes_queue as q
    set taken = true, fence = q.fence + 1, owner = 'floor',
        lease_until = now() + interval '60 seconds'
    where q.id = {_NEXT_ROW.format(queue="floor_writes_queue")}
    returning q.id, q.fence
),
journal as (
    insert into floor_writes_journal (queue_id, event, detail)
    select c.id, 'run.claimed', jsonb_build_object('fence', c.fence) from claimed as c
),
receipt as (
    update floor_writes_receipts as rc
    set claim_key = $1, ids = (select array_agg(c.id) from claimed as c),
        fences = (select array_agg(c.fence) from claimed as c)
    where rc.worker = 'floor' and exists (select from claimed)
)
select c.id, c.fence from claimed as c
"""


async def main(dsn: str, path: str, with_writes: bool) -> None:
    conn = await asyncpg.connect(dsn)
    claim = await conn.prepare(CLAIM_WITH_WRITES if with_writes else CLAIM)

    def claim_one():
        return claim.fetchrow(uuid.uuid4()) if with_writes else claim.fetchrow()

    woken = asyncio.Event()
    await conn.add_listener("floor", lambda *_: woken.set())
    with open(path, "a", buffering=1) as out:
        while True:
            await woken.wait()
            woken.clear()
            while (row := await claim_one()) is not None:
                out.write(f"{row['id']} {time.time()}\n")  # the handler starts


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], "--with-writes" in sys.argv[3:]))
