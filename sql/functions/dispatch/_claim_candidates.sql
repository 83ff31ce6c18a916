-- _claim_candidates: claim_runs' fair candidates for one read, without locks.
--
-- Guarantees: returns up to p_target eligible runs of p_lanes of the handlers p_handlers
-- (null: a schema before 0021, whose runs carry no handler: every run) (queued, awake, not waiting
-- on another run's live computer lease, not in p_tried), interactive-class runs first,
-- each class in the fair order (round robin across organizations, oldest first within
-- each, lanes merged), with their organizations. Organizations in p_bounded_orgs (no
-- room under the per-worker bound) and, for the background lane, in p_full_orgs (at their
-- cap) are left out. The read is the class's window (its oldest eligible runs, 4 x the
-- runs wanted, one runs_handler_claim_order_idx read per lane and handler) when the window's order is
-- exact, else runlane._claim_loose_scan. The window is skipped while p_skip_window holds
-- (the session's last window held too few organizations) and whenever an organization is
-- left out; skip_window comes back as the session setting runlane.claim_skip_window now
-- says. p_scanned_orgs_0/1: the organizations this claim's last loose scan of each class
-- found (null: none); a class whose scan found only organizations without room now is
-- not read again. read_cut: some organization's read stopped at its room, so a short
-- answer is not the whole queue.
-- (the signature without p_handlers goes in the transaction that installs this one)
drop function if exists runlane._claim_candidates(
    text[], int, bigint[], text[], text[], int, text[], int[], boolean, text[], text[]
);

create or replace function runlane._claim_candidates(
    p_lanes text[],
    p_handlers text[],
    p_target int,
    p_tried bigint[],
    p_full_orgs text[],
    p_bounded_orgs text[],
    p_max_per_org int,
    p_used_orgs text[],
    p_used_counts int[],
    inout skip_window boolean,
    inout scanned_orgs_0 text[],
    inout scanned_orgs_1 text[],
    out candidates bigint[],
    out candidate_orgs text[],
    out read_cut boolean
)
language plpgsql
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_generic_plan
as $$
declare
    v_class smallint;
    v_need int;
    v_org_count int;
    v_window_rows int;
    v_class_candidates bigint[];
    v_class_orgs text[];
    v_later_candidates bigint[];
    v_later_candidate_orgs text[];
    v_later_rows int;
    v_later_orgs int;
    v_later_known boolean := false;
    v_later_whole boolean;
    v_scan record;
begin
    candidates := '{}';
    candidate_orgs := '{}';
    read_cut := false;
    foreach v_class in array array[0, 1]::smallint[] loop
        exit when cardinality(candidates) >= p_target;
        v_need := p_target - cardinality(candidates);
        -- GUARD: this claim's last loose scan of the class found only organizations
        -- without room now: no scan again for nothing.
        continue when (
            case v_class when 0 then scanned_orgs_0 else scanned_orgs_1 end
        ) <@ p_bounded_orgs;

        if v_later_known then
            -- STEP: class 1 as the class-0 window saw it (a prefix of the class in run_id
            -- order, so the same exactness rule holds).
            v_class_candidates := v_later_candidates;
            v_class_orgs := v_later_candidate_orgs;
            v_org_count := v_later_orgs;
            if v_later_whole or v_org_count >= v_need then
                candidates := candidates || v_class_candidates[1:v_need];
                candidate_orgs := candidate_orgs || v_class_orgs[1:v_need];
                continue;
            end if;
        elsif skip_window or p_handlers is null
              or cardinality(p_bounded_orgs) > 0 or cardinality(p_full_orgs) > 0 then
            -- GUARD: the loose scan answers alone (the window would be read for nothing,
            -- or filter a left-out organization's backlog run by run; before 0021, runs
            -- carry no handler and the window reads by handler).
            null;
        else
            -- STEP: the window: the oldest eligible runs of this class and later ones in
            -- claim order. Exact when it holds the whole class or when its first round
            -- fills v_need. It names no organization to leave out (a generic plan of
            -- "org_id <> all($n)" reads the whole queue; docs/design/claim.md).
            select
                coalesce(array_agg(w.run_id order by w.round, w.run_id)
                    filter (where w.claim_class = v_class), '{}'),
                coalesce(array_agg(w.org_id order by w.round, w.run_id)
                    filter (where w.claim_class = v_class), '{}'),
                count(*) filter (where w.claim_class = v_class),
                count(distinct w.org_id) filter (where w.claim_class = v_class),
                coalesce(array_agg(w.run_id order by w.round, w.run_id)
                    filter (where w.claim_class > v_class), '{}'),
                coalesce(array_agg(w.org_id order by w.round, w.run_id)
                    filter (where w.claim_class > v_class), '{}'),
                count(*) filter (where w.claim_class > v_class),
                count(distinct w.org_id) filter (where w.claim_class > v_class)
            into v_class_candidates, v_class_orgs, v_window_rows, v_org_count,
                 v_later_candidates, v_later_candidate_orgs, v_later_rows, v_later_orgs
            from (
                select
                    c.run_id,
                    c.org_id,
                    c.claim_class,
                    row_number() over (
                        partition by c.claim_class, c.org_id order by c.run_id
                    ) as round
                from (
                    -- Each (lane, handler)'s oldest, merged: every one of the 4 x v_need
                    -- oldest is among its own (lane, handler)'s 4 x v_need oldest.
                    select o.run_id, o.org_id, o.claim_class
                    from unnest(p_lanes) as l (lane)
                    cross join unnest(p_handlers) as hd (handler)
                    cross join lateral (
                        -- (claim_class >= and the full index order keep the plan on the
                        -- index, never on a primary-key walk through history)
                        select r.run_id, r.org_id, r.claim_class
                        from runlane.runs as r
                        where r.state = 'queued'
                          and r.lane = l.lane
                          and r.handler = hd.handler
                          and r.claim_class >= v_class
                          and r.run_id <> all(p_tried)
                          and (r.wake_at is null or r.wake_at <= now())
                          and (r.computer_id is null or not exists (
                              select 1
                              from runlane.computer_leases as cl
                              where cl.computer_id = r.computer_id
                                and cl.expires_at > now()
                                and cl.run_id <> r.run_id
                          ))
                        order by r.claim_class, r.run_id
                        limit 4 * v_need
                    ) as o
                    order by o.claim_class, o.run_id
                    limit 4 * v_need
                ) as c
            ) as w;

            -- Class 1 needs no window of its own when this one holds class-1 rows (or was
            -- not full: then class 1 has no eligible run).
            v_later_whole := v_window_rows + v_later_rows < 4 * v_need;
            v_later_known := v_class = 0 and (v_later_rows > 0 or v_later_whole);
            if v_window_rows < 4 * v_need or v_org_count >= v_need then
                candidates := candidates || v_class_candidates[1:v_need];
                candidate_orgs := candidate_orgs || v_class_orgs[1:v_need];
                continue;
            end if;
            -- A full window of too few organizations (one big tenant's backlog): this
            -- session's next claims go to the loose scan first, until it finds enough.
            skip_window := true;
            perform set_config('runlane.claim_skip_window', 'on', false);
        end if;

        -- STEP: the loose index scan.
        v_scan := runlane._claim_loose_scan(
            p_lanes, p_handlers, v_class, v_need, p_tried, p_full_orgs, p_bounded_orgs,
            p_max_per_org, p_used_orgs, p_used_counts
        );
        if v_class = 0 then
            scanned_orgs_0 := v_scan.scanned_orgs;
        else
            scanned_orgs_1 := v_scan.scanned_orgs;
        end if;
        if v_scan.enough_orgs and skip_window then  -- the window answers again from the next claim
            skip_window := false;
            perform set_config('runlane.claim_skip_window', 'off', false);
        end if;
        read_cut := read_cut or v_scan.cut_at_room;
        candidates := candidates || v_scan.candidates;
        candidate_orgs := candidate_orgs || v_scan.candidate_orgs;
    end loop;
end;
$$;

comment on function runlane._claim_candidates(
    text[], text[], int, bigint[], text[], text[], int, text[], int[], boolean, text[], text[]
) is
'claim_runs'' candidate read: up to p_target eligible runs in the fair order, by the claim-order '
'window when its order is exact, else by the loose index scan.';

revoke all on function runlane._claim_candidates(
    text[], text[], int, bigint[], text[], text[], int, text[], int[], boolean, text[], text[]
) from public;
