-- agent_schedules: every agent's schedule and next run, in the agent's own timezone.
--
-- Guarantees: one row per agent, ordered by next run (unscheduled last), then agent id.
-- timezone is the zone the schedule resolves in (owner's, else organization's, else
-- UTC); next_run_at is the instant (UTC), next_run_local the same instant as wall time
-- in that zone ('YYYY-MM-DD HH24:MI'), NULL when nothing is scheduled. status says why
-- an agent does not run on schedule: 'off' (switched off by its owner), 'locked' (by an
-- admin), 'no_model', 'manual' (no schedule), else 'scheduled'. Read-only. A login scoped
-- to an organization (runlane._api_org) sees that organization's agents only; the scope is
-- read once per call (a materialized CTE: inlined, the planner called _api_org per agent,
-- 180 ms for 5,000 agents), and each (owner, organization) pair's zone once.
create or replace function runlane.agent_schedules()
returns table (
    agent_id text,
    org_id text,
    schedule text,
    timezone text,
    status text,
    next_run_at timestamptz,
    next_run_local text
)
language sql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
    with scope as materialized (
        select runlane._api_org() as org_id
    ),
    mine as (
        select a.*
        from runlane.agents as a
        cross join scope
        where scope.org_id is null or a.org_id = scope.org_id
    ),
    zones as materialized (
        select p.owner_id, p.org_id, runlane._agent_timezone(p.owner_id, p.org_id) as tz
        from (select distinct m.owner_id, m.org_id from mine as m) as p
    )
    select
        a.agent_id,
        a.org_id,
        a.schedule,
        z.tz,
        case
            when not a.enabled then 'off'
            when a.admin_locked then 'locked'
            when coalesce(a.model, '') = '' then 'no_model'
            when a.schedule = '' then 'manual'
            else 'scheduled'
        end,
        a.next_run_at,
        to_char(a.next_run_at at time zone z.tz, 'YYYY-MM-DD HH24:MI')
    from mine as a
    join zones as z on z.owner_id = a.owner_id and z.org_id = a.org_id
    order by a.next_run_at nulls last, a.agent_id;
$$;

comment on function runlane.agent_schedules() is
'Per agent: schedule, its timezone, status (scheduled, manual, off, locked, no_model) and the '
'next run as an instant and as wall time in that zone.';

revoke all on function runlane.agent_schedules() from public;
grant execute on function runlane.agent_schedules() to runlane_worker, runlane_api;
