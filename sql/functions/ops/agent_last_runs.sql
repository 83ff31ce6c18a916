-- agent_last_runs: each agent's newest run, for the dashboard's agents page.
--
-- Guarantees: one row per agent that has at least one run (any lane, any state, skipped
-- ones included), ordered by agent_id: the run newest by (created_at, run_id), as
-- agent_journal orders them, with its id, creation, lane, trigger, state and reason. An
-- agent without runs has no row. A few index probes per agent, never a scan of the run
-- history: runlane._agent_runs_newest_first takes the first entry of backward scans of
-- runs_agent_history_idx (agent_id, created_at, run_id, finished runs) and of
-- runs_unfinished_agent_idx per lane, which are this order exactly. A login scoped
-- to an organization (runlane._api_org) sees that organization's agents only.
-- Read-only; ids, states and times, no text.
create or replace function runlane.agent_last_runs()
returns table (
    agent_id text,
    run_id bigint,
    created_at timestamptz,
    lane text,
    trigger text,
    state text,
    reason text
)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_org text := runlane._api_org();  -- once per call, not once per agent
    v_agent record;
begin
    -- On a schema Citus distributes, agent by agent, each read naming its organization
    -- (one node): Citus plans no inlined helper's query beside the agents' read.
    if runlane._citus_distributed('runlane.runs') then
        for v_agent in
            select a.agent_id, a.org_id
            from runlane.agents as a
            where v_org is null or a.org_id = v_org
            order by a.agent_id
        loop
            return query
            select v_agent.agent_id, r.run_id, r.created_at, r.lane, r.trigger, r.state, r.reason
            from runlane._agent_runs_newest_first_of_org(v_agent.agent_id, v_agent.org_id, 1) as r;
        end loop;
        return;
    end if;

    return query
    select a.agent_id, r.run_id, r.created_at, r.lane, r.trigger, r.state, r.reason
    from runlane.agents as a
    cross join lateral runlane._agent_runs_newest_first(a.agent_id, 1) as r
    where v_org is null or a.org_id = v_org
    order by a.agent_id;
end;
$$;

comment on function runlane.agent_last_runs() is
'Per agent with runs: its newest run (id, created_at, lane, trigger, state, reason).';

revoke all on function runlane.agent_last_runs() from public;
grant execute on function runlane.agent_last_runs() to runlane_worker, runlane_api;
