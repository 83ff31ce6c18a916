-- 0002 — expand: direct dispatch, strictly additive.
--
-- Runs are claimed straight from runlane.runs with a lease and a fencing token, computers
-- are leased exclusively, timer runs carry a durable routine marker, timing has its own
-- columns, and workers register with their generation. Older workers keep running
-- against this schema: nothing they read or write is renamed or dropped, and the
-- compatibility trigger below translates their writes into the new bookkeeping.

alter table runlane.runs
add column wake_at timestamptz null,
add column fence bigint not null default 0,
add column lease_owner text null,
add column lease_expires_at timestamptz null,
add column timer_routine text null,
add column timer_occurrence timestamptz null,
add column timer_timezone text null,
add column first_started_at timestamptz null,
add column first_response_at timestamptz null,
add column last_error text null,
-- Priority class for claims: interactive-class work (interactive, manual, test, retry)
-- is taken before scheduled and reaction work.
add column claim_class smallint generated always as (
    case when trigger in ('scheduled', 'reaction') then 1 else 0 end
) stored;

alter table runlane.runs
add constraint runs_fence_not_negative check (fence >= 0);

-- The claim scan reads only queued rows, in claim order: its cost follows runnable
-- rows, not history.
create index runs_claim_order_idx on runlane.runs (claim_class, run_id)
where state = 'queued';
create index runs_running_idx on runlane.runs (org_id, lane)
where state = 'running';
-- Fair claims (issue 8): a loose index scan visits each organization with queued runs of
-- a class and lane once, and reads only the oldest few runs of each.
create index runs_fair_claim_idx on runlane.runs (claim_class, lane, org_id, run_id)
where state = 'queued';
create index runs_lease_expiry_idx on runlane.runs (lease_expires_at)
where state = 'running';
create index runs_queued_computer_idx on runlane.runs (computer_id, claim_class, run_id)
where state = 'queued' and computer_id is not null;
create index runs_unfinished_agent_idx on runlane.runs (agent_id, lane)
where state in ('queued', 'running');
create index runs_unfinished_thread_idx on runlane.runs (agent_id, thread_id)
where lane = 'interactive' and state in ('queued', 'running');
-- No occurrence of a routine fires twice, whatever ticks run at once (issue 3).
create unique index runs_timer_occurrence_once_idx on runlane.runs (timer_routine, timer_occurrence)
where timer_routine is not null;

-- Interval schedules run on a grid anchored when the schedule was set.
alter table runlane.agents add column schedule_anchor timestamptz null;
create index agents_due_idx on runlane.agents (next_run_at)
where next_run_at is not null;

create table runlane.computer_leases (
    computer_id text primary key,
    run_id bigint not null references runlane.runs (run_id),
    fence bigint not null,
    expires_at timestamptz not null
);
comment on table runlane.computer_leases is
'Exclusive computer ownership: a lease is live while expires_at > now().';

create table runlane.workers (
    worker_id text primary key,
    generation int not null,
    deliveries text not null default 'direct',
    lanes text[] not null default '{}',
    host text null,
    pid int null,
    started_at timestamptz not null default now(),
    heartbeat_at timestamptz not null default now(),
    stopped_at timestamptz null,
    constraint workers_deliveries_known check (deliveries in ('direct', 'legacy'))
);
comment on table runlane.workers is
'Registry of live workers and their schema generation; the contract step reads it.';

-- Every claim so far counted as an attempt; the fence starts where they left off.
update runlane.runs set fence = attempts;

-- Runs an older worker is executing right now get a lease its heartbeats keep alive
-- (the compatibility trigger turns its heartbeat_at writes into lease extensions).
update runlane.runs
set
    lease_owner = 'legacy',
    lease_expires_at = greatest(coalesce(heartbeat_at, now()), now()) + interval '60 seconds'
where state = 'running';

-- Carry every pending legacy retry time into the run's own wake time.
update runlane.runs as r
set wake_at = pending.run_at
from (
    select
        (j.payload ->> 'run_id')::bigint as run_id,
        max(j.run_at) as run_at
    from runlane.run_jobs as j
    where
        j.task = 'run_agent'
        and j.locked_at is null
        and j.attempts < j.max_attempts
        and jsonb_typeof(j.payload -> 'run_id') = 'number'
    group by 1
) as pending
where
    r.run_id = pending.run_id
    and r.state = 'queued'
    and pending.run_at > now();

