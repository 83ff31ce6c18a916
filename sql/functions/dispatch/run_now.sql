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
-- another organization's agent when the login is scoped to one (runlane._api_org).
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
        case when runlane._lock_agent(v_agent.agent_id, v_agent.org_id) then 'already_running' end,
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

-- run_now (keyed form): the "Run now" button, safe to retry.
--
-- Guarantees:
-- * The first call with a key for an agent does exactly what run_now(agent) does and
--   stores the row it returns (a queued manual run, or a 'skipped' already_running run;
--   prompt always NULL) under the key, in the same transaction. A later call with the
--   same key returns that same row, as it was then, and creates nothing, also when both
--   calls race: the key row is inserted first (runlane._claim_idempotency_key), so the
--   second caller waits for the first to commit (at most lock_timeout, then 55P03).
--   The replayed row is the first answer, not the run's state now (see run_status).
-- * A gate refusal (RL002-RL005) or any other error of the first call rolls back with
--   its key: nothing is stored, so a retry with the key tries again and may succeed once
--   the gate opens.
-- * Errors: RL010 the key was already used for a submit_message; RL008 unknown agent
--   (also another organization's for a scoped login, checked before any key is read);
--   22004 a null key (the unkeyed form is run_now(agent)); 22023 a blank key or one over
--   256 characters; RL002-RL005 as run_now(agent).
-- * Keys are kept as long as the run they name (deleted with it, by purge).
create or replace function runlane.run_now(p_agent_id text, p_idempotency_key text)
returns runlane.runs
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_prev jsonb;
    v_run runlane.runs;
begin
    -- GUARD: the key (and the agent, its scope) first; an earlier call's answer is
    -- returned as it was.
    v_prev := runlane._claim_idempotency_key(
        p_agent_id, p_idempotency_key, 'run_now', sha256(convert_to('[]', 'UTF8'))
    );
    if v_prev is not null then
        return jsonb_populate_record(null::runlane.runs, v_prev -> 'response');
    end if;

    v_run := runlane.run_now(p_agent_id);  -- gates, skip when busy; prompt already NULL

    if runlane._rows_name_their_org() then
        -- (the run's organization, the agent's: on Citus the statement reaches its node)
        update runlane.idempotency_keys as k
        set run_id = v_run.run_id, disposition = v_run.state, response = to_jsonb(v_run)
        where k.agent_id = run_now.p_agent_id
          and k.idempotency_key = run_now.p_idempotency_key
          and k.org_id = v_run.org_id;
    else
        update runlane.idempotency_keys as k
        set run_id = v_run.run_id, disposition = v_run.state, response = to_jsonb(v_run)
        where k.agent_id = run_now.p_agent_id and k.idempotency_key = run_now.p_idempotency_key;
    end if;

    return v_run;
end;
$$;

comment on function runlane.run_now(text, text) is
'run_now with an idempotency key: a retry with the same key returns the first call''s row and '
'creates nothing; a gate refusal stores nothing; RL010 the key was used for another request.';

revoke all on function runlane.run_now(text, text) from public;
grant execute on function runlane.run_now(text, text) to runlane_api;
