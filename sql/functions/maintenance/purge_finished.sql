-- purge_finished: retention; deletes runs that finished long ago, with their rows.
--
-- Guarantees: deletes at most p_limit (1 .. 10000) runs in a terminal state (succeeded,
-- failed, canceled, skipped) whose finished_at is before now() - p_older_than, oldest
-- first, together with their outputs, their messages (only messages attached to a purged
-- run: a held message, run_id null, is never touched), their charges, their journal
-- (run_events, the one deletion from it) and any computer lease naming them. Returns
-- the number of runs deleted; p_limit returned means more may be waiting.
--   * never an unfinished run (queued, running), however old;
--   * the candidates are taken `for update skip locked`: a run another transaction
--     holds (a finish, a retry, a journal write) is skipped this call, never waited for,
--     and a purge never blocks a claim or a finish;
--   * a window whose cutoff instant, now() - p_older_than, is later than 8 days ago is
--     refused (22023, runlane._retention_cutoff: the instant is compared, never the
--     interval, whose months count 30 days): a charge is made before its run finishes,
--     so every charge purged is over 8 days old, outside any owner's current
--     week (at most 169 hours long), and weekly_spend stays exact. Each purged charge is
--     also taken out of its owner's quarter-hour bucket (runlane.charge_buckets), and a
--     bucket left at 0 is deleted, so every bucket stays the sum of its charges;
--   * a run's messages can be the source of no other run (a source message is attached
--     to the run it started, runs_source_message_of_run_fk), so deleting them with their
--     run never breaks another run's key; each deletion's check of that key is a
--     runs_pkey probe;
--   * tables other migrations add that reference runs or messages must declare
--     `on delete cascade` (runlane.charges does);
--   * charges an erasure kept without their run (run_id null: runlane.erase_thread,
--     erase_agent) go by the same cutoff: each call also deletes at most p_limit of
--     those charged before it (found through charges_run_idx, which holds the nulls;
--     a locked one is skipped), each taken out of its bucket likewise.
-- Thread lock rows (runlane.threads), claim receipts and agents are not touched.
create or replace function runlane.purge_finished(
    p_older_than interval,
    p_limit int default 1000
)
returns int
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_cutoff timestamptz;
    v_runs bigint[];
    v_detached bigint[];
    v_orgs text[];  -- the organizations taken one at a time: every one at once (NULL) but on Citus
    v_org text;
    v_purged int := 0;  -- runs deleted so far
begin
    if p_older_than is null or p_limit is null then
        raise exception 'older_than and limit are required'
            using errcode = '22004';
    end if;
    if p_limit < 1 or p_limit > 10000 then
        raise exception 'limit % is out of range', p_limit
            using errcode = '22023',
                  hint = 'Purge between 1 and 10000 runs per call.';
    end if;
    -- GUARD: the cutoff instant lies at least 8 days back (runlane._retention_cutoff).
    v_cutoff := runlane._retention_cutoff(p_older_than, now());

    -- On a schema Citus distributes, organization by organization (a locking read names
    -- one, and reaches its node alone), in org_id order, after one unlocked read of the
    -- organizations with rows past the cutoff; elsewhere every organization in one pass.
    if runlane._citus_distributed('runlane.runs') then
        v_orgs := array(
            select o.org_id
            from (
                select r.org_id
                from runlane.runs as r
                where r.state in ('succeeded', 'failed', 'canceled', 'skipped')
                  and r.finished_at < v_cutoff
                union
                select ch.org_id
                from runlane.charges as ch
                where ch.run_id is null and ch.charged_at < v_cutoff
            ) as o
            order by 1
        );
    else
        v_orgs := array[null::text];
    end if;
    foreach v_org in array v_orgs loop
        exit when v_purged >= p_limit;
        select coalesce(array_agg(c.run_id), '{}')
        into v_runs
        from (
            select r.run_id
            from runlane.runs as r
            where r.state in ('succeeded', 'failed', 'canceled', 'skipped')
              and r.finished_at < v_cutoff
              and (v_org is null or r.org_id = v_org)
            order by r.finished_at, r.run_id
            limit purge_finished.p_limit - v_purged
            for update of r skip locked
        ) as c;

        select coalesce(array_agg(d.charge_id), '{}')
        into v_detached
        from (
            select ch.charge_id
            from runlane.charges as ch
            where ch.run_id is null
              and ch.charged_at < v_cutoff
              and (v_org is null or ch.org_id = v_org)
            limit purge_finished.p_limit
            for update of ch skip locked
        ) as d;

        continue when cardinality(v_runs) = 0 and cardinality(v_detached) = 0;

        -- Charges first, each taken out of its owner's quarter-hour bucket.
        with gone as (
            delete from runlane.charges as ch
            where ch.run_id = any(v_runs)
               or ch.charge_id = any(v_detached)
            returning ch.owner_id, ch.charged_at, ch.amount
        ),

        per_bucket as (
            select
                g.owner_id,
                date_bin('15 minutes', g.charged_at, timestamptz '2000-01-01 00:00:00+00') as bucket_start,
                sum(g.amount) as amount
            from gone as g
            group by 1, 2
        )

        update runlane.charge_buckets as b
        set amount = b.amount - pb.amount
        from per_bucket as pb
        where b.owner_id = pb.owner_id
          and b.bucket_start = pb.bucket_start;

        delete from runlane.charge_buckets as b
        where b.amount <= 0
          and b.bucket_start < v_cutoff;

        delete from runlane.run_outputs as o
        where o.run_id = any(v_runs);

        delete from runlane.run_events as e
        where e.run_id = any(v_runs);

        delete from runlane.computer_leases as cl
        where cl.run_id = any(v_runs);

        -- A purged run may name a message of its own as its source: unlink, then delete.
        update runlane.runs as r
        set source_message_id = null
        where r.run_id = any(v_runs)
          and r.source_message_id is not null;

        delete from runlane.messages as m
        where m.run_id = any(v_runs);

        delete from runlane.runs as r
        where r.run_id = any(v_runs);

        v_purged := v_purged + cardinality(v_runs);
    end loop;
    return v_purged;
end;
$$;

comment on function runlane.purge_finished(interval, int) is
'Retention: deletes up to p_limit runs finished before now() - p_older_than (at least 8 days) '
'with their outputs, messages, charges and journal, and up to p_limit erased runs'' charges as old; '
'never an unfinished run. Returns the runs deleted.';

revoke all on function runlane.purge_finished(interval, int) from public;
grant execute on function runlane.purge_finished(interval, int) to runlane_worker;
