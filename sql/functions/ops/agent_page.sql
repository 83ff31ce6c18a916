-- agent_page: one page of the dashboard's agents list, filtered, in agent_id order.
--
-- Guarantees: at most p_limit agents (1 .. 1000), ordered by agent_id, starting at the
-- first whose agent_id >= p_from (NULL: the first agent) - a keyset page: the page after
-- one that ended at agent X starts at the agent after X (ask for p_limit + 1 rows and
-- start the next page at the extra one). p_match (NULL or '': every agent) keeps the
-- agents whose agent_id, org_id or schedule contains it, case-insensitively; p_status
-- (NULL or '': every agent) keeps those of that status. Each row holds what
-- agent_schedules says of the agent (schedule, timezone, status, next run as an instant
-- and as local wall time: the same rules) and what agent_last_runs says of its newest run
-- (last_run_id .. last_reason, NULL without runs). 22004 for a NULL p_limit, 22023 for
-- a p_limit outside 1 .. 1000 or an unknown status. A login scoped to an organization
-- (runlane._api_org) sees that organization's agents only. Read-only; ids, states and
-- times, no prompt.
--
-- Cost: bounded by the page, not by the number of agents: the agents are walked in
-- agents_pkey order from p_from and the page's agents only are given a timezone and a
-- newest run (runlane._agent_runs_newest_first: a few index probes each); a filter that matches
-- few agents reads at most every agent's row once (5,000 agents: agent_schedules and
-- agent_last_runs for all of them took 51 ms, bench/dashboard_queries.py).
create or replace function runlane.agent_page(
    p_from text default null,
    p_limit int default 100,
    p_match text default null,
    p_status text default null
) returns table (
    agent_id text,
    org_id text,
    schedule text,
    timezone text,
    status text,
    next_run_at timestamptz,
    next_run_local text,
    last_run_id bigint,
    last_created_at timestamptz,
    last_lane text,
    last_trigger text,
    last_state text,
    last_reason text
)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_org text := runlane._api_org();  -- once per call, not once per agent
    v_match text := nullif(lower(p_match), '');
    v_status text := nullif(p_status, '');
    -- the page's agents, in agent_id order
    v_ids text[];
    v_orgs text[];
    v_owners text[];
    v_schedules text[];
    v_nexts timestamptz[];
    v_statuses text[];
begin
    if p_limit is null then
        raise exception 'agent_page needs a page size' using errcode = '22004';
    end if;
    if p_limit < 1 or p_limit > 1000 then
        raise exception 'the page size must be between 1 and 1000, got %', p_limit
            using errcode = '22023';
    end if;
    if v_status is not null
       and v_status not in ('scheduled', 'manual', 'off', 'locked', 'no_model') then
        raise exception 'unknown agent status %', p_status
            using errcode = '22023',
                  hint = 'One of scheduled, manual, off, locked, no_model.';
    end if;

    -- STEP: the page's agents.
    select
        coalesce(array_agg(p.agent_id order by p.agent_id), '{}'),
        coalesce(array_agg(p.org_id order by p.agent_id), '{}'),
        coalesce(array_agg(p.owner_id order by p.agent_id), '{}'),
        coalesce(array_agg(p.schedule order by p.agent_id), '{}'),
        coalesce(array_agg(p.next_run_at order by p.agent_id), '{}'),
        coalesce(array_agg(p.status order by p.agent_id), '{}')
    into v_ids, v_orgs, v_owners, v_schedules, v_nexts, v_statuses
    from (
        select a.agent_id, a.org_id, a.owner_id, a.schedule, a.next_run_at, s.status
        from runlane.agents as a
        cross join lateral (
            -- agent_schedules' rule, word for word (pinned by a pgTAP test)
            select case
                when not a.enabled then 'off'
                when a.admin_locked then 'locked'
                when coalesce(a.model, '') = '' then 'no_model'
                when a.schedule = '' then 'manual'
                else 'scheduled'
            end as status
        ) as s
        where (v_org is null or a.org_id = v_org)
          and (p_from is null or a.agent_id >= p_from)
          and (
              v_match is null
              or strpos(lower(a.agent_id), v_match) > 0
              or strpos(lower(a.org_id), v_match) > 0
              or strpos(lower(a.schedule), v_match) > 0
          )
          and (v_status is null or s.status = v_status)
        order by a.agent_id
        limit p_limit
    ) as p;

    -- STEP: each one's zone and newest run. On a schema Citus distributes, agent by agent,
    -- each read naming its organization (one node): Citus plans no inlined helper's query,
    -- and calls no function that reads tables from a statement it sends to a node.
    if runlane._citus_distributed('runlane.runs') then
        for v_i in 1 .. cardinality(v_ids) loop
            agent_id := v_ids[v_i];
            org_id := v_orgs[v_i];
            schedule := v_schedules[v_i];
            timezone := runlane._agent_timezone(v_owners[v_i], v_orgs[v_i]);
            status := v_statuses[v_i];
            next_run_at := v_nexts[v_i];
            next_run_local := to_char(v_nexts[v_i] at time zone timezone, 'YYYY-MM-DD HH24:MI');
            last_run_id := null;
            last_created_at := null;
            last_lane := null;
            last_trigger := null;
            last_state := null;
            last_reason := null;
            select r.run_id, r.created_at, r.lane, r.trigger, r.state, r.reason
            into last_run_id, last_created_at, last_lane, last_trigger, last_state, last_reason
            from runlane._agent_runs_newest_first_of_org(v_ids[v_i], v_orgs[v_i], 1) as r;
            return next;
        end loop;
        return;
    end if;

    return query
    select
        p.agent_id,
        p.org_id,
        p.schedule,
        z.tz,
        p.status,
        p.next_run_at,
        to_char(p.next_run_at at time zone z.tz, 'YYYY-MM-DD HH24:MI'),
        r.run_id,
        r.created_at,
        r.lane,
        r.trigger,
        r.state,
        r.reason
    from unnest(v_ids, v_orgs, v_owners, v_schedules, v_nexts, v_statuses) with ordinality
        as p (agent_id, org_id, owner_id, schedule, next_run_at, status, position)
    cross join lateral (
        select runlane._agent_timezone(p.owner_id, p.org_id) as tz
    ) as z
    left join lateral runlane._agent_runs_newest_first(p.agent_id, 1) as r on true
    order by p.position;
end;
$$;

comment on function runlane.agent_page(text, int, text, text) is
'One page of agents in agent_id order from p_from, filtered by text and status: schedule, '
'timezone, status, next run (instant and local time) and the newest run.';

revoke all on function runlane.agent_page(text, int, text, text) from public;
grant execute on function runlane.agent_page(text, int, text, text) to runlane_worker, runlane_api;
