-- agent_journal: an agent's runs, skips and their reasons, newest first, for
-- `runlane journal AGENT`.
--
-- Guarantees: RL008 for an unknown agent (or another organization's, for a login scoped to
-- one: runlane._api_org). Otherwise at most p_limit of the agent's runs
-- (every lane, every state, skipped ones included), newest first (created_at, run_id):
-- lane, trigger, state, reason, attempts, the routine occurrence of timer runs (and the
-- zone it was computed in), how many ticks were coalesced into the run
-- (routine.coalesced journal rows), and its first-response and total ms as run_timing
-- reports them (absent timestamps give NULL, never zero). No message or prompt text.
-- The runs are read through runlane._agent_runs_newest_first (at most p_limit index
-- entries from each of its sources, never the agent's whole history).
create or replace function runlane.agent_journal(p_agent_id text, p_limit int default 50)
returns table (
    run_id bigint,
    created_at timestamptz,
    lane text,
    trigger text,
    state text,
    reason text,
    attempts int,
    occurrence timestamptz,
    occurrence_timezone text,
    coalesced int,
    first_response_ms bigint,
    total_ms bigint
)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
    v_org text;  -- the agent's, on Citus
    v_run runlane.runs;
    v_origin timestamptz;
begin
    if p_agent_id is null then
        raise exception 'agent id is required' using errcode = '22004';
    end if;
    if p_limit is null or p_limit < 1 then
        raise exception 'journal limit must be at least 1, not %', coalesce(p_limit::text, 'null')
            using errcode = '22023';
    end if;
    if not exists (
        select 1 from runlane.agents as a
        where a.agent_id = agent_journal.p_agent_id and (v_scope is null or a.org_id = v_scope)
    ) then
        raise exception 'unknown agent %', runlane._quote_for_error(p_agent_id) using errcode = 'RL008';
    end if;

    -- On a schema Citus distributes, run by run, each read naming the organization (one
    -- node): Citus plans neither the inlined helper nor a per-run subquery beside it.
    if runlane._citus_distributed('runlane.runs') then
        v_org := runlane._agent_org(p_agent_id);
        for v_run in
            select * from runlane._agent_runs_newest_first_of_org(p_agent_id, v_org, p_limit)
        loop
            select count(*)::int into coalesced
            from runlane.run_events as e
            where e.run_id = v_run.run_id and e.org_id = v_org and e.event = 'routine.coalesced';
            select m.created_at into v_origin
            from runlane.messages as m
            where m.message_id = v_run.source_message_id and m.org_id = v_org;
            v_origin := coalesce(v_origin, v_run.created_at);
            run_id := v_run.run_id;
            created_at := v_run.created_at;
            lane := v_run.lane;
            trigger := v_run.trigger;
            state := v_run.state;
            reason := v_run.reason;
            attempts := v_run.attempts;
            occurrence := v_run.timer_occurrence;
            occurrence_timezone := v_run.timer_timezone;
            first_response_ms := runlane._ms_between(v_origin, v_run.first_response_at);
            total_ms := runlane._ms_between(v_origin, v_run.finished_at);
            return next;
        end loop;
        return;
    end if;

    return query
    select
        r.run_id,
        r.created_at,
        r.lane,
        r.trigger,
        r.state,
        r.reason,
        r.attempts,
        r.timer_occurrence,
        r.timer_timezone,
        (
            select count(*)::int from runlane.run_events as e
            where e.run_id = r.run_id and e.event = 'routine.coalesced'
        ),
        runlane._ms_between(coalesce(m.created_at, r.created_at), r.first_response_at),
        runlane._ms_between(coalesce(m.created_at, r.created_at), r.finished_at)
    from runlane._agent_runs_newest_first(agent_journal.p_agent_id, p_limit) as r
    left join runlane.messages as m on m.message_id = r.source_message_id
    order by r.created_at desc, r.run_id desc;
end;
$$;

comment on function runlane.agent_journal(text, int) is
'An agent''s runs newest first: lane, trigger, state, reason, attempts, occurrence, coalesced ticks, '
'first response and total ms. RL008 for an unknown agent.';

revoke all on function runlane.agent_journal(text, int) from public;
grant execute on function runlane.agent_journal(text, int) to runlane_worker, runlane_api;
