-- _claim_fair: claim_runs' fair path, for claims the idle statement does not answer.
--
-- Guarantees:
-- * Reads candidates of the handlers p_handlers only (null: before 0021, every run),
--   without locks, in the fair order (runlane._claim_candidates),
--   2 x p_limit + 8 at first, and locks them in order (runlane._claim_lock) until p_limit
--   are locked or the queue holds no more for this worker. When other claimers hold too
--   many, it reads again past the rows tried, twice as far, at most 4 reads.
-- * Under the per-worker bound (p_max_per_org: the worker's running runs counted once
--   per claim, by organization) an organization without room is not read and only each
--   one's candidates up to its room are locked. Work-conserving (p_work_conserving),
--   when the page still has room and the bound held runs back, a second pass of at most
--   4 reads fills it without the bound; a keyed claim then holds the worker's bound row
--   (runlane._lock_worker_bound).
-- * Sets the session's runlane.claim_backlog off when a read held the whole queue for
--   this worker (the next claim tries the idle statement again).
-- * locked, locked_fences: the runs locked and kept, in claim order, with their fences
--   as locked; skipped: the gated runs ended skipped. With none of either, nothing else.
-- * accepted: the locked runs their organizations' caps and their computers admit
--   (runlane._claim_org_caps, only when a background run or a computer wanted twice is
--   locked); fence_floor (runlane._fence_floor) when one is accepted; computers_taken:
--   the accepted runs whose computer lease was taken (runlane._claim_computer_leases);
--   any_computer: a locked run is bound to a computer.
-- (the signature without p_handlers goes in the transaction that installs this one)
drop function if exists runlane._claim_fair(text, text[], int, interval, uuid, int, boolean);

create or replace function runlane._claim_fair(
    p_worker text,
    p_lanes text[],
    p_handlers text[],
    p_limit int,
    p_lease interval,
    p_claim_key uuid,
    p_max_per_org int,
    p_work_conserving boolean,
    out locked bigint[],
    out locked_fences bigint[],
    out accepted bigint[],
    out skipped bigint[],
    out computers_taken bigint[],
    out fence_floor bigint,
    out any_computer boolean
)
language plpgsql
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_generic_plan
as $$
declare
    v_max_per_org int := p_max_per_org;  -- (null in a work-conserving second pass)
    v_work_conserving boolean := p_work_conserving;
    v_target int;
    v_last_attempt int := 4;
    v_pass_two boolean := false;
    v_skip_window boolean;
    v_scanned_orgs_0 text[];
    v_scanned_orgs_1 text[];
    v_full_orgs text[];
    v_busy_orgs text[] := '{}'::text[];
    v_busy_counts int[] := '{}'::int[];
    v_held_orgs text[];
    v_held_counts int[];
    v_used_orgs text[];
    v_used_counts int[];
    v_bounded_orgs text[];
    v_bound_cut boolean := false;
    v_read_cut boolean;
    v_candidates bigint[];
    v_candidate_orgs text[];
    v_lock_candidates bigint[];
    v_taken int;
    v_tried bigint[];
    v_locked_orgs text[];
    v_orgs text[];  -- organizations of the locked background runs (one entry per run)
    v_computers text[];
    v_read record;  -- runlane._claim_candidates' answer
    v_lock record;  -- runlane._claim_lock's answer
