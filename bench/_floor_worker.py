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

With --on-runlane it makes those writes on runlane's own tables (runlane.runs, run_events,
claim_receipts), on runs that runlane's publish_run published: it LISTENs on
`runlane_runs` and claims the oldest queued chat run, with what a claim sets on the run,
its run.claimed journal row and its receipt, in one statement. Still nothing else: the
lower bound of any claim on runlane's schema, apart from the rules claim_runs enforces.

With --with-rules it is the floor of a claim that keeps runlane's guarantees AND checks
the rules an idle chat claim must check, on narrow tables built for that claim alone
(RULES_TABLES): the writes of --with-writes, plus the receipt locked first and compared
with the claim's key (a resend claims nothing), the worker's per-organization bound (a
counter row, taken only while there is room), the fence floor (a one-row table), and the
run.execution_started timing row; all in one statement. It is the least such a claim
could cost on any schema: what a redesign of runlane's tables around the claim would be
measured against. (Chat runs are not gated and not capped, so neither is read.)

With --hot-on-runlane (bench/hot_claim.py, a design study) it makes --on-runlane's writes
on a copy of runlane's tables reshaped so that the run's update is HOT (HOT_RESHAPE): no
index of runs names a column the claim changes, and the queued runs are found in a
narrow queue table that the claim deletes its entry from.

    python -m bench._floor_worker DSN FILE
        [--with-writes | --on-runlane | --with-rules | --hot-on-runlane]
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

# The receipt under the claim's key and the rows returned, after a CTE `claimed`: both
# small-table floors' (a table of their own each).
_RECEIPT_AND_ROWS = """receipt as (
    update {receipts} as rc
    set claim_key = $1, ids = (select array_agg(c.id) from claimed as c),
        fences = (select array_agg(c.fence) from claimed as c)
    where rc.worker = 'floor' and exists (select from claimed)
)
select c.id, c.fence from claimed as c
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
{_RECEIPT_AND_ROWS.format(receipts="floor_writes_receipts")}"""


# --on-runlane: the claim's writes on runlane's tables. What claim_runs sets on a claimed
# run, on the oldest queued chat run nobody holds (also the claim ladder's rungs on runs).
_RUNLANE_CLAIM_SET = """
    update runlane.runs as r
    set state = 'running', reason = null, fence = r.fence + 1, attempts = r.attempts + 1,
        lease_owner = 'floor', lease_expires_at = now() + interval '60 seconds',
        heartbeat_at = now(), first_started_at = coalesce(r.first_started_at, clock_timestamp())
"""
RUNLANE_CLAIM_UPDATE = (
    _RUNLANE_CLAIM_SET
    + """    where r.run_id = (
        select q.run_id from runlane.runs as q
        where q.state = 'queued' and q.claim_class >= 0 and q.lane = 'interactive'
        order by q.claim_class, q.run_id limit 1
        for update skip locked
    )
"""
)
# Its receipt row (the worker's first claim creates it in claim_runs).
RUNLANE_RECEIPT = """
insert into runlane.claim_receipts (worker_id, lanes, claim_key)
values ('floor', '{interactive}', gen_random_uuid())
"""
# $1: the claim's key. The run's update, its run.claimed journal row (what claim_runs
# journals) and the receipt, in one statement; an empty claim leaves the receipt alone.
# The claimed run's journal row and the receipt, after a CTE `claimed` (the run's update).
_RUNLANE_JOURNAL_AND_RECEIPT = """
journal as (
    insert into runlane.run_events (run_id, event, detail)
    select c.run_id, 'run.claimed', jsonb_build_object(
        'fence', c.fence, 'attempt', c.attempts, 'resumed', c.checkpoint is not null)
    from claimed as c
),
receipt as (
    update runlane.claim_receipts as rc
    set claim_key = $1, run_ids = (select array_agg(c.run_id) from claimed as c),
        fences = (select array_agg(c.fence) from claimed as c), claimed_at = now()
    where rc.worker_id = 'floor' and rc.lanes = '{interactive}'
      and exists (select from claimed)
)
select c.run_id as id, c.fence from claimed as c
"""
CLAIM_ON_RUNLANE = f"""
with claimed as ({RUNLANE_CLAIM_UPDATE} returning r.run_id, r.fence, r.attempts, r.checkpoint),
{_RUNLANE_JOURNAL_AND_RECEIPT}"""

