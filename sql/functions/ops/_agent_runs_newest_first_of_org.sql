-- _agent_runs_newest_first_of_org: runlane._agent_runs_newest_first, every read naming the
-- agent's organization, for a schema Citus distributes.
--
-- Guarantees: exactly the runs and order of runlane._agent_runs_newest_first(p_agent_id,
-- p_limit) when p_org_id is the agent's organization (none otherwise), read the same way
-- (at most p_limit index entries from each of its three sources). Each read names the
-- organization, so on Citus it is planned on, and sent to, its node alone.
--
-- Why a second copy of that query: Citus plans no SQL function's parameterized query, so
-- the callers use this PL/pgSQL form there; on plain PostgreSQL they keep the SQL form,
-- which the planner inlines into their statements (agent_last_runs over 5,000 agents:
-- 70-100 ms inlined, 135-160 ms called). A pgTAP test holds the two to the same answers.
-- Callers check scope; no role may call it.
create or replace function runlane._agent_runs_newest_first_of_org(
    p_agent_id text, p_org_id text, p_limit int
)
returns setof runlane.runs
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
begin
    return query
    select u.*
    from (
        (
            select r.*
            from runlane.runs as r
            where r.agent_id = p_agent_id and r.org_id = p_org_id
              and r.state not in ('queued', 'running')
            order by r.created_at desc, r.run_id desc
            limit p_limit
        )
        union all
        (
            select r.*
            from unnest(array['interactive', 'background']) as l (lane)
            cross join lateral (
                select r.*
                from runlane.runs as r
                where
                    r.agent_id = p_agent_id
                    and r.org_id = p_org_id
                    and r.lane = l.lane
                    and r.state in ('queued', 'running')
                order by r.created_at desc, r.run_id desc
                limit p_limit
            ) as r
        )
    ) as u
    order by u.created_at desc, u.run_id desc
    limit p_limit;
end;
$$;

comment on function runlane._agent_runs_newest_first_of_org(text, text, int) is
'_agent_runs_newest_first with every read naming the agent''s organization (Citus).';

revoke all on function runlane._agent_runs_newest_first_of_org(text, text, int) from public;
