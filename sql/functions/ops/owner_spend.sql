-- owner_spend: each agent owner's spend this week against the organization's budget, for
-- the dashboard's organizations page.
--
-- Guarantees: one row per user who owns at least one agent, ordered by org_id, owner_id:
-- how many agents they own, weekly_spend(owner, p_now) (the week of the owner's own zone,
-- runlane.weekly_spend's rule), the organization's agent_weekly_budget (NULL: unlimited)
-- and exhausted, the gate claim_runs applies (runlane._budget_exhausted: spend >= budget;
-- false when unlimited). A login scoped to an organization (runlane._api_org) sees that
-- organization's owners only. 22004 for a null instant, 22023 for an infinite one.
-- Read-only; ids and amounts only.
create or replace function runlane.owner_spend(p_now timestamptz default now())
returns table (
    org_id text,
    owner_id text,
    agents int,
    weekly_spend numeric,
    weekly_budget numeric,
    exhausted boolean
)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_org text := runlane._api_org();  -- a scoped login sees its organization's owners only
    v_orgs text[];
    v_owners text[];
    v_agents int[];
    v_budgets numeric[];
begin
    if p_now is null then
        raise exception 'owner_spend needs an instant' using errcode = '22004';
    end if;
    perform runlane._check_instant('now', p_now);

    -- STEP: the owners, then each one's spend: weekly_spend reads tables of its own, which
    -- Citus runs from no statement sent to a node.
    select
        coalesce(array_agg(o.org_id order by o.org_id, o.owner_id), '{}'),
        coalesce(array_agg(o.owner_id order by o.org_id, o.owner_id), '{}'),
        coalesce(array_agg(o.agents order by o.org_id, o.owner_id), '{}'),
        coalesce(array_agg(o.budget order by o.org_id, o.owner_id), '{}')
    into v_orgs, v_owners, v_agents, v_budgets
    from (
        select g.org_id, g.owner_id, g.agents, s.agent_weekly_budget as budget
        from (
            select a.org_id, a.owner_id, count(*)::int as agents
            from runlane.agents as a
            where v_org is null or a.org_id = v_org
            group by a.org_id, a.owner_id
        ) as g
        join runlane.platform_settings as s on s.org_id = g.org_id
        -- (named on both sides: on Citus the statement is then one node's)
        where v_org is null or s.org_id = v_org
    ) as o;

    return query
    select
        o.org_id,
        o.owner_id,
        o.agents,
        spend.amount,
        o.budget,
        o.budget is not null and spend.amount >= o.budget
    from unnest(v_orgs, v_owners, v_agents, v_budgets) with ordinality
        as o (org_id, owner_id, agents, budget, position)
    cross join lateral (select runlane.weekly_spend(o.owner_id, p_now) as amount) as spend
    order by o.position;
end;
$$;

comment on function runlane.owner_spend(timestamptz) is
'Per agent owner: agents owned, this week''s spend (weekly_spend), the organization''s weekly '
'budget and whether it is exhausted.';

revoke all on function runlane.owner_spend(timestamptz) from public;
grant execute on function runlane.owner_spend(timestamptz) to runlane_worker, runlane_api;
