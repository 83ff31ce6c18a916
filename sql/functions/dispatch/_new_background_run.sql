-- _new_background_run: inserts one background-lane run of an agent (the caller holds the
-- agent's lock (runlane._lock_agent) and has checked its gates).
--
-- Guarantees: with p_skip_reason null, a queued run (trigger p_trigger, the given prompt
-- and wake time, the agent's thread, model, computer and handler); with a skip reason, a finished
-- 'skipped' run with that reason and a run_events 'run.skipped' row {reason, trigger}
-- (a skip is visible in the journal). p_occurrence/p_timezone mark the run as a timer run
-- of the agent's routine (timer_routine = agent id); a queued marked run is journaled
-- 'routine.fired' {occurrence}. Never notifies: the caller publishes after commit.
create or replace function runlane._new_background_run(
    p_agent runlane.agents,
    p_trigger text,
    p_prompt text,
    p_wake_at timestamptz,
    p_skip_reason text,
    p_occurrence timestamptz,
    p_timezone text
)
returns runlane.runs
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_run runlane.runs;
begin
    if to_regclass('runlane.runs_handler_claim_order_idx') is not null then
        -- (the run carries its agent's handler: claims read by it)
        insert into runlane.runs as r (
            org_id, agent_id, lane, trigger, state, reason, thread_id, prompt, model, computer_id,
            wake_at, timer_routine, timer_occurrence, timer_timezone, finished_at, handler
        )
        values (
            (p_agent).org_id,
            (p_agent).agent_id,
            'background',
            p_trigger,
            case when p_skip_reason is null then 'queued' else 'skipped' end,
            p_skip_reason,
            (p_agent).thread_id,
            p_prompt,
            (p_agent).model,
            (p_agent).computer_id,
            case when p_skip_reason is null then p_wake_at end,
            case when p_occurrence is not null then (p_agent).agent_id end,
            p_occurrence,
            case when p_occurrence is not null then p_timezone end,
            case when p_skip_reason is not null then clock_timestamp() end,
            (p_agent).handler
        )
        returning r.* into v_run;
    else  -- (a schema before 0021: runs carry no handler)
        insert into runlane.runs as r (
            org_id, agent_id, lane, trigger, state, reason, thread_id, prompt, model, computer_id,
            wake_at, timer_routine, timer_occurrence, timer_timezone, finished_at
        )
        values (
            (p_agent).org_id,
            (p_agent).agent_id,
            'background',
            p_trigger,
            case when p_skip_reason is null then 'queued' else 'skipped' end,
            p_skip_reason,
            (p_agent).thread_id,
            p_prompt,
            (p_agent).model,
            (p_agent).computer_id,
            case when p_skip_reason is null then p_wake_at end,
            case when p_occurrence is not null then (p_agent).agent_id end,
            p_occurrence,
            case when p_occurrence is not null then p_timezone end,
            case when p_skip_reason is not null then clock_timestamp() end
        )
        returning r.* into v_run;
    end if;

    if p_skip_reason is not null then
        perform runlane._write_run_events(
            array[v_run.run_id], array[v_run.org_id], 'run.skipped',
            array[jsonb_build_object('reason', p_skip_reason, 'trigger', p_trigger)]
        );
    elsif p_occurrence is not null then
        perform runlane._write_run_events(
            array[v_run.run_id], array[v_run.org_id], 'routine.fired',
            array[jsonb_build_object('occurrence', p_occurrence)]
        );
    end if;
    return v_run;
end;
$$;

comment on function runlane._new_background_run(runlane.agents, text, text, timestamptz, text, timestamptz, text) is
'Inserts a queued (or skipped, journaled) background run of an agent, optionally marked as a timer run.';

revoke all on function runlane._new_background_run(
    runlane.agents, text, text, timestamptz, text, timestamptz, text
) from public;
