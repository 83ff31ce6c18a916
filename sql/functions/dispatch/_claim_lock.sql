-- _claim_lock: claim_runs' locks on one read's candidates, in claim order, with the
-- per-worker bound, the gates and the caps.
--
-- Guarantees:
-- * With the bound (p_max_per_org), only each organization's first candidates up to its
--   room on this worker (the bound less its use in p_used_*) are tried: lock_candidates.
-- * Tried in order, FOR UPDATE SKIP LOCKED, until the page (p_limit, with locked) is
--   full: a row another claimer holds is skipped, a row claimed and committed since the
--   read is left out (queued, awake, its computer free of another run's live lease), as
--   are background runs of organizations in full_orgs.
-- * A background run's gates (its agent switched on, not admin-locked, with a model, its
--   owner within the weekly budget) and its organization's room under its cap (the cap
--   less p_busy_counts less what this claim locked of it) are read with the lock, by
--   primary key; runlane._claim_gates_and_caps settles those that fail. A gated run is
--   ended by runlane._skip_gated_runs and added to skipped; a run beyond its
--   organization's room stays queued (locks only) and its organization joins full_orgs.
--   Either way the claim locks on through the same candidates in their places.
-- * locked, locked_orgs, locked_fences (every kept run, its organization, its fence as
--   locked), orgs (organizations of kept background runs) and computers (of kept runs)
--   grow in claim order. taken counts the candidates this call used (kept, gated or
--   capped).
create or replace function runlane._claim_lock(
    p_limit int,
    p_candidates bigint[],
    p_candidate_orgs text[],
    p_max_per_org int,
    p_used_orgs text[],
    p_used_counts int[],
    p_busy_orgs text[],
    p_busy_counts int[],
    inout locked bigint[],
    inout locked_orgs text[],
    inout locked_fences bigint[],
    inout orgs text[],
    inout computers text[],
    inout full_orgs text[],
    inout skipped bigint[],
    out lock_candidates bigint[],
    out taken int
)
language plpgsql
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_generic_plan
as $$
declare
    v_more bigint[];
    v_more_orgs text[];
    v_more_all_orgs text[];
    v_more_fences bigint[];
    v_more_computers text[];
    v_more_bg_runs bigint[];
    v_more_bg_orgs text[];
    v_more_bg_rooms int[];
    v_room_exceeded boolean;
    v_gated bigint[];
    v_gate_reasons text[];
    v_budget_runs bigint[];
    v_capped bigint[];
    v_capped_orgs text[];
    v_settled record;
    v_lock_orgs text[];  -- lock_candidates' organizations
