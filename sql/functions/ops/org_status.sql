-- org_status: background capacity per organization, for `runlane status`.
--
-- Guarantees: one row per organization, ordered by org_id: its running and queued
-- background runs against its agent_max_concurrency (the cap claim_runs enforces;
-- interactive runs never count against it). Read-only; counts only. A login scoped to an
-- organization (runlane._api_org) sees that organization's row only. One pass over the
-- unfinished runs (runs_unfinished_agent_idx), not one scan per organization.
create or replace function runlane.org_status()
returns table (org_id text, running_background int, queued_background int, agent_max_concurrency int)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    -- (a value, not a statement's: a scoped login's counts then name its organization,
    -- on Citus its node alone)
    v_org text := runlane._api_org();
begin
    return query
    with counts as (
        select
            r.org_id,
            count(*) filter (where r.state = 'running')::int as running,
            count(*) filter (where r.state = 'queued')::int as queued
        from runlane.runs as r
        where r.state in ('queued', 'running') and r.lane = 'background'
          and (v_org is null or r.org_id = v_org)
        group by r.org_id
    )
    select
        s.org_id,
        coalesce(c.running, 0),
        coalesce(c.queued, 0),
        s.agent_max_concurrency
    from runlane.platform_settings as s
    left join counts as c on c.org_id = s.org_id
    where v_org is null or s.org_id = v_org
    order by s.org_id;
end;
$$;

comment on function runlane.org_status() is
'Per organization: running and queued background runs against agent_max_concurrency.';

revoke all on function runlane.org_status() from public;
grant execute on function runlane.org_status() to runlane_worker, runlane_api;