-- The compatibility trigger: older workers know nothing of leases, fences or wake
-- times. Their claim (queued -> running without a new lease owner) takes a fence and a
-- lease, their heartbeat extends it, and their requeue (running -> queued with the
-- lease owner untouched) is stamped with that generation's retry backoff,
-- exp(least(attempts, 10)) seconds. A new worker always clears or sets lease_owner
-- itself when it changes a run's state, so its explicit wake time wins even when it
-- equals the old value. An older worker's claim of a run not awake yet (its wake time
-- is in the future) or of a run whose computer is busy, and its requeue or completion
-- of a run it no longer owns (a new worker claimed it after its lease expired), change
-- nothing: the older worker sees no row, as when someone else took the run. Its claims,
-- requeues and completions are journaled like the new generation's.
-- Removed by the contract step (0003) once older releases have drained.
create function runlane.tg_runs__legacy_compat() returns trigger
language plpgsql
set search_path = pg_catalog, pg_temp
as $body$
begin
    if old.state = 'queued' and new.state = 'running'
       and new.lease_owner is not distinct from old.lease_owner then
        if old.wake_at > now() then
            return null;  -- not awake yet (a retry delay or schedule): not the older worker's to start
        end if;
        if new.computer_id is not null and exists (
            select 1 from runlane.computer_leases as cl
            where cl.computer_id = new.computer_id
              and cl.expires_at > now()
              and cl.run_id <> new.run_id
        ) then
            return null;  -- the computer is busy: the older worker sees no row and moves on
        end if;
        new.fence := old.fence + 1;
        new.lease_owner := 'legacy';
        new.lease_expires_at := now() + interval '60 seconds';
        new.heartbeat_at := coalesce(new.heartbeat_at, now());
        new.first_started_at := coalesce(old.first_started_at, clock_timestamp());
        if new.computer_id is not null then
            insert into runlane.computer_leases as cl (computer_id, run_id, fence, expires_at)
            values (new.computer_id, new.run_id, new.fence, new.lease_expires_at)
            on conflict (computer_id) do update
            set run_id = excluded.run_id, fence = excluded.fence, expires_at = excluded.expires_at;
        end if;
        insert into runlane.run_events (run_id, event, detail)
        values (new.run_id, 'run.claimed',
                jsonb_build_object('fence', new.fence, 'attempt', new.attempts, 'generation', 1));
    elsif old.state = 'running' and new.state <> 'running'
          and new.lease_owner is not distinct from old.lease_owner
          and old.lease_owner is distinct from 'legacy' then
        return null;  -- an older worker fenced out: a new worker owns this run now
    elsif old.state = 'running' and new.lease_owner is not distinct from old.lease_owner
          and old.lease_owner = 'legacy' then
        if new.state = 'running' then
            if new.heartbeat_at is distinct from old.heartbeat_at then
                new.lease_expires_at := greatest(new.heartbeat_at, now()) + interval '60 seconds';
                update runlane.computer_leases
                set expires_at = new.lease_expires_at
                where computer_id = new.computer_id and run_id = new.run_id;
            end if;
        else
            if new.state = 'queued' then
                new.wake_at := now() + exp(least(new.attempts, 10)) * interval '1 second';
                insert into runlane.run_events (run_id, event, detail)
                values (new.run_id, 'run.retry_scheduled',
                        jsonb_build_object('attempt', new.attempts, 'wake_at', new.wake_at,
                                           'generation', 1));
            else
                new.finished_at := coalesce(new.finished_at, clock_timestamp());
                insert into runlane.run_events (run_id, event, detail)
                values (new.run_id, 'run.finished',
                        jsonb_build_object('outcome', new.state, 'reason', new.reason,
                                           'generation', 1));
            end if;
            new.lease_owner := null;
            new.lease_expires_at := null;
            delete from runlane.computer_leases
            where computer_id = new.computer_id and run_id = new.run_id;
        end if;
    end if;
    return new;
end;
$body$;

create trigger runs_legacy_compat
before update on runlane.runs
for each row execute function runlane.tg_runs__legacy_compat();
