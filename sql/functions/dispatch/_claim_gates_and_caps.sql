-- _claim_gates_and_caps: settles the runs claim_runs just locked whose budget gate or
-- organization's cap needs more than the locking statement reads.
--
-- Guarantees, for p_locked (locked background and chat runs, claim order):
-- * capped: the background runs beyond their organization's room within this claim
--   (p_bg_runs in claim order with p_bg_orgs and p_bg_rooms; only when p_room_exceeded),
--   and capped_orgs their organizations. They stay queued: the caller keeps the lock only.
-- * over_budget: of p_budget_runs (runs of organizations with a weekly budget) not capped, those
--   whose agent's owner has spent the budget (runlane.weekly_spend, once per owner).
-- * kept, in claim order, with their organizations (kept_orgs), background runs'
--   organizations (kept_bg_orgs), computers and fences: p_locked without capped and over_budget; null when
--   that is all of p_locked.
create or replace function runlane._claim_gates_and_caps(
    p_locked bigint[],
    p_budget_runs bigint[],
    p_room_exceeded boolean,
    p_bg_runs bigint[],
    p_bg_orgs text[],
    p_bg_rooms int[],
    out capped bigint[],
    out capped_orgs text[],
    out over_budget bigint[],
    out kept bigint[],
    out kept_orgs text[],
    out kept_bg_orgs text[],
    out kept_computers text[],
    out kept_fences bigint[]
)
language plpgsql
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_generic_plan
as $$
begin
    -- STEP: the runs beyond their organization's room, in claim order.
    capped := '{}';
    capped_orgs := '{}';
    if p_room_exceeded then
        select
            coalesce(array_agg(k.run_id) filter (where k.over), '{}'),
            coalesce(array_agg(distinct k.org_id) filter (where k.over), '{}')
        into capped, capped_orgs
        from (
            select
                m.run_id,
                m.org_id,
                row_number() over (partition by m.org_id order by m.position)
                > m.room as over
            from unnest(p_bg_runs, p_bg_orgs, p_bg_rooms)
                with ordinality as m (run_id, org_id, room, position)
        ) as k;
        p_budget_runs := array(
            select b.run_id from unnest(p_budget_runs) as b (run_id)
            where b.run_id <> all(capped)
        );
    end if;

    -- STEP: the budget, once per owner of the locked runs of budgeted organizations.
    over_budget := '{}';
    if cardinality(p_budget_runs) > 0 then
        with owners as (
            select a.owner_id, min(s.agent_weekly_budget) as budget
            from runlane.runs as r
            join runlane.agents as a on a.agent_id = r.agent_id
            join runlane.platform_settings as s on s.org_id = r.org_id
            where r.run_id = any(p_budget_runs)
            group by a.owner_id
        ),
        spent as materialized (
            select o.owner_id
            from owners as o
            where runlane.weekly_spend(o.owner_id, now()) >= o.budget
        )
        select coalesce(array_agg(r.run_id), '{}')
        into over_budget
        from runlane.runs as r
        join runlane.agents as a on a.agent_id = r.agent_id
        where r.run_id = any(p_budget_runs)
          and a.owner_id in (select p.owner_id from spent as p);
    end if;

    -- STEP: the runs kept (left null when every locked run is kept).
    if cardinality(capped) = 0 and cardinality(over_budget) = 0 then
        return;
    end if;
    select
        coalesce(array_agg(m.run_id order by m.position), '{}'),
        coalesce(array_agg(r.org_id) filter (where r.lane = 'background'), '{}'),
        coalesce(array_agg(r.computer_id) filter (where r.computer_id is not null), '{}'),
        coalesce(array_agg(r.org_id order by m.position), '{}'),
        coalesce(array_agg(r.fence order by m.position), '{}')
    into kept, kept_bg_orgs, kept_computers, kept_orgs, kept_fences
    from unnest(p_locked) with ordinality as m (run_id, position)
    join runlane.runs as r on r.run_id = m.run_id
    where m.run_id <> all(over_budget) and m.run_id <> all(capped);
end;
$$;

comment on function runlane._claim_gates_and_caps(
    bigint[], bigint[], boolean, bigint[], text[], int[]
) is
'claim_runs'' budget gate and cap within one claim: which locked runs are over their '
'organization''s room or their owner''s budget, and the runs kept.';

revoke all on function runlane._claim_gates_and_caps(
    bigint[], bigint[], boolean, bigint[], text[], int[]
) from public;
