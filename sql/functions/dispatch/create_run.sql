-- create_run: a run created by a scheduled or maintenance job or a reaction, on the same
-- direct dispatch path as every other run.
--
-- Guarantees: the gates of run_now raise the same way (RL008, RL002, RL003, RL004) and
-- write nothing; so does a prompt over 1 MB (22023). Under the agent's lock: an
-- unfinished background run -> a 'skipped' run (reason already_running); the owner's
-- weekly budget exhausted -> a 'skipped' run (reason budget_exhausted); both journaled
-- as run.skipped. Else a queued background run
-- with trigger p_trigger, prompt p_prompt (default: the agent's) and wake time p_wake_at.
-- These runs are never marked as timer runs, so they are never coalesced or cancelled as
-- redundant. Returns the run id. Does not notify: the caller publishes after commit.
create or replace function runlane.create_run(
    p_agent_id text,
    p_trigger text,
    p_prompt text default null,
    p_wake_at timestamptz default null
)
returns bigint
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_agent runlane.agents;
    v_reason text;
begin
    if p_trigger is null or p_trigger not in ('manual', 'scheduled', 'reaction', 'retry', 'test') then
        raise exception 'a background run''s trigger is manual, scheduled, reaction, retry or test, not %',
            runlane._quote_for_error(p_trigger)
            using errcode = '22023';
    end if;
    -- an infinite wake time would park the run for ever and lock the agent out
    if p_wake_at is not null and not isfinite(p_wake_at) then
        raise exception 'a run''s wake time must be a finite instant, not %', p_wake_at
            using errcode = '22023';
    end if;
    perform runlane._check_wake_at(p_wake_at);
    perform runlane._check_body('prompt', p_prompt);
    v_agent := runlane._agent_gates(p_agent_id, false);

    if runlane._lock_agent(v_agent.agent_id, v_agent.org_id) then
        v_reason := 'already_running';
    elsif runlane._budget_exhausted(v_agent.owner_id, v_agent.org_id, now()) then
        v_reason := 'budget_exhausted';
    end if;

    return (runlane._new_background_run(
        v_agent, p_trigger, coalesce(p_prompt, v_agent.prompt), p_wake_at, v_reason, null, null
    )).run_id;
end;
$$;

comment on function runlane.create_run(text, text, text, timestamptz) is
'Run for a scheduled/maintenance job or reaction: gates raise; overlap or budget -> skipped row; '
'else a queued, unmarked background run. Returns its id.';

revoke all on function runlane.create_run(text, text, text, timestamptz) from public;
grant execute on function runlane.create_run(text, text, text, timestamptz) to runlane_api, runlane_worker;
