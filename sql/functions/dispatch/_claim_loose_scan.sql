-- _claim_loose_scan: claim_runs' fair candidates of one claim class when a few
-- organizations own its oldest runs.
--
-- Guarantees: reads, without locks, the eligible runs of class p_class in p_lanes of the
-- handlers p_handlers (null: a schema before 0021, whose runs carry none: every run) (queued,
-- awake, not waiting on another run's live computer lease, not in p_tried), of
-- organizations neither in p_bounded_orgs nor, for the background lane, in p_full_orgs.
-- Returns at most p_need of them in the fair order (round k holds each organization's
-- k-th oldest run, lanes merged; a round oldest first) with their organizations, and the
-- organizations found. Cost follows organizations, never queued rows: one descent of
-- runs_handler_fair_claim_idx per (lane, handler, organization) for its oldest run, then, only when
-- organizations are fewer than p_need, rounds read each organization's next runs, never
-- past its room under the per-worker bound (p_max_per_org less its use in p_used_*).
-- enough_orgs: the first round alone answered. cut_at_room: some organization's read
-- stopped at its room, so a short answer is not the whole queue.
-- (the signature without p_handlers goes in the transaction that installs this one)
drop function if exists runlane._claim_loose_scan(
    text[], smallint, int, bigint[], text[], text[], int, text[], int[]
);

create or replace function runlane._claim_loose_scan(
    p_lanes text[],
    p_handlers text[],
    p_class smallint,
    p_need int,
    p_tried bigint[],
    p_full_orgs text[],
    p_bounded_orgs text[],
    p_max_per_org int,
    p_used_orgs text[],
    p_used_counts int[],
    out candidates bigint[],
    out candidate_orgs text[],
    out scanned_orgs text[],
    out enough_orgs boolean,
    out cut_at_room boolean
)
language plpgsql
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_generic_plan
as $$
declare
    v_scan_lanes text[];
    v_scan_handlers text[];
    v_scan_heads bigint[];
    v_org_count int;
    v_k int;
    v_saturated int;
begin
    candidates := '{}';
    candidate_orgs := '{}';
    enough_orgs := false;
    cut_at_room := false;
    -- STEP: each (lane, handler, organization)'s oldest eligible run, one descent each.
    -- (p_handlers null, a schema before 0021: runs carry no handler, and each (lane,
    -- organization)'s is read instead, by the statement of that schema.)
    if p_handlers is not null then
        with recursive heads (lane, handler, org_id, run_id) as (
            select l.lane, hd.handler, h.org_id, h.run_id
            from unnest(p_lanes) as l (lane)
            cross join unnest(p_handlers) as hd (handler)
            cross join lateral (
                select r.org_id, r.run_id
                from runlane.runs as r
                where r.state = 'queued'
                  and r.claim_class = p_class
                  and r.lane = l.lane
                  and r.handler = hd.handler
                  and r.run_id <> all(p_tried)
                  and (r.wake_at is null or r.wake_at <= now())
                  and (r.computer_id is null or not exists (
                      select 1
                      from runlane.computer_leases as cl
                      where cl.computer_id = r.computer_id
                        and cl.expires_at > now()
                        and cl.run_id <> r.run_id
                  ))
                order by r.org_id, r.run_id
                limit 1
            ) as h
            union all
            select o.lane, o.handler, h.org_id, h.run_id
            from heads as o
            cross join lateral (
                select r.org_id, r.run_id
                from runlane.runs as r
                where r.state = 'queued'
                  and r.claim_class = p_class
                  and r.lane = o.lane
                  and r.handler = o.handler
                  and r.org_id > o.org_id
                  and r.run_id <> all(p_tried)
                  and (r.wake_at is null or r.wake_at <= now())
                  and (r.computer_id is null or not exists (
                      select 1
                      from runlane.computer_leases as cl
                      where cl.computer_id = r.computer_id
                        and cl.expires_at > now()
                        and cl.run_id <> r.run_id
                  ))
                order by r.org_id, r.run_id
                limit 1
            ) as h
        )
        select
            coalesce(array_agg(h.lane), '{}'),
            coalesce(array_agg(h.handler), '{}'),
            coalesce(array_agg(h.org_id), '{}'),
            coalesce(array_agg(h.run_id), '{}'),
            count(distinct h.org_id)
        into v_scan_lanes, v_scan_handlers, scanned_orgs, v_scan_heads, v_org_count
        from heads as h
        where not (h.lane = 'background' and h.org_id = any(p_full_orgs))
          and h.org_id <> all(p_bounded_orgs);
    else
        with recursive heads (lane, org_id, run_id) as (
            select l.lane, h.org_id, h.run_id
            from unnest(p_lanes) as l (lane)
            cross join lateral (
                select r.org_id, r.run_id
                from runlane.runs as r
                where r.state = 'queued'
                  and r.claim_class = p_class
                  and r.lane = l.lane
                  and r.run_id <> all(p_tried)
                  and (r.wake_at is null or r.wake_at <= now())
                  and (r.computer_id is null or not exists (
                      select 1
                      from runlane.computer_leases as cl
                      where cl.computer_id = r.computer_id
                        and cl.expires_at > now()
                        and cl.run_id <> r.run_id
                  ))
                order by r.org_id, r.run_id
                limit 1
            ) as h
            union all
            select o.lane, h.org_id, h.run_id
            from heads as o
            cross join lateral (
                select r.org_id, r.run_id
                from runlane.runs as r
                where r.state = 'queued'
                  and r.claim_class = p_class
                  and r.lane = o.lane
                  and r.org_id > o.org_id
                  and r.run_id <> all(p_tried)
                  and (r.wake_at is null or r.wake_at <= now())
                  and (r.computer_id is null or not exists (
                      select 1
                      from runlane.computer_leases as cl
                      where cl.computer_id = r.computer_id
                        and cl.expires_at > now()
                        and cl.run_id <> r.run_id
                  ))
                order by r.org_id, r.run_id
                limit 1
            ) as h
        )
        select
            coalesce(array_agg(h.lane), '{}'),
            coalesce(array_agg(h.org_id), '{}'),
            coalesce(array_agg(h.run_id), '{}'),
            count(distinct h.org_id)
        into v_scan_lanes, scanned_orgs, v_scan_heads, v_org_count
        from heads as h
        where not (h.lane = 'background' and h.org_id = any(p_full_orgs))
          and h.org_id <> all(p_bounded_orgs);
        v_scan_handlers := array_fill(null::text, array[cardinality(v_scan_lanes)]);
    end if;
    if v_org_count = 0 then
        return;
    end if;

    -- STEP: enough organizations: round one (each one's oldest head across lanes) is it.
    if v_org_count >= p_need then
        enough_orgs := true;
        select
            coalesce(array_agg(f.run_id order by f.run_id), '{}'),
            coalesce(array_agg(f.org_id order by f.run_id), '{}')
        into candidates, candidate_orgs
        from (
            select h.org_id, min(h.run_id) as run_id
            from unnest(scanned_orgs, v_scan_heads) as h (org_id, run_id)
            group by h.org_id
            order by 2
            limit p_need
        ) as f;
        return;
    end if;

    -- STEP: rounds: each organization's k oldest eligible runs (merged across lanes), k
    -- grown until the class yields p_need candidates or no organization has more; an
    -- organization is read no further than its room on this worker.
    v_k := ceil(p_need::numeric / v_org_count)::int;
    loop
        if p_handlers is not null then
            select
                coalesce(array_agg(c.run_id order by c.round, c.run_id), '{}'),
                coalesce(array_agg(c.org_id order by c.round, c.run_id), '{}'),
                count(*) filter (where c.round = v_k),
                coalesce(bool_or(c.round = c.room and c.room < v_k), false)
            into candidates, candidate_orgs, v_saturated, cut_at_room
            from (
                select
                    h.run_id,
                    o.org_id,
                    o.room,
                    row_number() over (partition by o.org_id order by h.run_id) as round
                from (
                    select
                        s.lane,
                        s.handler,
                        s.org_id,
                        coalesce(
                            p_max_per_org
                            - coalesce(p_used_counts[array_position(p_used_orgs, s.org_id)], 0),
                            v_k
                        ) as room
                    from unnest(v_scan_lanes, v_scan_handlers, scanned_orgs) as s (lane, handler, org_id)
                ) as o
                cross join lateral (
                    -- (org_id bounded on both sides, not equated: with an equality runs_pkey
                    -- has the order too, and a plan on it filters every finished run;
                    -- docs/design/claim.md)
                    select r.run_id
                    from runlane.runs as r
                    where r.state = 'queued'
                      and r.claim_class = p_class
                      and r.lane = o.lane
                      and r.handler = o.handler
                      and r.org_id >= o.org_id
                      and r.org_id <= o.org_id
                      and r.run_id <> all(p_tried)
                      and (r.wake_at is null or r.wake_at <= now())
                      and (r.computer_id is null or not exists (
                          select 1
                          from runlane.computer_leases as cl
                          where cl.computer_id = r.computer_id
                            and cl.expires_at > now()
                            and cl.run_id <> r.run_id
                      ))
                    order by r.org_id, r.run_id  -- runs_handler_fair_claim_idx's order
                    limit least(v_k, o.room)
                ) as h
            ) as c
            where c.round <= least(v_k, c.room);
        else  -- (before 0021)
            select
                coalesce(array_agg(c.run_id order by c.round, c.run_id), '{}'),
                coalesce(array_agg(c.org_id order by c.round, c.run_id), '{}'),
                count(*) filter (where c.round = v_k),
                coalesce(bool_or(c.round = c.room and c.room < v_k), false)
            into candidates, candidate_orgs, v_saturated, cut_at_room
            from (
                select
                    h.run_id,
                    o.org_id,
                    o.room,
                    row_number() over (partition by o.org_id order by h.run_id) as round
                from (
                    select
                        s.lane,
                        s.org_id,
                        coalesce(
                            p_max_per_org
                            - coalesce(p_used_counts[array_position(p_used_orgs, s.org_id)], 0),
                            v_k
                        ) as room
                    from unnest(v_scan_lanes, scanned_orgs) as s (lane, org_id)
                ) as o
                cross join lateral (
                    -- (org_id bounded on both sides, not equated: with an equality runs_pkey
                    -- has the order too, and a plan on it filters every finished run;
                    -- docs/design/claim.md)
                    select r.run_id
                    from runlane.runs as r
                    where r.state = 'queued'
                      and r.claim_class = p_class
                      and r.lane = o.lane
                      and r.org_id >= o.org_id
                      and r.org_id <= o.org_id
                      and r.run_id <> all(p_tried)
                      and (r.wake_at is null or r.wake_at <= now())
                      and (r.computer_id is null or not exists (
                          select 1
                          from runlane.computer_leases as cl
                          where cl.computer_id = r.computer_id
                            and cl.expires_at > now()
                            and cl.run_id <> r.run_id
                      ))
                    order by r.org_id, r.run_id  -- runs_fair_claim_idx's order
                    limit least(v_k, o.room)
                ) as h
            ) as c
            where c.round <= least(v_k, c.room);
        end if;

        exit when cardinality(candidates) >= p_need or v_saturated = 0;
        v_k := v_k + ceil((p_need - cardinality(candidates))::numeric / v_saturated)::int;
    end loop;
    candidates := candidates[1:p_need];
    candidate_orgs := candidate_orgs[1:p_need];
end;
$$;

comment on function runlane._claim_loose_scan(
    text[], text[], smallint, int, bigint[], text[], text[], int, text[], int[]
) is
'claim_runs'' loose index scan: one claim class''s fair candidates, read once per '
'organization, when a few organizations own the oldest runs.';

revoke all on function runlane._claim_loose_scan(
    text[], text[], smallint, int, bigint[], text[], text[], int, text[], int[]
) from public;