begin
    any_computer := false;
    v_tried := '{}';
    skipped := '{}';
    locked := '{}';
    v_locked_orgs := '{}';
    locked_fences := '{}';
    v_orgs := '{}';
    v_computers := '{}';
    computers_taken := '{}';
    accepted := '{}';
    if v_work_conserving and p_claim_key is not null then
        perform runlane._lock_worker_bound(p_worker);  -- (the worker's lanes take turns)
    end if;
    -- Each organization's running background runs, and those at their cap (a hint
    -- that skips their rows; runlane._claim_org_caps decides exactly).
    v_full_orgs := '{}';
    if 'background' = any(p_lanes) then
        select
            coalesce(array_agg(busy.org_id)
                filter (where busy.running >= s.agent_max_concurrency), '{}'),
            coalesce(array_agg(busy.org_id), '{}'),
            coalesce(array_agg(busy.running), '{}')
        into v_full_orgs, v_busy_orgs, v_busy_counts
        from (
            select r.org_id, count(*)::int as running
            from runlane.runs as r
            where r.state = 'running' and r.lane = 'background'
            group by r.org_id
        ) as busy
        join runlane.platform_settings as s on s.org_id = busy.org_id;
    end if;
    -- The worker's running runs by organization, once per claim (the bound's use).
    v_held_orgs := '{}';
    v_held_counts := '{}';
    if v_max_per_org is not null then
        select coalesce(array_agg(mine.org_id), '{}'), coalesce(array_agg(mine.running), '{}')
        into v_held_orgs, v_held_counts
        from (
            select m.org_id, count(*)::int as running
            from runlane.runs as m
            where m.lease_owner = p_worker and m.state = 'running'
            group by m.org_id
        ) as mine;
    end if;
    v_target := 2 * p_limit + 8;
    v_skip_window := coalesce(current_setting('runlane.claim_skip_window', true), '') = 'on';
    for v_attempt in 1..8 loop
        if v_pass_two then
            -- GUARD: the work-conserving bound: nothing within its room waits any
            -- more, so the rest of the page is read and locked without the bound.
            v_pass_two := false;
            v_max_per_org := null;
            v_last_attempt := v_attempt + 3;
            v_tried := v_tried || v_lock_candidates || locked;
            v_target := 2 * (p_limit - cardinality(locked)) + 8;
            v_scanned_orgs_0 := null;
            v_scanned_orgs_1 := null;
        end if;
        -- What each organization uses of the bound (held, plus locked by this claim),
        -- and those without room: they are not read.
        v_bounded_orgs := '{}';
        if v_max_per_org is not null then
            select
                coalesce(array_agg(u.org_id), '{}'),
                coalesce(array_agg(u.used), '{}'),
                coalesce(array_agg(u.org_id) filter (where u.used >= v_max_per_org), '{}')
            into v_used_orgs, v_used_counts, v_bounded_orgs
            from (
                select o.org_id, sum(o.runs)::int as used
                from (
                    select h.org_id, h.runs
                    from unnest(v_held_orgs, v_held_counts) as h (org_id, runs)
                    union all
                    select l.org_id, 1
                    from unnest(v_locked_orgs) as l (org_id)
                ) as o
                group by o.org_id
            ) as u;
            v_bound_cut := v_bound_cut or cardinality(v_bounded_orgs) > 0;
        end if;

        v_read := runlane._claim_candidates(
            p_lanes, p_handlers, v_target, v_tried, v_full_orgs, v_bounded_orgs, v_max_per_org,
            v_used_orgs, v_used_counts, v_skip_window, v_scanned_orgs_0, v_scanned_orgs_1
        );
        v_skip_window := v_read.skip_window;
        v_scanned_orgs_0 := v_read.scanned_orgs_0;
        v_scanned_orgs_1 := v_read.scanned_orgs_1;
        v_candidates := v_read.candidates;
        v_candidate_orgs := v_read.candidate_orgs;
        v_read_cut := v_read.read_cut;

        if cardinality(v_candidates) = 0 then
            -- (nothing more to read in this pass; a work-conserving bound that held
            -- runs back reads on without it, for the rest of the page)
            v_pass_two := v_work_conserving and v_max_per_org is not null and v_bound_cut
                and cardinality(locked) < p_limit;
            exit when not v_pass_two;
            continue;
        end if;

        v_lock := runlane._claim_lock(
            p_limit, v_candidates, v_candidate_orgs, v_max_per_org, v_used_orgs,
            v_used_counts, v_busy_orgs, v_busy_counts, locked, v_locked_orgs,
            locked_fences, v_orgs, v_computers, v_full_orgs, skipped
        );
        locked := v_lock.locked;
        v_locked_orgs := v_lock.locked_orgs;
        locked_fences := v_lock.locked_fences;
        v_orgs := v_lock.orgs;
        v_computers := v_lock.computers;
        v_full_orgs := v_lock.full_orgs;
        skipped := v_lock.skipped;
        v_lock_candidates := v_lock.lock_candidates;
        v_taken := v_lock.taken;
        if v_max_per_org is not null then
            v_bound_cut := v_bound_cut or v_read_cut
                or cardinality(v_lock_candidates) < cardinality(v_candidates);
        end if;

        -- Done when the page is full, or the read was short and is the whole queue for
        -- this worker (the bound held nothing back, or every candidate was used).
        if cardinality(locked) >= p_limit
           or cardinality(v_candidates) < v_target
              and (cardinality(v_lock_candidates) = cardinality(v_candidates) and not v_read_cut
                   or v_taken >= cardinality(v_lock_candidates))
           or v_attempt >= v_last_attempt then
            v_pass_two := v_work_conserving and v_max_per_org is not null and v_bound_cut
                and cardinality(locked) < p_limit;
            exit when not v_pass_two;
            continue;
        end if;
        v_tried := v_tried || v_lock_candidates;
        v_target := 2 * v_target;  -- concurrent claimers took more than the margin
    end loop;

    -- The read held the whole queue for this worker: the next claim of this session
    -- tries the idle statement again.
    if cardinality(v_candidates) < v_target and not v_read_cut
       and cardinality(v_bounded_orgs) = 0
       and current_setting('runlane.claim_backlog', true) = 'on' then
        perform set_config('runlane.claim_backlog', 'off', false);
    end if;

    if cardinality(locked) = 0 and cardinality(skipped) = 0 then
        return;  -- (the caller commits the empty claim)
    end if;

    -- STEP: caps under the organizations' claim locks, only when a background run or a
    -- computer wanted twice needs it; then the fence floor and the computer leases.
    if cardinality(v_orgs) = 0 and cardinality(v_computers) <= 1 then
        accepted := locked;
    else
        accepted := runlane._claim_org_caps(locked, v_orgs);
    end if;
    if cardinality(accepted) > 0 then
        fence_floor := runlane._fence_floor();  -- (before the leases carry the fence)
    end if;
    any_computer := cardinality(v_computers) > 0;
    if any_computer then
        computers_taken := runlane._claim_computer_leases(accepted, fence_floor, p_lease);
    end if;
end;
$$;

comment on function runlane._claim_fair(text, text[], text[], int, interval, uuid, int, boolean) is
'claim_runs'' fair path: candidates read in the fair order and locked until the page is full, '
'within the per-worker bound, the gates and the caps; the runs accepted, their computer leases '
'taken.';

revoke all on function runlane._claim_fair(
    text, text[], text[], int, interval, uuid, int, boolean
) from public;
