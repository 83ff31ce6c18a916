-- _agent_runs_newest_first: an agent's runs, newest first, read from its indexes only.
--
-- Guarantees: the first p_limit runs of p_agent_id (any lane, any state) in the order
-- (created_at desc, run_id desc), exactly what "order by created_at desc, run_id desc
-- limit p_limit" over all its runs returns. Reads at most p_limit index entries from each
-- of three ordered sources and merges them (no agent's history is read and sorted):
-- finished runs from runs_agent_history_idx, unfinished ones per lane from
-- runs_unfinished_agent_idx (migration 0017: a claim writes into neither history index).
-- Callers check scope; no role may call it.
--
-- No pinned search_path, like runlane._timing_of and for the same reason: a SQL function
-- with a SET clause is never inlined, and it runs once per agent (agent_page,
-- agent_last_runs): called, agent_last_runs over 5,000 agents takes 135-160 ms, inlined
-- 70-100 ms (bench/dashboard_queries.py's data). Inlined, its query is
-- planned into its caller's statement under the caller's pinned search_path; every name
-- in it is schema-qualified, and only runlane's own, pinned functions may execute it
-- (tests/sql/security/test_roles__least_privilege.sql).
create or replace function runlane._agent_runs_newest_first(p_agent_id text, p_limit int)
returns setof runlane.runs
language sql
stable
as $$
    select u.*
    from (
        (
            select r.*
            from runlane.runs as r
            where r.agent_id = p_agent_id and r.state not in ('queued', 'running')
            order by r.created_at desc, r.run_id desc
            limit p_limit
        )
        union all
        (
            -- per lane, so that each is one backward range of runs_unfinished_agent_idx
            select r.*
            from unnest(array['interactive', 'background']) as l (lane)
            cross join lateral (
                select r.*
                from runlane.runs as r
                where
                    r.agent_id = p_agent_id
                    and r.lane = l.lane
                    and r.state in ('queued', 'running')
                order by r.created_at desc, r.run_id desc
                limit p_limit
            ) as r
        )
    ) as u
    order by u.created_at desc, u.run_id desc
    limit p_limit;
$$;

comment on function runlane._agent_runs_newest_first(text, int) is
'An agent''s first p_limit runs by (created_at, run_id) descending, merged from its history and '
'unfinished-run indexes.';

revoke all on function runlane._agent_runs_newest_first(text, int) from public;
