-- org_status: background capacity per organization, for `runlane status`.
--
-- Guarantees: one row per organization, ordered by org_id: its running and queued
-- background runs against its agent_max_concurrency (the cap claim_runs enforces;
-- interactive runs never count against it). Read-only; counts only. A login scoped to an
-- organization (runlane._api_org) sees that organization's row only.
create or replace function runlane.org_status()
returns table (org_id text, running_background int, queued_background int, agent_max_concurrency int)
language sql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
    select
        s.org_id,
        (
            select count(*)::int from runlane.runs as r
            where r.org_id = s.org_id and r.lane = 'background' and r.state = 'running'
        ),
        (
            select count(*)::int from runlane.runs as r
            where r.org_id = s.org_id and r.lane = 'background' and r.state = 'queued'
        ),
        s.agent_max_concurrency
    from runlane.platform_settings as s
    cross join (select runlane._api_org() as org_id) as scope
    where scope.org_id is null or s.org_id = scope.org_id
    order by s.org_id;
$$;

comment on function runlane.org_status() is
'Per organization: running and queued background runs against agent_max_concurrency.';

revoke all on function runlane.org_status() from public;
grant execute on function runlane.org_status() to runlane_worker, runlane_api;
