-- agent_schedules: every agent's schedule and next run, in the agent's own timezone.
--
-- Guarantees: one row per agent, ordered by next run (unscheduled last), then agent id.
-- timezone is the zone the schedule resolves in (owner's, else organization's, else
-- UTC); next_run_at is the instant (UTC), next_run_local the same instant as wall time
-- in that zone ('YYYY-MM-DD HH24:MI'), NULL when nothing is scheduled. status says why
-- an agent does not run on schedule: 'off' (switched off by its owner), 'locked' (by an
-- admin), 'no_model', 'manual' (no schedule), else 'scheduled'. Read-only. A login scoped
-- to an organization (runlane._api_org) sees that organization's agents only; the scope is
-- read once per call (inlined in a statement, the planner called _api_org per agent, 180
-- ms for 5,000 agents), and each (owner, organization) pair's zone once.
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
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    -- (a value, not a statement's: a scoped login's reads then name its organization, on
    -- Citus its node alone)
    v_org text := runlane._api_org();
    v_owners text[];  -- the agents' owners with their organizations, and each one's zone
    v_owner_orgs text[];
    v_zones text[];
begin
    -- STEP: each owner's zone, once per owner (runlane._agent_timezone reads tables of its
    -- own: called from no statement Citus sends to a node).
    select coalesce(array_agg(p.owner_id), '{}'), coalesce(array_agg(p.org_id), '{}')
    into v_owners, v_owner_orgs
    from (
        select distinct a.owner_id, a.org_id
        from runlane.agents as a
        where v_org is null or a.org_id = v_org
    ) as p;
    v_zones := array(
        select runlane._agent_timezone(o.owner_id, o.org_id)
        from unnest(v_owners, v_owner_orgs) with ordinality as o (owner_id, org_id, position)
        order by o.position
    );

    return query
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
    from runlane.agents as a
    join unnest(v_owners, v_owner_orgs, v_zones) as z (owner_id, org_id, tz)
        on z.owner_id = a.owner_id and z.org_id = a.org_id
    where v_org is null or a.org_id = v_org
    order by a.next_run_at nulls last, a.agent_id;
end;
$$;

comment on function runlane.agent_schedules() is
'Per agent: schedule, its timezone, status (scheduled, manual, off, locked, no_model) and the '
'next run as an instant and as wall time in that zone.';

revoke all on function runlane.agent_schedules() from public;
grant execute on function runlane.agent_schedules() to runlane_worker, runlane_api;
