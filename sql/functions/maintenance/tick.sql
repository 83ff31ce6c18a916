-- tick: the scheduler pass over due agents.
--
-- Guarantees, for at most p_limit gate-open agents with next_run_at <= p_now, taken in
-- due order with `for no key update skip locked` (concurrent ticks split the work and
-- never fire one agent twice; on Citus organization by organization in org_id order, each
-- on its node, due order within each), under the agent's row lock (runlane._lock_agent):
--   occurrence = the most recent slot due by p_now (never earlier than next_run_at);
--   1. the agent's unfinished run is a pristine pending timer run of its routine (queued,
--      no attempts, outputs, cost, steering, checkpoint or live computer lease) with the
--      agent's prompt, thread and model: its marker moves to the occurrence, its wake
--      time (a computer retry delay) is kept -> 'routine.coalesced' (and no routine.fired);
--   2. else any unfinished background run -> a skipped run, reason already_running;
--   3. else the owner's weekly budget is exhausted -> a skipped run, reason budget_exhausted;
--   4. else a queued timer run (trigger scheduled) marked (agent, occurrence, zone)
--      -> 'routine.fired'.
--   Skipped rows carry the occurrence too and return 'run.skipped'. In every case
--   next_run_at advances to the first slot after p_now: missed slots never pile up and
--   a late run is never skipped. Returns the events for the runner to log; it does not
--   notify (the runner publishes the returned run ids in a separate transaction).
-- Each agent is handled in its own subtransaction: when its step fails (say 23505, its
-- next_run_at points at an occurrence that already fired), only that agent's work is
-- rolled back; runlane._tick_failed then journals a 'skipped' run with reason
-- tick_failed (returned as 'run.skipped') and advances its next_run_at past p_now, and
-- the tick goes on with the other agents. An agent whose lock is busy (55P03) is left
-- due for the next tick. Each agent that writes uses one subtransaction id: the tick's
-- transaction is short, but keep p_limit moderate (the runner's 500) so other sessions'
-- snapshots overflow their subtransaction cache only briefly.
create or replace function runlane.tick(p_now timestamptz default now(), p_limit int default 500)
returns table (event text, agent_id text, run_id bigint, occurrence timestamptz)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
#variable_conflict use_column
declare
    v_agent runlane.agents;
    v_spec jsonb;
    v_tz text;
    v_busy boolean;
    v_pending runlane.runs;
    v_run runlane.runs;
    v_failed runlane.runs;
    v_orgs text[];  -- the organizations taken one at a time: every one at once (NULL) but on Citus
    v_org text;
    v_next timestamptz;
    v_left int := p_limit;  -- agents this tick may still take
begin
    if p_now is null then
        raise exception 'tick needs an instant' using errcode = '22004';
    end if;
    if not isfinite(p_now) then
        raise exception 'tick needs a finite instant, not %', p_now
            using errcode = '22023';
    end if;
    perform runlane._check_instant('now', p_now);
    if p_limit is null or p_limit < 0 then
        raise exception 'tick limit must be zero or more, not %', coalesce(p_limit::text, 'null')
            using errcode = '22023';
    end if;

    -- On a schema Citus distributes, organization by organization (a locking read names
    -- one, and reaches its node alone), in org_id order, after one unlocked read of the
    -- organizations with due agents; elsewhere every organization in one pass.
    if runlane._citus_distributed('runlane.agents') then
        v_orgs := array(
            select distinct a.org_id
            from runlane.agents as a
            where a.next_run_at <= p_now
              and a.enabled
              and not a.admin_locked
              and coalesce(a.model, '') <> ''
              and a.schedule <> ''
            order by 1
        );
    else
        v_orgs := array[null::text];
    end if;
    foreach v_org in array v_orgs loop
        exit when v_left <= 0;
        for v_agent in
            select a.*
            from runlane.agents as a
            where a.next_run_at <= p_now
              and (v_org is null or a.org_id = v_org)
              and a.enabled
              and not a.admin_locked
              and coalesce(a.model, '') <> ''
              and a.schedule <> ''
            order by a.next_run_at, a.agent_id
            limit v_left
            for no key update skip locked
        loop
            v_left := v_left - 1;
            -- GUARD: one agent at a time, each in its own subtransaction: one bad row (a
            -- schedule that no longer parses, a next_run_at at an occurrence that already
            -- fired, ...) fails only itself, never the tick of every other organization.
            begin
                v_spec := runlane.parse_schedule(v_agent.schedule);
                v_tz := runlane._agent_timezone(v_agent.owner_id, v_agent.org_id);
                occurrence := greatest(
                    v_agent.next_run_at,
                    runlane._last_slot(v_spec, v_tz, p_now, v_agent.schedule_anchor)
                );
                agent_id := v_agent.agent_id;
                v_busy := runlane._lock_agent(v_agent.agent_id, v_agent.org_id);

                -- GUARD: 1. coalesce into the pristine pending timer run of this routine
                v_pending := null;
                if v_busy then
                    select r.* into v_pending
                    from runlane.runs as r
                    where r.agent_id = v_agent.agent_id
                      and r.org_id = v_agent.org_id
                      and r.lane = 'background'
                      and r.state = 'queued'
                      and r.trigger = 'scheduled'
                      and r.timer_routine = v_agent.agent_id
                      and r.attempts = 0
                      and r.cost = 0
                      and r.checkpoint is null
                      and r.prompt = v_agent.prompt
                      and r.thread_id is not distinct from v_agent.thread_id
                      and r.model is not distinct from v_agent.model
                      and not exists (
                          select 1 from runlane.messages as m
                          where m.run_id = r.run_id and m.org_id = v_agent.org_id
                      )
                      and not exists (
                          select 1 from runlane.computer_leases as cl
                          where cl.run_id = r.run_id and cl.expires_at > now()
                      )
                    order by r.run_id
                    limit 1
                    for no key update skip locked;
                    -- (its outputs read apart: before 0027 they name no organization, and Citus
                    -- locks only what one statement reads on one node; never found, as a run
                    -- that made outputs has attempts)
                    if v_pending.run_id is not null
                       and runlane._run_has_outputs(v_pending.run_id, v_pending.org_id) then
                        v_pending := null;
                    end if;
                end if;

                if v_pending.run_id is not null then
                    update runlane.runs as r
                    set timer_occurrence = occurrence, timer_timezone = v_tz
                    where r.run_id = v_pending.run_id and r.org_id = v_pending.org_id;
                    perform runlane._write_run_events(
                        array[v_pending.run_id], array[v_pending.org_id], 'routine.coalesced',
                        array[jsonb_build_object(
                            'occurrence', occurrence, 'previous_occurrence', v_pending.timer_occurrence
                        )]
                    );
                    event := 'routine.coalesced';
                    run_id := v_pending.run_id;
                else
                    -- GUARD: 2. overlap, 3. budget, 4. fire
                    v_run := runlane._new_background_run(
                        v_agent, 'scheduled', v_agent.prompt, null,
                        case
                            when v_busy then 'already_running'
                            when runlane._budget_exhausted(v_agent.owner_id, v_agent.org_id, p_now)
                                then 'budget_exhausted'
                        end,
                        occurrence, v_tz
                    );
                    event := case when v_run.state = 'skipped' then 'run.skipped' else 'routine.fired' end;
                    run_id := v_run.run_id;
                end if;

                v_next := runlane._next_slot(v_spec, v_tz, p_now, v_agent.schedule_anchor);
                update runlane.agents as a
                set next_run_at = v_next
                where a.agent_id = v_agent.agent_id and a.org_id = v_agent.org_id;
                return next;
            exception
                when lock_not_available then
                    continue;  -- busy right now (lock_timeout): it stays due for the next tick
                when others then
                    v_failed := runlane._tick_failed(v_agent, p_now, sqlstate);
                    event := 'run.skipped';
                    agent_id := v_agent.agent_id;
                    run_id := v_failed.run_id;
                    occurrence := v_agent.next_run_at;
                    return next;
            end;
        end loop;
    end loop;
end;
$$;

comment on function runlane.tick(timestamptz, int) is
'Scheduler pass: for each due agent coalesce, skip (already_running, budget_exhausted) or fire a marked '
'timer run, and advance next_run_at past p_now. Returns events; never notifies.';

revoke all on function runlane.tick(timestamptz, int) from public;
grant execute on function runlane.tick(timestamptz, int) to runlane_worker;
