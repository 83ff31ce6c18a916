-- _tick_failed: what tick does for an agent whose own step failed (its work already
-- rolled back), so that one bad row fails only itself, visibly.
--
-- Guarantees: inserts a finished 'skipped' background run of the agent with reason
-- tick_failed (trigger scheduled, no timer marker, so it cannot collide with the
-- occurrence that failed), journaled as run.skipped with {reason, trigger, sqlstate,
-- occurrence = the next_run_at that failed}; then advances the agent's next_run_at to
-- the first slot after p_now, so the next tick does not fail on it again. When even that
-- slot cannot be computed (a stored schedule that no longer parses), next_run_at is
-- cleared and the journal row says so (schedule_stopped): the schedule is set again by
-- the owner, as after any gate change. Never raises for the agent's data; returns the
-- skipped run.
create or replace function runlane._tick_failed(
    p_agent runlane.agents,
    p_now timestamptz,
    p_sqlstate text
)
returns runlane.runs
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_run runlane.runs;
    v_next timestamptz;
    v_stopped boolean := false;
begin
    begin
        v_next := runlane._next_slot(
            runlane.parse_schedule((p_agent).schedule),
            runlane._agent_timezone((p_agent).owner_id, (p_agent).org_id),
            p_now,
            (p_agent).schedule_anchor
        );
    exception when others then
        v_next := null;
        v_stopped := true;
    end;

    v_run := runlane._new_background_run(
        p_agent, 'scheduled', (p_agent).prompt, null, 'tick_failed', null, null
    );
    update runlane.run_events as e
    set detail = e.detail || jsonb_build_object(
        'sqlstate', p_sqlstate,
        'occurrence', (p_agent).next_run_at,
        'schedule_stopped', v_stopped
    )
    where e.run_id = v_run.run_id and e.event = 'run.skipped';

    update runlane.agents as a
    set next_run_at = v_next
    where a.agent_id = (p_agent).agent_id;
    return v_run;
end;
$$;

comment on function runlane._tick_failed(runlane.agents, timestamptz, text) is
'tick''s answer to one agent''s failed step: a journaled skipped run (tick_failed) and next_run_at '
'advanced past p_now (cleared when no slot can be computed).';

revoke all on function runlane._tick_failed(runlane.agents, timestamptz, text) from public;
