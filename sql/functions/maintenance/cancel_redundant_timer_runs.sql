-- cancel_redundant_timer_runs: a bounded pass that removes surplus timer catch-up work.
--
-- Guarantees: among pristine marked timer runs (queued, trigger scheduled, timer_routine
-- set, no attempts, outputs, cost, steering messages, checkpoint or live computer lease)
-- it keeps one per routine, prompt, thread and model (the latest occurrence) and cancels
-- at most p_limit of the others, with reason 'redundant', through runlane._close_run
-- (finished_at, a run.finished journal row). Rows and journal entries stay. Never touches
-- unmarked older firings, manual runs, tests, retries, reactions, or any started run.
-- Rows being claimed concurrently are skipped (skip locked). Returns the count.
create or replace function runlane.cancel_redundant_timer_runs(p_limit int default 100)
returns int
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_run runlane.runs;
    v_count int := 0;
    v_orgs text[];  -- the organizations taken one at a time: every one at once (NULL) but on Citus
    v_org text;
begin
    if p_limit is null or p_limit < 0 then
        raise exception 'limit must be zero or more, not %', coalesce(p_limit::text, 'null')
            using errcode = '22023';
    end if;

    -- On a schema Citus distributes, organization by organization (a locking read names
    -- one, and reaches its node alone), in org_id order, after one unlocked read of the
    -- organizations with queued timer runs; elsewhere every organization in one pass. A
    -- routine is one agent's, so each organization's ranking is the whole ranking.
    if runlane._citus_distributed('runlane.runs') then
        v_orgs := array(
            select distinct r.org_id
            from runlane.runs as r
            where r.state = 'queued' and r.trigger = 'scheduled' and r.timer_routine is not null
            order by 1
        );
    else
        v_orgs := array[null::text];
    end if;
    foreach v_org in array v_orgs loop
        exit when v_count >= p_limit;
        for v_run in
            with pristine as (
                select
                    r.run_id,
                    row_number() over (
                        partition by r.timer_routine, r.prompt, r.thread_id, r.model
                        order by r.timer_occurrence desc, r.run_id desc
                    ) as rank_in_routine
                from runlane.runs as r
                where r.state = 'queued'
                  and r.trigger = 'scheduled'
                  and r.timer_routine is not null
                  and (v_org is null or r.org_id = v_org)
                  and r.attempts = 0
                  and r.cost = 0
                  and r.checkpoint is null
                  and not exists (
                      select 1 from runlane.messages as m
                      where m.run_id = r.run_id and m.org_id = r.org_id
                  )
                  and not exists (
                      select 1 from runlane.computer_leases as cl
                      where cl.run_id = r.run_id and cl.expires_at > now()
                  )
            )
            select r.*
            from runlane.runs as r
            where r.run_id in (select p.run_id from pristine as p where p.rank_in_routine > 1)
              and (v_org is null or r.org_id = v_org)
              and r.state = 'queued'
              and r.attempts = 0
            order by r.run_id
            limit p_limit - v_count
            for update skip locked
        loop
            -- (outputs read apart, as tick reads them: never found, as a run that made
            -- outputs has attempts)
            continue when runlane._run_has_outputs(v_run.run_id, v_run.org_id);
            perform runlane._close_run(v_run, 'canceled', 'redundant', null);
            v_count := v_count + 1;
        end loop;
    end loop;
    return v_count;
end;
$$;

comment on function runlane.cancel_redundant_timer_runs(int) is
'Cancels (reason redundant) at most p_limit surplus pristine marked timer runs, keeping one per routine, '
'prompt, thread and model.';

revoke all on function runlane.cancel_redundant_timer_runs(int) from public;
grant execute on function runlane.cancel_redundant_timer_runs(int) to runlane_worker;