# --with-rules: narrow tables of its own, one per thing the claim must write or check.
RULES_TABLES = """
create table floor_rules_queue (
    id bigserial primary key, org int not null, lane text not null default 'interactive',
    claim_class smallint not null default 0, state text not null default 'queued',
    fence bigint not null default 0, attempts int not null default 0, owner text,
    lease_until timestamptz, queued_at timestamptz not null default now(),
    first_started_at timestamptz);
create index floor_rules_claim_order on floor_rules_queue (lane, claim_class, id)
    where state = 'queued';
create table floor_rules_journal (
    id bigserial primary key, queue_id bigint not null references floor_rules_queue,
    event text not null, detail jsonb not null, at timestamptz not null default now());
create table floor_rules_timings (
    id bigserial primary key, queue_id bigint not null references floor_rules_queue,
    event text not null, detail jsonb not null);
create table floor_rules_receipts (
    worker text primary key, claim_key uuid not null, ids bigint[] not null default '{}',
    fences bigint[] not null default '{}');
create table floor_rules_bound (
    worker text, org int, running int not null, max_running int not null,
    primary key (worker, org));
create table floor_rules_fence_floor (fence_floor bigint not null);
insert into floor_rules_receipts (worker, claim_key) values ('floor', gen_random_uuid());
insert into floor_rules_bound values ('floor', 1, 0, 1000000000);
insert into floor_rules_fence_floor values (0);
"""
# $1: the claim's key. Receipt lock and resend check, the oldest queued chat run locked,
# the bound's room taken, the claim (fence above the floor, lease, attempt), its journal
# row, its timing row and the receipt: one statement.
CLAIM_WITH_RULES = """
with receipt_lock as (
    select rc.claim_key from floor_rules_receipts as rc where rc.worker = 'floor' for update
),
candidate as (
    select q.id, q.org from floor_rules_queue as q
    where q.state = 'queued' and q.lane = 'interactive' and q.claim_class >= 0
      and (select rl.claim_key from receipt_lock as rl) is distinct from $1
    order by q.claim_class, q.id
    limit 1
    for update skip locked
),
room as (
    update floor_rules_bound as b
    set running = b.running + 1
    from candidate as c
    where b.worker = 'floor' and b.org = c.org and b.running < b.max_running
    returning b.org
),
claimed as (
    update floor_rules_queue as q
    set state = 'running',
        fence = greatest(q.fence, (select ff.fence_floor from floor_rules_fence_floor as ff)) + 1,
        attempts = q.attempts + 1, owner = 'floor', lease_until = now() + interval '60 seconds',
        first_started_at = coalesce(q.first_started_at, clock_timestamp())
    from candidate as c
    where q.id = c.id and exists (select from room)
    returning q.id, q.fence, q.attempts, q.queued_at, q.first_started_at
),
journal as (
    insert into floor_rules_journal (queue_id, event, detail)
    select c.id, 'run.claimed', jsonb_build_object('fence', c.fence, 'attempt', c.attempts)
    from claimed as c
),
timing as (
    insert into floor_rules_timings (queue_id, event, detail)
    select c.id, 'run.execution_started', jsonb_build_object(
        'queued_ms', extract(epoch from c.first_started_at - c.queued_at) * 1000)
    from claimed as c
),
""" + _RECEIPT_AND_ROWS.format(receipts="floor_rules_receipts")

# --hot-on-runlane: a design study, never runlane's schema. A narrow queue of the queued
# runs (filled by a trigger when a run becomes queued), room on every page of runs for a
# HOT update (fillfactor), and every index of runs that names a column the claim changes
# dropped (HOT_BLOCKING_COLUMNS; bench/hot_claim.py drops them, and lists them): what
# they serve (claim order, caps, bound, reaper, unfinished-run lookups) would have to
# move to narrow tables of their own.
HOT_BLOCKING_COLUMNS = (
    "state",
    "reason",
    "fence",
    "attempts",
    "lease_owner",
    "lease_expires_at",
    "heartbeat_at",
    "first_started_at",
)
HOT_RESHAPE = """
create table runlane.hot_study_queue (
    run_id bigint primary key, lane text not null, claim_class smallint not null);
create index hot_study_queue_order on runlane.hot_study_queue (lane, claim_class, run_id);
create function runlane.hot_study_enqueue() returns trigger language plpgsql as $$
begin
    insert into runlane.hot_study_queue values (new.run_id, new.lane, new.claim_class)
    on conflict do nothing;
    return null;
end $$;
create trigger hot_study_enqueue after insert or update of state on runlane.runs
    for each row when (new.state = 'queued') execute function runlane.hot_study_enqueue();
alter table runlane.runs set (fillfactor = 50);
"""
# $1: the claim's key. The queue entry deleted, then --on-runlane's writes.
CLAIM_HOT_ON_RUNLANE = f"""
with picked as (
    delete from runlane.hot_study_queue as q
    where q.run_id = (
        select e.run_id from runlane.hot_study_queue as e
        where e.lane = 'interactive' and e.claim_class >= 0
        order by e.claim_class, e.run_id
        limit 1
        for update skip locked
    )
    returning q.run_id
),
claimed as ({_RUNLANE_CLAIM_SET}    from picked as p
    where r.run_id = p.run_id
    returning r.run_id, r.fence, r.attempts, r.checkpoint
),
{_RUNLANE_JOURNAL_AND_RECEIPT}"""
# The worker's modes: (its claim, whether the claim takes a key, the channel it listens on)
MODES = {
    "": (CLAIM, False, "floor"),
    "--with-writes": (CLAIM_WITH_WRITES, True, "floor"),
    "--on-runlane": (CLAIM_ON_RUNLANE, True, "runlane_runs"),
    "--with-rules": (CLAIM_WITH_RULES, True, "floor"),
    "--hot-on-runlane": (CLAIM_HOT_ON_RUNLANE, True, "runlane_runs"),
}


async def main(dsn: str, path: str, mode: str) -> None:
    statement, keyed, channel = MODES[mode]
    conn = await asyncpg.connect(dsn)
    claim = await conn.prepare(statement)

    def claim_one():
        return claim.fetchrow(uuid.uuid4()) if keyed else claim.fetchrow()

    woken = asyncio.Event()
    await conn.add_listener(channel, lambda *_: woken.set())
    with open(path, "a", buffering=1) as out:
        while True:
            await woken.wait()
            woken.clear()
            while (row := await claim_one()) is not None:
                out.write(f"{row['id']} {time.time()}\n")  # the handler starts


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else ""))