begin
    -- STEP: the bound: each organization's first candidates up to its room.
    lock_candidates := p_candidates;
    v_lock_orgs := p_candidate_orgs;
    if p_max_per_org is not null then
        select
            coalesce(array_agg(c.run_id order by c.position) filter (
                where c.org_rank
                    <= p_max_per_org - coalesce(p_used_counts[array_position(p_used_orgs, c.org_id)], 0)
            ), '{}'),
            coalesce(array_agg(c.org_id order by c.position) filter (
                where c.org_rank
                    <= p_max_per_org - coalesce(p_used_counts[array_position(p_used_orgs, c.org_id)], 0)
            ), '{}')
        into lock_candidates, v_lock_orgs
        from (
            select
                u.run_id,
                u.position,
                u.org_id,
                row_number() over (partition by u.org_id order by u.position) as org_rank
            from unnest(p_candidates, p_candidate_orgs) with ordinality as u (run_id, org_id, position)
        ) as c;
    end if;
    taken := 0;

    loop
        -- STEP: lock in claim order, with each background run's gate and room.
        select
            coalesce(array_agg(c.run_id order by c.position)
                filter (where c.gate is null or c.gate = 'budget'), '{}'),
            coalesce(array_agg(c.org_id)
                filter (where c.lane = 'background' and (c.gate is null or c.gate = 'budget')), '{}'),
            coalesce(array_agg(c.computer_id)
                filter (where c.computer_id is not null and (c.gate is null or c.gate = 'budget')), '{}'),
            coalesce(array_agg(c.run_id order by c.position)
                filter (where c.gate is not null and c.gate <> 'budget'), '{}'),
            coalesce(array_agg(c.gate order by c.position)
                filter (where c.gate is not null and c.gate <> 'budget'), '{}'),
            coalesce(array_agg(c.run_id) filter (where c.gate = 'budget'), '{}'),
            coalesce(array_agg(c.org_id order by c.position)
                filter (where c.gate is null or c.gate = 'budget'), '{}'),
            coalesce(array_agg(c.fence order by c.position)
                filter (where c.gate is null or c.gate = 'budget'), '{}'),
            -- (the background runs kept, with their organizations and rooms)
            coalesce(array_agg(c.run_id order by c.position)
                filter (where c.room is not null and (c.gate is null or c.gate = 'budget')), '{}'),
            coalesce(array_agg(c.org_id order by c.position)
                filter (where c.room is not null and (c.gate is null or c.gate = 'budget')), '{}'),
            coalesce(array_agg(c.room order by c.position)
                filter (where c.room is not null and (c.gate is null or c.gate = 'budget')), '{}'),
            -- (no organization can be over its room when the background runs kept are no
            -- more than the least room among their organizations)
            coalesce(
                count(*) filter (where c.room is not null and (c.gate is null or c.gate = 'budget'))
                > min(c.room) filter (where c.room is not null and (c.gate is null or c.gate = 'budget')),
                false
            )
        into v_more, v_more_orgs, v_more_computers, v_gated, v_gate_reasons, v_budget_runs,
             v_more_all_orgs, v_more_fences, v_more_bg_runs, v_more_bg_orgs, v_more_bg_rooms,
             v_room_exceeded
        from (
            select
                r.run_id,
                r.org_id,
                r.lane,
                r.computer_id,
                r.fence,
                w.position,
                g.gate,
                -- the organization's room for background runs (null for a chat run)
                case when g.cap is not null then
                    g.cap
                    - coalesce(p_busy_counts[array_position(p_busy_orgs, r.org_id)], 0)
                    - cardinality(array_positions(orgs, r.org_id))
                end as room
            -- (the whole primary key: one probe of runs_pkey, whatever else the planner sees)
            from unnest(lock_candidates, v_lock_orgs) with ordinality as w (run_id, org_id, position)
            join runlane.runs as r on r.run_id = w.run_id and r.org_id = w.org_id
            left join lateral (
                -- (r.lane first: an interactive run reads neither row)
                select
                    case
                        when not a.enabled then 'agent_off'
                        when a.admin_locked then 'agent_locked'
                        when coalesce(a.model, '') = '' then 'no_model'
                        when s.agent_weekly_budget is not null then 'budget'  -- checked after
                    end as gate,
                    s.agent_max_concurrency as cap
                from runlane.agents as a
                cross join runlane.platform_settings as s
                where r.lane = 'background' and a.agent_id = r.agent_id and s.org_id = r.org_id
                offset 0  -- (a subquery: pulled up, r.lane would be tested after the probes)
            ) as g on true
            where r.state = 'queued'
              and r.run_id <> all(locked)  -- (our own locks do not skip them)
              and not (r.lane = 'background' and r.org_id = any(full_orgs))
              and (r.wake_at is null or r.wake_at <= now())
              and (r.computer_id is null or not exists (
                  select 1
                  from runlane.computer_leases as cl
                  where cl.computer_id = r.computer_id
                    and cl.expires_at > now()
                    and cl.run_id <> r.run_id
              ))
            order by w.position
            limit p_limit - cardinality(locked)
            for update of r skip locked
        ) as c;

        -- STEP: gates and caps, only when a run needs them (a budget, an organization
        -- reaching its cap within this claim).
        v_capped := '{}';
        v_capped_orgs := '{}';
        if v_room_exceeded or cardinality(v_budget_runs) > 0 then
            v_settled := runlane._claim_gates_and_caps(
                v_more, v_budget_runs, v_room_exceeded, v_more_bg_runs, v_more_bg_orgs,
                v_more_bg_rooms
            );
            v_capped := v_settled.capped;
            v_capped_orgs := v_settled.capped_orgs;
            if cardinality(v_settled.over_budget) > 0 then
                v_gated := v_gated || v_settled.over_budget;
                v_gate_reasons := v_gate_reasons
                    || array_fill('budget_exhausted'::text, array[cardinality(v_settled.over_budget)]);
            end if;
            if cardinality(v_capped) > 0 or cardinality(v_settled.over_budget) > 0 then
                v_more := v_settled.kept;
                v_more_orgs := v_settled.kept_bg_orgs;
                v_more_computers := v_settled.kept_computers;
                v_more_all_orgs := v_settled.kept_orgs;
                v_more_fences := v_settled.kept_fences;
            end if;
        end if;

        locked := locked || v_more;
        locked_orgs := locked_orgs || v_more_all_orgs;
        locked_fences := locked_fences || v_more_fences;
        taken := taken + cardinality(v_more) + cardinality(v_gated) + cardinality(v_capped);
        orgs := orgs || v_more_orgs;
        computers := computers || v_more_computers;
        full_orgs := full_orgs || v_capped_orgs;

        exit when cardinality(v_gated) = 0 and cardinality(v_capped) = 0;
        if cardinality(v_gated) > 0 then
            perform runlane._skip_gated_runs(v_gated, v_gate_reasons);
            skipped := skipped || v_gated;
        end if;
        exit when cardinality(locked) >= p_limit;
    end loop;
end;
$$;

comment on function runlane._claim_lock(
    int, bigint[], text[], int, text[], int[], text[], int[],
    bigint[], text[], bigint[], text[], text[], text[], bigint[]
) is
'claim_runs'' locks: one read''s candidates locked in claim order up to the page, within the '
'per-worker bound, gated runs skipped and runs beyond their organization''s cap left queued.';

revoke all on function runlane._claim_lock(
    int, bigint[], text[], int, text[], int[], text[], int[],
    bigint[], text[], bigint[], text[], text[], text[], bigint[]
) from public;
