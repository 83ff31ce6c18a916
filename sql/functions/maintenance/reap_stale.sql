-- reap_stale: recover runs whose owner stopped heartbeating.
--
-- Guarantees: takes at most p_limit (1 .. 10000) running runs whose lease expired before
-- p_now, oldest expiry first, with `for update skip locked`, so concurrent reapers never
-- reap the same run twice and a heartbeat that committed first keeps its run (the
-- expiry is re-checked on the row's newest version). For each:
--   * background → closed as failed / stale (runlane._close_run): the agent is free
--     again, a zombie never locks it out;
--   * interactive with attempts < max_attempts → back to queued, reason lease_expired,
--     lease cleared, computer lease deleted, 'run.lease_expired' journaled, the run and
--     its computer's next waiter notified, messages held on its thread attached to it;
--     it resumes from its checkpoint on the next claim;
--   * interactive with attempts spent → failed / stale;
--   * any run asked to stop (runlane.cancel_run, reason cancel_requested) → canceled /
--     canceled: a stopped run is never requeued.
-- Housekeeping: deletes up to p_limit expired computer_leases rows whose run is no
-- longer running. Returns one row per reaped run: (run_id, new state, reason).
create or replace function runlane.reap_stale(
    p_now timestamptz default now(),
    p_limit int default 500
)
returns table (run_id bigint, state text, reason text)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_run runlane.runs;
    v_orgs text[];  -- the organizations taken one at a time: every one at once (NULL) but on Citus
    v_org text;
    v_left int := p_limit;  -- runs this pass may still take
    v_lease record;
begin
    if p_now is null or p_limit is null then
        raise exception 'now and limit are required'
            using errcode = '22004';
    end if;
    if p_limit < 1 or p_limit > 10000 then
        raise exception 'limit % is out of range', p_limit
            using errcode = '22023',
                  hint = 'Reap between 1 and 10000 runs per call.';
    end if;
    perform runlane._check_instant('now', p_now);

    -- The longest-expired runs, handled in thread lock order (runlane._thread_lock): a
    -- requeue or close of a chat run takes its thread's lock until commit. (No index
    -- holds lease_expires_at, so that a heartbeat is a HOT update, migration 0015: this
    -- reads the running runs, runs_worker_running_idx, and sorts them.) On a schema Citus
    -- distributes, organization by organization (a locking read names one, and reaches
    -- its node alone), in org_id order, after one unlocked read of the organizations with
    -- expired runs; elsewhere every organization in one pass.
    if runlane._citus_distributed('runlane.runs') then
        v_orgs := array(
            select distinct r.org_id
            from runlane.runs as r
            where r.state = 'running'
              and r.lease_expires_at < reap_stale.p_now
            order by 1
        );
    else
        v_orgs := array[null::text];
    end if;
    foreach v_org in array v_orgs loop
        exit when v_left <= 0;
        for v_run in
            select s.*
            from (
                select r.*
                from runlane.runs as r
                where r.state = 'running'
                  and r.lease_expires_at < reap_stale.p_now
                  and (v_org is null or r.org_id = v_org)
                order by r.lease_expires_at, r.run_id
                limit v_left
                for update of r skip locked
            ) as s
            order by s.agent_id, s.thread_id, s.run_id
        loop
            v_left := v_left - 1;
            if v_run.reason = 'cancel_requested' then
                -- asked to stop (cancel_run) and its worker is gone: never requeued
                perform runlane._close_run(v_run, 'canceled', 'canceled', null);

                run_id := v_run.run_id;
                state := 'canceled';
                reason := 'canceled';
            elsif v_run.lane = 'interactive' and v_run.attempts < v_run.max_attempts then
                update runlane.runs as r
                set state = 'queued',
                    reason = 'lease_expired',
                    lease_owner = null,
                    lease_expires_at = null
                where r.run_id = v_run.run_id and r.org_id = v_run.org_id;

                perform runlane._free_computer(v_run);

                perform runlane._write_run_events(
                    array[v_run.run_id], array[v_run.org_id], 'run.lease_expired',
                    array[jsonb_build_object('attempt', v_run.attempts)]
                );

                perform runlane._notify_run(v_run.run_id, v_run.lane);
                -- Messages held while it ran join the queued run, as new ones would.
                perform runlane._dispatch_held_messages(v_run.agent_id, v_run.thread_id);

                run_id := v_run.run_id;
                state := 'queued';
                reason := 'lease_expired';
            else
                perform runlane._close_run(v_run, 'failed', 'stale', 'lease expired without a heartbeat');

                run_id := v_run.run_id;
                state := 'failed';
                reason := 'stale';
            end if;
            return next;
        end loop;
    end loop;

    -- GUARD: housekeeping of computer leases left behind by runs that ended elsewhere. On
    -- a schema Citus distributes, lease by lease: a statement cannot read the leases (a
    -- reference table) beside the runs of every node (the leases name their organization
    -- there: its schema is past 0027).
    if runlane._citus_distributed('runlane.runs') then
        for v_lease in
            select l.computer_id, l.run_id, l.org_id
            from runlane.computer_leases as l
            where l.expires_at < reap_stale.p_now
            limit reap_stale.p_limit
            for update skip locked
        loop
            if not exists (
                select 1
                from runlane.runs as r
                where r.run_id = v_lease.run_id and r.org_id = v_lease.org_id and r.state = 'running'
            ) then
                delete from runlane.computer_leases as cl
                where cl.computer_id = v_lease.computer_id and cl.run_id = v_lease.run_id;
            end if;
        end loop;
        return;
    end if;
    delete from runlane.computer_leases as cl
    where cl.computer_id in (
        select l.computer_id
        from runlane.computer_leases as l
        where l.expires_at < reap_stale.p_now
          and not exists (
              select 1
              from runlane.runs as r
              where r.run_id = l.run_id
                and r.state = 'running'
          )
        limit reap_stale.p_limit
        for update of l skip locked
    );
end;
$$;

comment on function runlane.reap_stale(timestamptz, int) is
'Recovers runs with expired leases: background -> failed/stale; interactive -> queued/lease_expired '
'while attempts remain, else failed/stale. Returns (run_id, state, reason) per run.';

revoke all on function runlane.reap_stale(timestamptz, int) from public;
grant execute on function runlane.reap_stale(timestamptz, int) to runlane_worker;
