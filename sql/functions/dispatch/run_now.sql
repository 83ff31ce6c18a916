-- run_now: the manual "Run now" button.
--
-- Guarantees: raises, writing nothing, when a gate is closed: RL008 unknown agent, RL002
-- switched off, RL003 admin locked, RL004 no model, RL005 weekly budget exhausted.
-- Otherwise, under the agent's lock: when the agent has an unfinished background run,
-- inserts and returns a 'skipped' run (reason already_running, trigger manual, finished,
-- journaled as run.skipped); else inserts and returns a queued background run with
-- trigger manual and the agent's prompt, thread and model. Manual runs carry no timer
-- marker, so they are never coalesced. It does not notify: the caller publishes the new
-- run with runlane.publish_run after commit.
-- The returned row's prompt is always NULL (the run itself keeps the agent's prompt):
-- runlane_api sees a run's state, never the agent's instructions. RL008 also for
-- another organization's agent when the login is scoped to one (runlane._in_scope).
create or replace function runlane.run_now(p_agent_id text)
returns runlane.runs
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_agent runlane.agents := runlane._agent_gates(p_agent_id, true);
    v_run runlane.runs;
begin
    v_run := runlane._new_background_run(
        v_agent, 'manual', v_agent.prompt, null,
        case when runlane._lock_agent(v_agent.agent_id) then 'already_running' end,
        null, null
    );
    -- The prompt is the agent's instructions, for its worker (claim_runs), not for the
    -- application that pressed the button: the returned row never carries it.
    v_run.prompt := null;
    return v_run;
end;
$$;

comment on function runlane.run_now(text) is
'Manual run: RL002-RL005 when a gate is closed; a skipped already_running row when the agent is busy; '
'else a queued background run (trigger manual). The returned row''s prompt is always NULL.';

revoke all on function runlane.run_now(text) from public;
grant execute on function runlane.run_now(text) to runlane_api;
