-- run_timing: the run-level timing measurements the requirements define (pre-run wait,
-- queue wait, first response, total, execution wall).
--
-- Guarantees:
-- * Durations are integer milliseconds (bigint, rounded) between persisted timestamps:
--     run.pre_run_wait_ms    origin -> created_at
--     run.queue_wait_ms      created_at -> first_started_at
--     run.first_response_ms  origin -> first_response_at
--     run.total_ms           origin -> finished_at
--     run.execution_wall_ms  first_started_at -> finished_at
--   The origin is the created_at of the run's source message, or the run's own
--   created_at when it has none. A duration whose timestamp is missing is ABSENT from
--   the object, never zero.
-- * Also run.id, run.lane, run.trigger, run.attempt (= attempts) and, once the state is
--   terminal (succeeded, failed, canceled, skipped), run.outcome (= state).
-- * Nothing else: no message text, prompt, model, agent, owner or thread ids.
-- * RL008 for an unknown run (or another organization's, for a login scoped to one).
--   Reads only; safe for the api and the worker roles.
create or replace function runlane.run_timing(p_run_id bigint)
returns jsonb
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
    v_run runlane.runs;
    v_origin timestamptz;
begin
    if p_run_id is null then
        raise exception 'run id is required'
            using errcode = '22004';
    end if;

    -- (a login held to one organization, or a session naming one, reads by the whole key:
    -- on Citus one node; the message then by the run's organization)
    if v_scope is null then
        select r.* into v_run
        from runlane.runs as r
        where r.run_id = run_timing.p_run_id;
    else
        select r.* into v_run
        from runlane.runs as r
        where r.run_id = run_timing.p_run_id and r.org_id = v_scope;
    end if;

    if not found then
        raise exception 'unknown run %', p_run_id
            using errcode = 'RL008';
    end if;

    if v_run.source_message_id is not null then
        select m.created_at into v_origin
        from runlane.messages as m
        where m.message_id = v_run.source_message_id and m.org_id = v_run.org_id;
    end if;

    -- The object itself is built by runlane._timing_of (shared with finish_runs).
    return runlane._timing_of(v_run, coalesce(v_origin, v_run.created_at));
end;
$$;

comment on function runlane.run_timing(bigint) is
'Run-level timing: pre_run_wait, queue_wait, first_response, total and execution_wall '
'in ms, absent when a timestamp is missing; plus id, lane, trigger, attempt and the terminal '
'outcome. No text or identifiers. RL008 for an unknown run.';

revoke all on function runlane.run_timing(bigint) from public;
grant execute on function runlane.run_timing(bigint) to runlane_api, runlane_worker;
