-- _skip_gated_runs: ends queued background runs that claim_runs found gated (the start
-- rule: a run starts only if its agent is switched on, not locked, has a model and its
-- owner is within the weekly budget).
--
-- Guarantees, for each p_run_ids[i] (the caller holds its row lock and has checked it is
-- queued), with the gate's reason p_reasons[i] (agent_off, agent_locked, no_model or
-- budget_exhausted):
-- * a run that never started (no attempt counted, no first start) is ended skipped, the
--   state kept for runs that never ran: state 'skipped', reason the gate's, finished_at
--   set, no lease owner; one run_events 'run.skipped' row {reason, trigger, at: 'claim'}
--   (codes only, as every skip); its stream is told it ended (runlane._notify_stream_end);
-- * a run that started before (attempts > 0 or first_started_at set: a retried run, a
--   run released at shutdown or requeued after its lease expired) is not called skipped:
--   it ran, may have written outputs and spent its owner's budget. It closes through
--   runlane._close_run_with, as a finish does: state 'canceled', reason the gate's, its
--   last error kept, a 'run.finished' journal row {outcome: canceled, reason}, so its
--   run.finished timing row (run_timing) reads canceled with its execution figures, and
--   whatever a finish tells its stream and its thread, this close tells them too;
-- * fence and attempts are left as they were (the run was not claimed now);
-- * a computer lease the run still holds (a released run's) is freed and the next run
--   waiting on that computer is notified.
-- * On a schema Citus distributes, run by run, each statement naming the run's
--   organization (runlane._run_orgs): gated runs are rare, and Citus locks and updates
--   a row only where its organization is named.
create or replace function runlane._skip_gated_runs(p_run_ids bigint[], p_reasons text[])
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_computers text[];
    v_skipped bigint[];
    v_skipped_orgs text[];
    v_skipped_details jsonb[];
    v_started record;
    v_run runlane.runs;
    v_gated record;
    v_now timestamptz;
begin
    if to_regclass('pg_catalog.pg_dist_partition') is not null
       and runlane._citus_distributed('runlane.runs') then
        v_now := clock_timestamp();  -- (no volatile call in an update Citus ships)
        for v_gated in
            select g.run_id, g.reason, o.org_id
            from unnest(p_run_ids, p_reasons) as g (run_id, reason)
            inner join runlane._run_orgs(p_run_ids) as o on o.run_id = g.run_id
            order by g.run_id
        loop
            select r.* into v_run
            from runlane.runs as r
            where r.org_id = v_gated.org_id and r.run_id = v_gated.run_id;
            if v_run.attempts > 0 or v_run.first_started_at is not null then
                perform runlane._close_run_with(v_run, 'canceled', v_gated.reason, v_run.last_error, 0, null);
                continue;
            end if;
            update runlane.runs as r
            set state = 'skipped',
                reason = v_gated.reason,
                finished_at = v_now,
                lease_owner = null,
                lease_expires_at = null
            where r.org_id = v_gated.org_id and r.run_id = v_gated.run_id;
            perform runlane._write_run_events(
                array[v_run.run_id], array[v_run.org_id], 'run.skipped',
                array[jsonb_build_object('reason', v_gated.reason, 'trigger', v_run.trigger, 'at', 'claim')]
            );
            perform runlane._notify_stream_end(array[v_run.run_id]);
            if v_run.computer_id is not null then
                delete from runlane.computer_leases as cl
                where cl.run_id = v_run.run_id and cl.computer_id = v_run.computer_id;
                perform runlane._notify_computer_waiter(v_run.computer_id);
            end if;
        end loop;
        return;
    end if;

    -- Runs that started before: closed as a finish closes them (rare: one by one).
    for v_started in
        select r as run, g.reason
        from unnest(p_run_ids, p_reasons) as g (run_id, reason)
        inner join runlane.runs as r on r.run_id = g.run_id
        where r.attempts > 0 or r.first_started_at is not null
        order by r.run_id
    loop
        perform runlane._close_run_with(
            v_started.run, 'canceled', v_started.reason, (v_started.run).last_error, 0, null
        );
    end loop;

    with skipped as (
        update runlane.runs as r
        set state = 'skipped',
            reason = g.reason,
            finished_at = clock_timestamp(),
            lease_owner = null,
            lease_expires_at = null
        from unnest(p_run_ids, p_reasons) as g (run_id, reason)
        where r.run_id = g.run_id
            and r.attempts = 0
            and r.first_started_at is null
        returning r.run_id, r.org_id, r.trigger, r.reason, r.computer_id
    )

    select
        coalesce(array_agg(distinct s.computer_id) filter (where s.computer_id is not null), '{}'),
        coalesce(array_agg(s.run_id order by s.run_id), '{}'),
        array_agg(s.org_id order by s.run_id),
        array_agg(
            jsonb_build_object('reason', s.reason, 'trigger', s.trigger, 'at', 'claim')
            order by s.run_id
        )
    into v_computers, v_skipped, v_skipped_orgs, v_skipped_details
    from skipped as s;

    perform runlane._write_run_events(v_skipped, v_skipped_orgs, 'run.skipped', v_skipped_details);

    perform runlane._notify_stream_end(v_skipped);

    -- GUARD: only a computer-bound run can hold a lease to free.
    if cardinality(v_computers) > 0 then
        delete from runlane.computer_leases as cl
        where cl.run_id = any(p_run_ids) and cl.computer_id = any(v_computers);
        perform runlane._notify_computer_waiter(c.computer_id)
        from unnest(v_computers) as c (computer_id);
    end if;
end;
$$;

comment on function runlane._skip_gated_runs(bigint[], text[]) is
'Ends queued background runs whose gate closed before their claim: one that never started is '
'skipped with the gate''s reason (run.skipped journaled), one that started before is closed '
'canceled with that reason as a finish closes it (run.finished); computer leases freed.';

revoke all on function runlane._skip_gated_runs(bigint[], text[]) from public;
