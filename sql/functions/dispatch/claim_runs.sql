-- claim_runs: atomically take up to p_limit runnable runs of the given lanes for p_worker.
--
-- Guarantees:
-- * Concurrent callers never get the same run (rows are taken FOR UPDATE SKIP LOCKED).
-- * Runs not awake yet (wake_at in the future) are not taken.
-- * A run whose computer has a live lease held by another run is not touched: no lock
--   kept, no attempt counted; unrelated runs behind it are claimed.
-- * An organization never has more running background runs than its
--   agent_max_concurrency, however many workers claim at once: the organization's claim
--   lock (its row in runlane.org_claim_locks) is locked before its running runs are
--   counted, so the count is taken in a snapshot that already sees every concurrent
--   claim that committed before us.
-- * A claim never waits for a lock an API login can hold. The claim lock is a row only
--   claim_runs locks (no role has a privilege on its table): claimers of one organization
--   wait for each other, briefly, never for a transaction left open after put_org (which
--   locks the platform_settings row), put_agent or run_now. Every other row the claim
--   reads that such a transaction can lock (platform_settings, agents, users, messages)
--   is read without a lock; runs are locked SKIP LOCKED (a run an open transaction
--   holds stays queued for a later claim; the others are claimed now); the rest it locks
--   or writes (claim_receipts, computer_leases, run_events) is written by workers only.
--   An organization that reaches its cap within the claim leaves no hole in the page:
--   its runs beyond its room are left queued (locks only) and the claim locks other
--   candidates in their places.
-- * Interactive-class work (interactive, manual, test, retry) is taken before scheduled
--   and reaction work (runs.claim_class).
-- * Fair within a class: round robin across organizations, oldest first within each. Round
--   k holds every organization's k-th oldest eligible run (lanes merged), a round is
--   ordered oldest first, and rounds are taken in order: an organization with 10,000
--   queued runs gets one run per round like an organization with one, so a newcomer's
--   run waits behind at most one run of each other organization (a claim of 2 or more
--   right after it takes it when only one organization was ahead).
-- * Cost follows organizations, never queued rows. First a window of the class's oldest
--   eligible runs (4 x the candidates wanted, runs_lane_claim_order_idx, each lane's
--   queue read on its own: never a walk of the other lane's): its round robin
--   order is exact when it holds the whole class or one run of enough organizations,
--   the usual case. Otherwise (a few organizations own the oldest runs) a loose index
--   scan (runs_fair_claim_idx) descends once per (lane, organization) with queued runs
--   and reads each one's oldest eligible run, plus later rounds only when organizations
--   are fewer than the candidates wanted. A session whose last window was full but held
--   too few organizations skips the window (runlane.claim_skip_window, a session
--   setting the claim keeps itself) until the loose scan finds enough organizations
--   again: one tenant's backlog is not read four times over on every claim. A claim that
--   leaves an organization out (at its cap, or at the bound on this worker) also skips
--   the window, which would filter that organization's backlog run by run. Either way
--   the order is the same; a session that sets the setting itself changes only its own
--   claims' cost.
-- * Candidates (2 x p_limit + 8) are read without locks, then locked in claim order FOR
--   UPDATE SKIP LOCKED; when concurrent claimers hold too many of them the claim reads
--   candidates again past those rows, twice as many each time (at most 4 times).
-- * Few statements on the common path: an idle chat claim (no background lane asked for,
--   every eligible run fits in p_limit, none bound to a computer or a timer) is one
--   statement that finds, locks, orders and bounds its runs and one that claims them
--   (update, journal, returned rows). It reads its own lane's queue only (one descent of
--   runs_lane_claim_order_idx, at most p_limit + 1 entries) and locks by primary key:
--   a background backlog (a schedule storm held back by caps) costs it nothing. An empty
--   claim is the first of them. The class-0 window also
--   answers for class 1 when it holds class-1 rows; the cap machinery (organization
--   locks and counts) runs only when a background run was locked or two locked runs
--   share a computer, the computer lease only for computer-bound runs. Plans are
--   generic (plan_cache_mode): re-planning the statements for one-element arrays cost
--   more than the whole claim. A generic plan made while every run was queued stays on
--   the queued-run indexes for the rest of a drain: no statement can get its order from
--   runs_pkey (which would filter every finished run on every claim).
-- * Per worker, at most runlane.max_per_org (a session setting; unset: no bound) running
--   runs of one organization: runs over the bound are left queued, untouched. The
--   worker's running runs are counted once per claim (by organization), not once per
--   candidate, and the bound applies before anything is locked: an organization without
--   room on this worker is not read, and only each organization's first candidates up to
--   its room are locked (when rows other claimers hold leave room, the claim reads on).
--   A keyed claim under the bound first locks the worker's bound row (claim_receipts,
--   lanes '{}'), so a worker's lanes, each on its own connection, claim one at a time and
--   together hold the bound too (unkeyed claims, for schemas before 0004, do not).
-- * The bound is strict unless the session says runlane.max_per_org_mode =
--   work_conserving (the worker's default). Work-conserving, it binds only while an
--   organization within its room on this worker has runs waiting in the claim's lanes:
--   the claim takes those first, as above, and when the page still has room and the
--   bound held runs back, reads on without the bound for the rest of the page (round
--   robin, organizations over their bound among themselves). A lone organization is then
--   limited by the page sizes the worker's memory admission lets it ask for, never by
--   the bound; one that bursts while others wait still leaves them the first places. An
--   idle claim (every eligible run fits) applies no work-conserving bound at all (no run
--   waits after it) and does not lock the bound row.
-- * Each claimed run gets fence + 1, attempts + 1, a lease of p_lease, its computer lease
--   in the same transaction, and first_started_at once, after computer ownership. After
--   a failover the fence is at least the promoted server's floor (runlane._fence_floor):
--   fences never go backwards, even past claims an asynchronous standby lost.
-- * Each claim journals run.claimed with its fence, attempt and resumed (whether the run
--   had a checkpoint: the attempt continues the earlier attempts' output; without one it
--   starts over and their output is superseded, runlane.superseded_through).
-- * A lane named twice is one lane (p_lanes is deduplicated): each run is returned once.
-- * Gates when the run starts (seed 001, "the run starts if"): a locked background run
--   whose agent is switched off, admin-locked or has no model, or whose owner's weekly
--   budget (platform_settings.agent_weekly_budget, when set) is spent, is not claimed:
--   it is ended 'skipped' with reason agent_off, agent_locked, no_model or
--   budget_exhausted and a run.skipped journal row (runlane._skip_gated_runs), and the
--   claim locks further candidates in its place, so the page is as full as the queue
--   allows. Every trigger (manual, scheduled, reaction, retry, a coalesced timer run).
--   Interactive runs are never gated: a person is waiting, and chat was accepted when
--   the message was sent. The skipped runs are returned only with p_report_skipped
--   (below); the four- and five-argument forms return claimed runs only.
-- * A login limited to one organization (runlane.api_logins) is refused (42501), however
--   it got runlane_worker: a claim hands out every organization's runs and their fences.
-- Returns, per claimed run, what the worker needs to execute it, its late notice (timer
-- runs started more than 15 minutes late) and its run.execution_started timing row (built
-- from the claimed row in hand, as run_timing would build it: no second read of the run).
--
-- This form, the worker's, is keyed and reports skips (the four- and five-argument forms
-- below are it without a key and without skipped rows). On top of the rules above:
-- * The caller picks a new p_claim_key (a uuid) for each claim and resends the SAME key
--   when it could not read the reply (a broken connection). The first call that commits
--   records its key and the runs and fences it returned in runlane.claim_receipts (one
--   row per worker and lane set). A call whose key is the recorded one claims nothing:
--   it returns those runs again, in the same order, those still running under the same
--   fence (a run since finished, released or reclaimed is left out). So a lost claim
--   reply costs a resend, never a run left claimed by nobody until its lease expires.
-- * A resend racing the original (the original still executing when the resend arrives)
--   waits for it: the receipt row is locked FOR UPDATE first, and a worker's first claim
--   inserts it (a concurrent insert waits for the first to commit).
-- * A claim that finds no eligible run in its lanes writes nothing: no lock, no receipt,
--   no transaction id, so its commit flushes no WAL. The queue and the receipt are read
--   in one statement, one snapshot: a resend (its key is the recorded one) still takes
--   the locked path, and a resend racing its original sees the original's runs queued
--   (not committed yet) and waits for it as above. Idle workers' scans, and the claims
--   of workers that a notification woke after another worker took the run, cost each a
--   read, not a durable commit (issue 15: 96-152 bytes of WAL and a flush each before).
-- * An empty claim records nothing (a resend of it simply claims again) unless it created
--   the row. A null p_claim_key records nothing.
-- * A claim that raced another for its runs (it saw them queued, the other's claim not
--   committed yet) locks its receipt and takes nothing: it holds row locks only. On a
--   session whose claims are transactions of their own (runlane.autocommit_claims = on,
--   the worker's claim connections) it then commits without waiting for the WAL flush
--   (runlane._commit_empty_claim_without_flush): the workers one notification woke add no
--   flush to the winner's. The same for any claim that took and skipped nothing.
-- * With p_report_skipped, the runs this claim ended skipped because a gate closed
--   between queue and claim (agent_off, agent_locked, no_model, budget_exhausted; see
--   above) come after the claimed runs, one row each with skipped_reason set, fence and
--   attempt as the run kept them, and no prompt, checkpoint, iteration cap, late notice
--   or timing: they were not claimed. Claimed rows have skipped_reason NULL, so a page is
--   full when its claimed rows reach p_limit. Without p_report_skipped, only claimed rows.
-- * The receipt keeps the skipped runs too (fence -1 in claim_receipts.fences, a value
--   no run has: the keyed resend's fence match leaves them out), so a resend after a
--   lost reply reports them again, for a log line the lost reply never produced.
-- * Few statements: the runs' update, their run.claimed journal rows and the returned
--   rows (built from the updated rows in hand) are one statement; an idle claim of chat
--   runs is four (queue probe and receipt lock, find and lock, claim, receipt), one that
--   finds no eligible run one (that read). The
--   four- and five-argument forms are this one (no copy of its rows in between).
create or replace function runlane.claim_runs(
    p_worker text,
    p_lanes text[],
    p_limit int,
    p_lease interval,
    p_claim_key uuid,
    p_report_skipped boolean
)
returns table (
    run_id bigint,
    fence bigint,
    attempt int,
    lane text,
    trigger text,
    agent_id text,
    org_id text,
    thread_id text,
    prompt text,
    model text,
    checkpoint jsonb,
    iteration_cap int,
    late_notice jsonb,
    timing jsonb,
    skipped_reason text
)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
set plan_cache_mode = force_generic_plan
as $$
#variable_conflict use_column
declare
    v_lanes text[];
    v_key uuid;
    v_ids bigint[];
    v_fences bigint[];
    v_created boolean := false;
    v_full_orgs text[];
    v_target int;
    v_attempt int;
    v_class smallint;
    v_need int;
    v_scan_lanes text[];
    v_scan_orgs text[];
    v_scan_heads bigint[];
    v_org_count int;
    v_window_rows int;
    v_k int;
    v_saturated int;
    v_cut_at_room boolean;
    v_read_cut boolean;
    v_class_candidates bigint[];
    v_later_candidates bigint[];
    v_later_rows int;
    v_later_orgs int;
    v_later_known boolean;
    v_later_whole boolean;
    v_candidates bigint[];
    v_tried bigint[];
    v_more bigint[];
    v_more_orgs text[];
    v_more_all_orgs text[];
    v_more_fences bigint[];
    v_locked_orgs text[];
    v_locked_fences bigint[];
    v_held_orgs text[];
    v_held_counts int[];
    v_bounded_orgs text[];
    v_used_orgs text[];
    v_used_counts int[];
    v_candidate_orgs text[];
    v_class_orgs text[];
    v_later_candidate_orgs text[];
    v_lock_candidates bigint[];
    v_taken int;
    v_scanned_orgs_0 text[];
    v_scanned_orgs_1 text[];
    v_from_arrays boolean;
    v_more_computers text[];
    v_locked bigint[];
    v_orgs text[];
    v_computers text[];
    v_accepted bigint[];
    v_fence_floor bigint;
    v_computers_taken bigint[];
    v_idle boolean := false;
    v_max_per_org int;
    v_gated bigint[];
    v_gate_reasons text[];
    v_budget_runs bigint[];
    v_over bigint[];
    v_busy_orgs text[] := '{}';
    v_busy_counts int[] := '{}';
    v_capped bigint[];
    v_capped_orgs text[];
    v_room_exceeded boolean;
    v_more_bg_runs bigint[];
    v_more_bg_orgs text[];
    v_more_bg_rooms int[];
    v_skipped bigint[] := '{}';
    v_skip_window boolean;
    v_eligible boolean;
    v_lock_rows int;
    v_mode text;
    v_work_conserving boolean := false;
    v_idle_bound int;
    v_bound_cut boolean := false;
    v_pass_two boolean := false;
    v_last_attempt int := 4;
begin
    -- GUARD: a login limited to one organization never claims (runlane.api_logins).
    perform runlane._refuse_scoped_worker();
    -- GUARD: arguments a person can get wrong. One test on the usual path (every PL/pgSQL
    -- expression costs its set-up once per transaction, that is once per claim); the
    -- checks that name what is wrong run only when it fails (or is null: any null
    -- argument), and let through what passes them (two lanes, a worker id that starts
    -- with a space but is not blank).
    if not coalesce(
        p_report_skipped is not null
        and length(p_worker) <= 256 and p_worker ~ '^[[:alnum:]]'
        and cardinality(p_lanes) = 1 and p_lanes <@ array['interactive', 'background']
        and p_limit between 1 and 1000
        and p_lease > interval '0' and p_lease <= interval '1 hour'
        and current_setting('transaction_isolation') = 'read committed',
        false
    ) then
        if p_report_skipped is null then
            raise exception 'claim_runs needs p_report_skipped true or false'
                using errcode = '22004';
        end if;
        if p_worker is null then
            raise exception 'claim_runs needs a worker name'
                using errcode = '22004';
        end if;
        if p_lanes is null or cardinality(p_lanes) = 0
           or not p_lanes <@ array['interactive', 'background'] then
            raise exception 'claim_runs lanes must be interactive and/or background, got %',
                runlane._quote_for_error(p_lanes::text)
                using errcode = '22023';
        end if;
        if p_limit is null or p_limit < 1 or p_limit > 1000 then
            raise exception 'claim_runs limit must be between 1 and 1000, got %', p_limit
                using errcode = '22023';
        end if;
        if p_lease is null or p_lease <= interval '0' or p_lease > interval '1 hour' then
            raise exception 'claim_runs lease must be positive and at most 1 hour, got %', p_lease
                using errcode = '22023';
        end if;
        -- A lane named twice is one lane: the loose index scan below would otherwise read
        -- it, and return its runs, twice. (Only interactive and background pass above.)
        if cardinality(p_lanes) > 2 or p_lanes[1] = p_lanes[2] then
            p_lanes := array(select distinct l.name from unnest(p_lanes) as l (name));
        end if;
        -- The cap is exact only if each statement sees what committed before it.
        if current_setting('transaction_isolation') <> 'read committed' then
            raise exception 'claim_runs must run at READ COMMITTED isolation, not %',
                current_setting('transaction_isolation')
                using errcode = '0A000',
                      hint = 'Call it in its own transaction with the default isolation level.';
        end if;
        perform runlane._check_id('worker id', p_worker);
    end if;

    if p_claim_key is not null then
        -- GUARD: a resend of the last claim of this worker and lane set returns its runs.
        -- (p_lanes is one lane or two different ones by now: sorted, not deduplicated)
        v_lanes := case when p_lanes[2] < p_lanes[1] then array[p_lanes[2], p_lanes[1]] else p_lanes end;
        -- GUARD: no eligible run and not a resend: nothing to claim, nothing written (the
        -- receipt is locked only when the claim may take or return runs). Eligible: the
        -- idle statement's rule (queued, awake, in the lanes), read as one descent of
        -- runs_fair_claim_idx per class and lane, in its order (limit 1): never a walk of
        -- other lanes' queued runs, and a generic plan made while every run was queued
        -- stays on the index after they finish (a plain exists became a scan of the
        -- table there).
        select q.eligible, c.claim_key, c.run_ids, c.fences
        into v_eligible, v_key, v_ids, v_fences
        from (
            select exists (
                select 1
                from unnest(p_lanes) as l (lane)
                cross join unnest(array[0, 1]::smallint[]) as k (claim_class)
                cross join lateral (
                    select r.run_id
                    from runlane.runs as r
                    where r.state = 'queued'
                      and r.claim_class = k.claim_class
                      and r.lane = l.lane
                      and (r.wake_at is null or r.wake_at <= now())
                    order by r.org_id, r.run_id
                    limit 1
                ) as e
            ) as eligible
            offset 0  -- (kept a subquery: pulled up, the probe ran again in the receipt's filter)
        ) as q
        left join lateral (
            select rc.claim_key, rc.run_ids, rc.fences
            from runlane.claim_receipts as rc
            where rc.worker_id = p_worker
              and rc.lanes = v_lanes
              and (q.eligible or rc.claim_key = p_claim_key)
            for update
        ) as c on true;
        if not v_eligible and v_key is distinct from p_claim_key then
            -- (an empty queue is no backlog: the next claim may take the idle statement)
            if current_setting('runlane.claim_backlog', true) = 'on' then
                perform set_config('runlane.claim_backlog', 'off', false);
            end if;
            return;
        end if;
        -- (no receipt read: none yet, claim_key is never null; eligible runs got this far)
        if v_key is null and p_worker is not null then
            insert into runlane.claim_receipts as c (worker_id, lanes, claim_key)
            values (p_worker, v_lanes, p_claim_key)
            on conflict (worker_id, lanes) do nothing;
            v_created := found;
            if not v_created then  -- a concurrent first claim created it and has committed
                select c.claim_key, c.run_ids, c.fences into v_key, v_ids, v_fences
                from runlane.claim_receipts as c
                where c.worker_id = p_worker and c.lanes = v_lanes
                for update;
            end if;
        end if;
        if not v_created and v_key = p_claim_key then
            return query
            select
                r.run_id,
                r.fence,
                r.attempts,
                r.lane,
                r.trigger,
                r.agent_id,
                r.org_id,
                r.thread_id,
                r.prompt,
                r.model,
                r.checkpoint,
                s.agent_iteration_cap,
                runlane._late_notice(r),
                runlane._timing_row(r.run_id, 'run.execution_started'),
                null::text
            from unnest(v_ids, v_fences) with ordinality as u (run_id, fence, position)
            join runlane.runs as r on r.run_id = u.run_id and r.fence = u.fence and r.state = 'running'
            join runlane.platform_settings as s on s.org_id = r.org_id
            order by u.position;
            if p_report_skipped then
                return query
                select
                    r.run_id, r.fence, r.attempts, r.lane, r.trigger, r.agent_id, r.org_id,
                    r.thread_id, null::text, r.model, null::jsonb, null::int, null::jsonb,
                    null::jsonb, r.reason
                from unnest(v_ids, v_fences) with ordinality as u (run_id, fence, position)
                join runlane.runs as r on r.run_id = u.run_id
                where u.fence = -1 and r.state = 'skipped'
                order by u.position;
            end if;
            return;
        end if;
    end if;

    -- The per-worker organization bound (runlane._max_per_org): a plain number is read
    -- here, anything else (unset, 0, padded, malformed) by the function.
    v_max_per_org := case
        when current_setting('runlane.max_per_org', true) ~ '^[1-9][0-9]{0,5}$'
            then current_setting('runlane.max_per_org', true)::int
        when coalesce(current_setting('runlane.max_per_org', true), '') <> ''
            then runlane._max_per_org()
    end;
    -- How it binds (runlane.max_per_org_mode): strict (unset) or work_conserving (the
    -- worker's: see the fair path below). A plain value is read here, anything else by
    -- the function.
    if v_max_per_org is not null then
        v_mode := current_setting('runlane.max_per_org_mode', true);
        v_work_conserving := case
            when v_mode = 'work_conserving' then true
            when coalesce(v_mode, '') in ('', 'strict') then false
            else runlane._max_per_org_work_conserving()
        end;
    end if;
    -- (the idle statement below takes every eligible run: a work-conserving bound binds
    -- only while runs wait after the claim, and after an idle claim none does)
    v_idle_bound := case when not v_work_conserving then v_max_per_org end;

    -- GUARD: the bound holds across the worker's lanes. Each lane claims on its own
    -- connection, and a claim counts the worker's running runs without another lane's
    -- uncommitted claim: two lanes claiming at once could each fill an organization's
    -- room. So a keyed claim under the bound first locks the worker's bound row in
    -- claim_receipts (lanes '{}', after its own lane's row: one order for every lane), and
    -- the counts below, later statements, see whatever claim of the worker committed while
    -- it waited. The worker's bounded claims take turns; other workers never wait on it.
    -- A work-conserving bound needs the row only on the fair path (the idle statement
    -- applies no bound): it is locked there, and an idle chat claim never waits for it.
    if v_idle_bound is not null and p_claim_key is not null then
        perform runlane._lock_worker_bound(p_worker);
    end if;

    -- GUARD: an idle queue, the chat latency that matters most. When every eligible run of
    -- the lanes fits in this claim, no order can be unfair: the claim takes them all. So
    -- when no background lane is asked for (no cap to count, no gate to read) and none of
    -- them is bound to a computer (no lease to take) or a timer (no late notice), one
    -- statement finds and locks them, in the order the fair path would return them, and
    -- applies the per-worker organization bound (the worker's running runs counted once,
    -- by organization), instead of a window and a second read. Decided in the statement's
    -- own snapshot; more eligible runs than p_limit take the fair path below. A session
    -- whose last claim found a backlog (runlane.claim_backlog, a session setting the claim
    -- keeps itself, like claim_skip_window) goes to the fair path at once: during a drain
    -- this statement read p_limit + 1 runs on every claim only to find them too many
    -- (183 us per claim in a 4-worker drain, issue 15). The fair path's exit below turns
    -- it off again when its read held the whole queue for this worker. Both paths are
    -- exact: the setting changes only what a claim costs.
    if not 'background' = any(p_lanes)
       and coalesce(current_setting('runlane.claim_backlog', true), '') <> 'on' then
        with eligible as materialized (
            -- The oldest p_limit + 1 eligible runs of the lane, in claim order, in one
            -- descent of runs_lane_claim_order_idx: never a walk of the other lane's queued
            -- runs. (The idle path's one lane is interactive: a background lane takes the
            -- fair path. A read of both lanes in claim order stepped over every queued
            -- background run to fill p_limit + 1 chat candidates: 2,000 queued runs read
            -- on every chat claim.)
            select r.run_id, r.org_id, r.claim_class, r.computer_id, r.timer_routine
            from runlane.runs as r
            where r.state = 'queued'
              and r.lane = p_lanes[1]
              and r.claim_class >= 0
              and (r.wake_at is null or r.wake_at <= now())
            order by r.claim_class, r.run_id
            limit p_limit + 1
        ),
        fits as (
            select
                count(*) <= p_limit
                and count(e.computer_id) = 0
                and count(e.timer_routine) = 0 as all_taken
            from eligible as e
        ),
        locked as (
            -- (one probe of runs_pkey per candidate, whatever the statistics say: a semi
            -- join was planned as a scan of every queued run, or of the whole table. The
            -- state test is written "is true" so that no partial index of unfinished runs
            -- qualifies: planned on a nearly empty table, one of them tied with the
            -- primary key, and the probe walked every queued run. The fence as locked is
            -- the receipt's: no second read of the runs.)
            select k.run_id, k.fence
            from eligible as e
            cross join lateral (
                select r.run_id, r.fence
                from runlane.runs as r
                where r.run_id = e.run_id
                  and (select f.all_taken from fits as f)
                  and (r.state = 'queued') is true
                  and (r.wake_at is null or r.wake_at <= now())
                for update of r skip locked
            ) as k
        ),
        ordered as (
            -- round = the run's round in the fair order; org_rank = its place among its
            -- organization's runs in this claim (the fair order keeps each organization's
            -- runs oldest first, class 0 before class 1)
            select
                e.run_id,
                e.org_id,
                e.claim_class,
                row_number() over (
                    partition by e.claim_class, e.org_id order by e.run_id
                ) as round,
                row_number() over (
                    partition by e.org_id order by e.claim_class, e.run_id
                ) as org_rank
            from eligible as e
            where e.run_id in (select k.run_id from locked as k)
        ),
        held as (
            -- (only with a bound; runs_worker_running_idx, once per claim)
            select mine.org_id, count(*) as running
            from runlane.runs as mine
            where v_idle_bound is not null
              and mine.lease_owner = p_worker
              and mine.state = 'running'
            group by mine.org_id
        )
        select
            f.all_taken,
            coalesce((
                select array_agg(o.run_id order by o.claim_class, o.round, o.run_id)
                from ordered as o
                left join held as h on h.org_id = o.org_id
                where v_idle_bound is null
                   or o.org_rank <= v_idle_bound - coalesce(h.running, 0)
            ), '{}'),
            lk.run_ids,
            lk.fences
        into v_idle, v_accepted, v_locked, v_locked_fences
        from fits as f
        cross join (
            select coalesce(array_agg(k.run_id), '{}'), coalesce(array_agg(k.fence), '{}')
            from locked as k
        ) as lk (run_ids, fences);

        if v_idle and cardinality(v_accepted) = 0 then
            perform runlane._commit_empty_claim_without_flush();  -- (locks only; see there)
            return;
        end if;
        if not v_idle then
            perform set_config('runlane.claim_backlog', 'on', false);
        end if;
    end if;

    -- Fences on this server's timeline start above every fence an earlier primary handed
    -- out (runlane._fence_floor): a claim lost with an asynchronous standby is never
    -- handed out again under its own fence.
    if v_idle then
        v_fence_floor := runlane._fence_floor();  -- (the idle path claims at least one run)
    else
        v_tried := '{}';
        v_locked := '{}';
        v_locked_orgs := '{}';
        v_locked_fences := '{}';
        v_orgs := '{}';
        v_computers := '{}';
        v_computers_taken := '{}';
        if v_work_conserving and p_claim_key is not null then
            perform runlane._lock_worker_bound(p_worker);  -- (the bound row: see above)
        end if;

        -- GUARD: organizations already at their cap (a hint to skip their rows cheaply; the
        -- exact check comes after the organization locks below). Cost follows running rows.
        -- (and every organization's running background runs, for the lock's room below)
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

        -- Fair claim order, candidates first (no locks): per class, a loose index scan finds
        -- every (lane, organization) with queued runs, then round robin across organizations
        -- (round k = each organization's k-th oldest eligible run; within a round, oldest
        -- first). v_target is more than p_limit so that rows concurrent claimers hold (and
        -- skip-locked below) leave us enough; a short round asks again past those rows.
        v_target := 2 * p_limit + 8;
        -- GUARD: the per-worker organization bound (session setting runlane.max_per_org, see
        -- runlane._max_per_org): p_worker never holds more than that many running runs of one
        -- organization, so one organization's burst leaves the worker room for the others'
        -- (round robin puts their runs early among the candidates). It applies before any
        -- lock: an organization's room on this worker is the bound less what the worker runs
        -- of it (counted once per claim, by organization) less what this claim locked of it
        -- already; an organization without room is not read, and of the others only the
        -- first candidates up to their room are locked (below). Runs over the bound stay
        -- queued, untouched. Locking up to p_limit and keeping what the bound allowed locked
        -- (and WAL-logged) about twice the rows a worker at its bound claimed in a
        -- one-tenant drain, and the other claimers skipped the rows it let go (issue 15).
        -- (The idle statement above applies the same bound itself.)
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
        v_skip_window := coalesce(current_setting('runlane.claim_skip_window', true), '') = 'on';
        -- (up to 4 reads per pass; a work-conserving bound may add a second pass, below)
        for v_attempt in 1..8 loop
            if v_pass_two then
                -- GUARD: the work-conserving bound (runlane.max_per_org_mode =
                -- work_conserving, the worker's). The bound exists for fairness: it binds
                -- only while an organization within its room has runs waiting. The pass
                -- above applied it: every eligible run of an organization within its room
                -- on this worker came first (as far as the page and the other claimers'
                -- locks allowed). The page still has room and the bound held runs back:
                -- nothing within its room waits any more, so this pass reads and locks
                -- for the rest of the page without the bound, round robin as always
                -- (organizations at their bound among themselves). A lone organization's
                -- backlog is then claimed as far as the page (and the worker's memory
                -- admission, which sizes the claims) allows, never held at the bound.
                v_pass_two := false;
                v_max_per_org := null;
                v_last_attempt := v_attempt + 3;
                v_tried := v_tried || v_lock_candidates || v_locked;
                v_target := 2 * (p_limit - cardinality(v_locked)) + 8;
                v_scanned_orgs_0 := null;
                v_scanned_orgs_1 := null;
            end if;
            v_candidates := '{}';
            v_candidate_orgs := '{}';
            v_bounded_orgs := '{}';
            v_read_cut := false;
            if v_max_per_org is not null then
                -- What each organization uses of the bound (held, plus locked by this
                -- claim), and those without room.
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
            v_later_known := false;
            foreach v_class in array array[0, 1]::smallint[] loop
                exit when cardinality(v_candidates) >= v_target;
                v_need := v_target - cardinality(v_candidates);
                -- GUARD: this claim's loose scan of the class, an attempt ago, found only
                -- organizations that are at the bound now (the lock stopped at their room):
                -- no scan again for nothing.
                continue when (
                    case v_class when 0 then v_scanned_orgs_0 else v_scanned_orgs_1 end
                ) <@ v_bounded_orgs;

                if v_later_known then
                    -- Class 1 as the class-0 window saw it: the oldest of its eligible runs
                    -- (all of them when that window was not full), a prefix of the class in
                    -- run_id order, so the same exactness rule holds.
                    v_class_candidates := v_later_candidates;
                    v_class_orgs := v_later_candidate_orgs;
                    v_org_count := v_later_orgs;
                    if v_later_whole or v_org_count >= v_need then
                        v_candidates := v_candidates || v_class_candidates[1:v_need];
                        v_candidate_orgs := v_candidate_orgs || v_class_orgs[1:v_need];
                        continue;
                    end if;
                elsif v_skip_window
                      or cardinality(v_bounded_orgs) > 0 or cardinality(v_full_orgs) > 0 then
                    -- GUARD: this session's last window was full and held too few
                    -- organizations to answer (runlane.claim_skip_window, below): the loose
                    -- index scan answers alone. Both are exact: the setting only saves the
                    -- window's read (4 x v_need rows) when it would be read for nothing.
                    -- So does an organization left out (at the bound on this worker, or at
                    -- its cap): the window, in run order, would filter its queued runs one
                    -- by one, a whole backlog on every claim (2 ms at 3,600 runs), while the
                    -- loose scan steps over it in one descent.
                    null;
                else
                    -- GUARD: the window, the oldest eligible runs of this class and later
                    -- ones in claim order (runs_lane_claim_order_idx). Every eligible run of
                    -- the class older than the window's newest is in it, so its order is
                    -- exact when it holds the whole class or when its first round alone (one
                    -- run per organization) fills v_need. Class-1 rows in a class-0 window
                    -- are kept for class 1 (the class-0 rows all came before them). No
                    -- organization is left out here (the branch above takes every claim that
                    -- leaves one out), so the window names none: with one organization in
                    -- the statistics, "org_id <> all($n)" is estimated to keep no row, and
                    -- the generic plan then read the whole queue through a bitmap and sorted
                    -- it (10-15 ms at 20,000 queued runs) instead of stopping after
                    -- 4 x v_need entries of the claim-order index.
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
                            -- Each lane's oldest, merged: every one of the 4 x v_need oldest
                            -- of the lanes is among its own lane's 4 x v_need oldest. (One
                            -- read per lane, runs_lane_claim_order_idx: a read of both lanes
                            -- in claim order stepped over every queued run of the other lane,
                            -- 5,000 background runs on every claim of a chat backlog.)
                            select o.run_id, o.org_id, o.claim_class
                            from unnest(p_lanes) as l (lane)
                            cross join lateral (
                                -- (claim_class >= and the full index order keep the planner
                                -- on the index, never on a primary-key walk through history)
                                select r.run_id, r.org_id, r.claim_class
                                from runlane.runs as r
                                where r.state = 'queued'
                                  and r.lane = l.lane
                                  and r.claim_class >= v_class
                                  and r.run_id <> all(v_tried)
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

                    -- Class 1 needs no window of its own when this one holds class-1 rows
                    -- (or the window was not full: then class 1 has no eligible run).
                    v_later_whole := v_window_rows + v_later_rows < 4 * v_need;
                    v_later_known := v_class = 0 and (v_later_rows > 0 or v_later_whole);
                    if v_window_rows < 4 * v_need or v_org_count >= v_need then
                        v_candidates := v_candidates || v_class_candidates[1:v_need];
                        v_candidate_orgs := v_candidate_orgs || v_class_orgs[1:v_need];
                        continue;
                    end if;
                    -- Read for nothing: a few organizations own the oldest runs (one big
                    -- tenant's backlog). This session's next claims go to the loose index
                    -- scan first, until it finds enough organizations again.
                    v_skip_window := true;
                    perform set_config('runlane.claim_skip_window', 'on', false);
                end if;

                -- GUARD: a few organizations fill the window (a skewed queue). A loose index
                -- scan (runs_fair_claim_idx) descends once per (lane, organization) and reads
                -- only that organization's oldest eligible run: its head, never the rest.
                with recursive heads (lane, org_id, run_id) as (
                    select l.lane, h.org_id, h.run_id
                    from unnest(p_lanes) as l (lane)
                    cross join lateral (
                        select r.org_id, r.run_id
                        from runlane.runs as r
                        where r.state = 'queued'
                          and r.claim_class = v_class
                          and r.lane = l.lane
                          and r.run_id <> all(v_tried)
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
                          and r.claim_class = v_class
                          and r.lane = o.lane
                          and r.org_id > o.org_id
                          and r.run_id <> all(v_tried)
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
                into v_scan_lanes, v_scan_orgs, v_scan_heads, v_org_count
                from heads as h
                where not (h.lane = 'background' and h.org_id = any(v_full_orgs))
                  and h.org_id <> all(v_bounded_orgs);

                if v_class = 0 then
                    v_scanned_orgs_0 := v_scan_orgs;
                else
                    v_scanned_orgs_1 := v_scan_orgs;
                end if;
                continue when v_org_count = 0;

                -- Enough organizations: round one (each one's oldest head across lanes) is it.
                if v_org_count >= v_need then
                    if v_skip_window then  -- the window answers again from the next claim
                        v_skip_window := false;
                        perform set_config('runlane.claim_skip_window', 'off', false);
                    end if;
                    select
                        coalesce(array_agg(f.run_id order by f.run_id), '{}'),
                        coalesce(array_agg(f.org_id order by f.run_id), '{}')
                    into v_class_candidates, v_class_orgs
                    from (
                        select h.org_id, min(h.run_id) as run_id
                        from unnest(v_scan_orgs, v_scan_heads) as h (org_id, run_id)
                        group by h.org_id
                        order by 2
                        limit v_need
                    ) as f;
                    v_candidates := v_candidates || v_class_candidates;
                    v_candidate_orgs := v_candidate_orgs || v_class_orgs;
                    continue;
                end if;

                -- Rounds: each organization's k oldest eligible runs (merged across lanes),
                -- k grown until the class yields v_need candidates or no organization has more.
                -- With the bound, an organization is read no further than its room on this
                -- worker (what the lock below could take of it): a worker at its bound in a
                -- one-tenant drain read 2 x p_limit + 8 rows to lock the 40-odd it had room
                -- for (issue 15). v_cut_at_room: some organization was cut there, so a short
                -- read is not the whole queue (the exit rule below).
                v_k := ceil(v_need::numeric / v_org_count)::int;
                loop
                    select
                        coalesce(array_agg(c.run_id order by c.round, c.run_id), '{}'),
                        coalesce(array_agg(c.org_id order by c.round, c.run_id), '{}'),
                        count(*) filter (where c.round = v_k),
                        coalesce(bool_or(c.round = c.room and c.room < v_k), false)
                    into v_class_candidates, v_class_orgs, v_saturated, v_cut_at_room
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
                                    v_max_per_org
                                    - coalesce(v_used_counts[array_position(v_used_orgs, s.org_id)], 0),
                                    v_k
                                ) as room
                            from unnest(v_scan_lanes, v_scan_orgs) as s (lane, org_id)
                        ) as o
                        cross join lateral (
                            -- GUARD: org_id is bounded on both sides, not equated: with an
                            -- equality the planner drops org_id from the sort order, and
                            -- runs_pkey then gives run_id order as well as runs_fair_claim_idx
                            -- does. Under statistics gathered while every run was queued it
                            -- picks the primary key and filters every finished run on each
                            -- claim (quadratic over a drain). Bounded, only the index has
                            -- the order: the primary key would have to sort the whole table.
                            select r.run_id
                            from runlane.runs as r
                            where r.state = 'queued'
                              and r.claim_class = v_class
                              and r.lane = o.lane
                              and r.org_id >= o.org_id
                              and r.org_id <= o.org_id
                              and r.run_id <> all(v_tried)
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

                    exit when cardinality(v_class_candidates) >= v_need or v_saturated = 0;
                    v_k := v_k + ceil((v_need - cardinality(v_class_candidates))::numeric / v_saturated)::int;
                end loop;
                v_read_cut := v_read_cut or v_cut_at_room;

                v_candidates := v_candidates || v_class_candidates[1:v_need];
                v_candidate_orgs := v_candidate_orgs || v_class_orgs[1:v_need];
            end loop;

            if cardinality(v_candidates) = 0 then
                -- (nothing more to read in this pass; a work-conserving bound that held
                -- runs back reads on without it, for the rest of the page)
                v_pass_two := v_work_conserving and v_max_per_org is not null and v_bound_cut
                    and cardinality(v_locked) < p_limit;
                exit when not v_pass_two;
                continue;
            end if;

            -- GUARD: with the bound, only each organization's first candidates up to its room
            -- on this worker are locked (the rest wait, untried, for a later read of this
            -- claim if rows other claimers hold leave room): a worker at its bound in a
            -- one-tenant drain locks the runs it claims, not a page of them, and one
            -- organization's extra candidates never take the lock's place from another's.
            v_lock_candidates := v_candidates;
            if v_max_per_org is not null then
                select coalesce(array_agg(c.run_id order by c.position) filter (
                    where c.org_rank
                        <= v_max_per_org - coalesce(v_used_counts[array_position(v_used_orgs, c.org_id)], 0)
                ), '{}')
                into v_lock_candidates
                from (
                    select
                        u.run_id,
                        u.position,
                        u.org_id,
                        row_number() over (partition by u.org_id order by u.position) as org_rank
                    from unnest(v_candidates, v_candidate_orgs) with ordinality as u (run_id, org_id, position)
                ) as c;
                v_bound_cut := v_bound_cut or v_read_cut
                    or cardinality(v_lock_candidates) < cardinality(v_candidates);
            end if;
            v_taken := 0;

            -- Lock in claim order, skipping rows other claimers hold; a row claimed and
            -- committed since the candidates were read is re-checked and left out. Also
            -- noted: the organizations of locked background runs and the computers of locked
            -- runs (what the cap and the computer lease below need).
            -- GUARD: the gates of seed 001 ("the run starts if" its agent is switched on, not
            -- locked, has a model and its owner is within budget) are read with the lock, for
            -- background runs only: the agent row and the organization's budget setting are
            -- two primary-key probes per background row, no extra statement. A run
            -- whose gate is closed is ended skipped (runlane._skip_gated_runs) and the claim
            -- locks on through the same candidates, so the page stays as full as the queue
            -- allows. The budget needs weekly_spend: only for organizations with a budget.
            -- GUARD: an organization that reaches its cap within this claim. A locked
            -- background run beyond its organization's room (its cap, less its running
            -- background runs as this claim first counted them, less what this claim locked
            -- of it already) is left queued, locks only, the organization is read and
            -- locked no further (v_full_orgs), and the claim locks on through the other
            -- candidates in its place: the page is as full as the caps allow. (Before,
            -- its place stayed empty: a claim of 20 on both lanes over 50 chat runs and an
            -- organization capped at one took 11.) The exact check under the
            -- organizations' locks, below, still decides: this one only saves places.
            loop
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
                    -- (no organization can be over its room when the background runs kept
                    -- are no more than the least room among their organizations)
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
                        -- the organization's room for background runs: its cap, less its
                        -- running ones as first counted, less what this claim locked of it
                        -- (null for a chat run: no cap, nothing computed)
                        case when g.cap is not null then
                            g.cap
                            - coalesce(v_busy_counts[array_position(v_busy_orgs, r.org_id)], 0)
                            - cardinality(array_positions(v_orgs, r.org_id))
                        end as room
                    from unnest(v_lock_candidates) with ordinality as w (run_id, position)
                    join runlane.runs as r on r.run_id = w.run_id
                    left join lateral (
                        -- (r.lane first: an interactive run reads neither row; one
                        -- probe of each for a background run's gate and cap)
                        select
                            case
                                when not a.enabled then 'agent_off'
                                when a.admin_locked then 'agent_locked'
                                when coalesce(a.model, '') = '' then 'no_model'
                                when s.agent_weekly_budget is not null then 'budget'  -- checked below
                            end as gate,
                            s.agent_max_concurrency as cap
                        from runlane.agents as a
                        cross join runlane.platform_settings as s
                        where r.lane = 'background' and a.agent_id = r.agent_id and s.org_id = r.org_id
                        offset 0  -- (kept a subquery: pulled up, r.lane was tested after the probes)
                    ) as g on true
                    where r.state = 'queued'
                      and r.run_id <> all(v_locked)  -- (our own locks do not skip them)
                      and not (r.lane = 'background' and r.org_id = any(v_full_orgs))
                      and (r.wake_at is null or r.wake_at <= now())
                      and (r.computer_id is null or not exists (
                          select 1
                          from runlane.computer_leases as cl
                          where cl.computer_id = r.computer_id
                            and cl.expires_at > now()
                            and cl.run_id <> r.run_id
                      ))
                    order by w.position
                    limit p_limit - cardinality(v_locked)
                    for update of r skip locked
                ) as c;

                -- GUARD: the runs beyond their organization's room (rare: an organization
                -- reaching its cap in this claim), in claim order.
                v_capped := '{}';
                v_capped_orgs := '{}';
                if v_room_exceeded then
                    select
                        coalesce(array_agg(k.run_id) filter (where k.over), '{}'),
                        coalesce(array_agg(distinct k.org_id) filter (where k.over), '{}')
                    into v_capped, v_capped_orgs
                    from (
                        select
                            m.run_id,
                            m.org_id,
                            row_number() over (partition by m.org_id order by m.position)
                            > m.room as over
                        from unnest(v_more_bg_runs, v_more_bg_orgs, v_more_bg_rooms)
                            with ordinality as m (run_id, org_id, room, position)
                    ) as k;
                    v_budget_runs := array(
                        select b.run_id from unnest(v_budget_runs) as b (run_id)
                        where b.run_id <> all(v_capped)
                    );
                end if;

                -- GUARD: the budget, once per owner of the locked runs of budgeted organizations.
                v_over := '{}';
                if cardinality(v_budget_runs) > 0 then
                    with owners as (
                        select a.owner_id, min(s.agent_weekly_budget) as budget
                        from runlane.runs as r
                        join runlane.agents as a on a.agent_id = r.agent_id
                        join runlane.platform_settings as s on s.org_id = r.org_id
                        where r.run_id = any(v_budget_runs)
                        group by a.owner_id
                    ),
                    spent as materialized (
                        select o.owner_id
                        from owners as o
                        where runlane.weekly_spend(o.owner_id, now()) >= o.budget
                    )
                    select coalesce(array_agg(r.run_id), '{}')
                    into v_over
                    from runlane.runs as r
                    join runlane.agents as a on a.agent_id = r.agent_id
                    where r.run_id = any(v_budget_runs)
                      and a.owner_id in (select p.owner_id from spent as p);
                    if cardinality(v_over) > 0 then
                        v_gated := v_gated || v_over;
                        v_gate_reasons := v_gate_reasons
                            || array_fill('budget_exhausted'::text, array[cardinality(v_over)]);
                    end if;
                end if;
                -- The runs kept, without those over the room or the budget.
                if cardinality(v_capped) > 0 or cardinality(v_over) > 0 then
                    select
                        coalesce(array_agg(m.run_id order by m.position), '{}'),
                        coalesce(array_agg(r.org_id) filter (where r.lane = 'background'), '{}'),
                        coalesce(array_agg(r.computer_id) filter (where r.computer_id is not null), '{}'),
                        coalesce(array_agg(r.org_id order by m.position), '{}'),
                        coalesce(array_agg(r.fence order by m.position), '{}')
                    into v_more, v_more_orgs, v_more_computers, v_more_all_orgs, v_more_fences
                    from unnest(v_more) with ordinality as m (run_id, position)
                    join runlane.runs as r on r.run_id = m.run_id
                    where m.run_id <> all(v_over) and m.run_id <> all(v_capped);
                end if;

                v_locked := v_locked || v_more;
                v_locked_orgs := v_locked_orgs || v_more_all_orgs;
                v_locked_fences := v_locked_fences || v_more_fences;
                v_taken := v_taken + cardinality(v_more) + cardinality(v_gated) + cardinality(v_capped);
                v_orgs := v_orgs || v_more_orgs;
                v_computers := v_computers || v_more_computers;
                v_full_orgs := v_full_orgs || v_capped_orgs;

                exit when cardinality(v_gated) = 0 and cardinality(v_capped) = 0;
                if cardinality(v_gated) > 0 then
                    perform runlane._skip_gated_runs(v_gated, v_gate_reasons);
                    v_skipped := v_skipped || v_gated;
                end if;
                exit when cardinality(v_locked) >= p_limit;
            end loop;

            -- (short candidates are the whole queue for this worker, unless the bound held
            -- some of them back, or cut an organization's read at its room, and rows other
            -- claimers hold left room for them)
            if cardinality(v_locked) >= p_limit
               or cardinality(v_candidates) < v_target
                  and (cardinality(v_lock_candidates) = cardinality(v_candidates) and not v_read_cut
                       or v_taken >= cardinality(v_lock_candidates))
               or v_attempt >= v_last_attempt then
                v_pass_two := v_work_conserving and v_max_per_org is not null and v_bound_cut
                    and cardinality(v_locked) < p_limit;
                exit when not v_pass_two;
                continue;
            end if;
            v_tried := v_tried || v_lock_candidates;
            -- Concurrent claimers took more than the margin: read twice as far next time.
            -- (Workers starting together on one backlog race for its oldest runs; with a
            -- fixed margin a small first claim could lose all four times and come back
            -- short, and a worker takes a short page for a drained queue.)
            v_target := 2 * v_target;
        end loop;

        -- The read held the whole queue for this worker (short, not cut at a room, no
        -- organization held back at the bound): the next claim of this session tries the
        -- idle statement again.
        if cardinality(v_candidates) < v_target and not v_read_cut
           and cardinality(v_bounded_orgs) = 0
           and current_setting('runlane.claim_backlog', true) = 'on' then
            perform set_config('runlane.claim_backlog', 'off', false);
        end if;

        if cardinality(v_locked) = 0 and cardinality(v_skipped) = 0 then
            perform runlane._commit_empty_claim_without_flush();  -- (locks only; see there)
            return;
        end if;

        if cardinality(v_orgs) = 0 and cardinality(v_computers) <= 1 then
            -- No background run to cap, no computer wanted twice: every locked run is taken.
            v_accepted := v_locked;
        else
            -- GUARD: serialize background claims per organization, in a fixed order (no
            -- deadlocks), on the organization's row in runlane.org_claim_locks: a row only
            -- claim_runs locks (no role has a privilege on the table, no other function
            -- locks it). So claimers of one organization wait for each other, briefly, and
            -- the count below is exact, while an API transaction left open on the
            -- organization (put_org locks its platform_settings row, put_agent its agent
            -- rows, run_now its agent) never holds up a claim: the claim reads those rows
            -- without a lock. Not SKIP LOCKED: a claim that skipped an organization another
            -- claimer holds would leave its runs queued until the next scan or notification
            -- (a short page ends the worker's pass), a background latency cost among
            -- claimers for nothing. A row missing (an organization created before its
            -- trigger was in place) is added first, in the same order, then locked.
            if cardinality(v_orgs) > 0 then
                if to_regclass('runlane.org_claim_locks') is null then
                    -- (a schema before 0019: the organization's settings row, as then)
                    perform 1
                    from runlane.platform_settings as s
                    where s.org_id = any(v_orgs)
                    order by s.org_id
                    for no key update;
                else
                    perform 1
                    from runlane.org_claim_locks as l
                    where l.org_id = any(v_orgs)
                    order by l.org_id
                    for update;
                    get diagnostics v_lock_rows = row_count;
                    if v_lock_rows < (select count(distinct o.org_id) from unnest(v_orgs) as o (org_id)) then
                        insert into runlane.org_claim_locks as l (org_id)
                        select distinct o.org_id
                        from unnest(v_orgs) as o (org_id)
                        order by o.org_id
                        on conflict (org_id) do nothing;
                        perform 1
                        from runlane.org_claim_locks as l
                        where l.org_id = any(v_orgs)
                        order by l.org_id
                        for update;
                    end if;
                end if;
            end if;

            -- A new statement, a new snapshot: running counts now include every claim that
            -- committed while we waited for the organization locks.
            select coalesce(array_agg(k.run_id order by k.position), '{}')
            into v_accepted
            from (
                select
                    r.run_id,
                    r.org_id,
                    r.lane,
                    r.computer_id,
                    l.position,
                    row_number() over (partition by r.org_id, r.lane order by l.position) as org_rank,
                    row_number() over (partition by r.computer_id order by l.position) as computer_rank
                from unnest(v_locked) with ordinality as l (run_id, position)
                join runlane.runs as r on r.run_id = l.run_id
            ) as k
            join runlane.platform_settings as s on s.org_id = k.org_id
            left join lateral (
                select count(*) as running
                from runlane.runs as busy
                where busy.org_id = k.org_id and busy.lane = 'background' and busy.state = 'running'
            ) as b on k.lane = 'background'
            where (k.lane <> 'background' or k.org_rank <= s.agent_max_concurrency - b.running)
              and (k.computer_id is null or k.computer_rank = 1);
        end if;

        -- (the fence floor, below, before the computer leases that carry the fence)
        if cardinality(v_accepted) > 0 then
            v_fence_floor := runlane._fence_floor();
        end if;

        -- Computer ownership first: a lease that is live for another run is left alone, and
        -- that run is not claimed (it stays queued, untouched).
        if cardinality(v_computers) > 0 then
            with wanted as (
                select r.computer_id, r.run_id, greatest(r.fence + 1, v_fence_floor) as fence
                from runlane.runs as r
                where r.run_id = any(v_accepted) and r.computer_id is not null
                order by r.computer_id
            ),
            taken as (
                insert into runlane.computer_leases as cl (computer_id, run_id, fence, expires_at)
                select w.computer_id, w.run_id, w.fence, now() + p_lease
                from wanted as w
                order by w.computer_id
                on conflict (computer_id) do update
                set run_id = excluded.run_id, fence = excluded.fence, expires_at = excluded.expires_at
                where cl.expires_at <= now() or cl.run_id = excluded.run_id
                returning cl.run_id
            )
            select coalesce(array_agg(t.run_id), '{}') into v_computers_taken from taken as t;
        end if;
    end if;

    -- The claim, one statement: the runs' update, their run.claimed journal rows and the
    -- rows returned, built from the updated rows in hand (no second read of the runs).
    return query
    with claimed as (
        update runlane.runs as r
        set state = 'running',
            reason = null,
            fence = greatest(r.fence + 1, v_fence_floor),
            attempts = r.attempts + 1,
            lease_owner = p_worker,
            lease_expires_at = now() + p_lease,
            heartbeat_at = now(),
            -- execution timing starts after computer ownership, once per run
            first_started_at = coalesce(r.first_started_at, clock_timestamp())
        where r.run_id = any(v_accepted)
          and (r.computer_id is null or r.run_id = any(v_computers_taken))
        returning r as run
    ),
    ordered as (
        -- (the claim's order; array_position, not a join: fewer plan nodes to start on
        -- every claim, and at most 1000 runs)
        select c.run, array_position(v_accepted, (c.run).run_id) as position
        from claimed as c
    ),
    journal as (
        insert into runlane.run_events (run_id, event, detail)
        select
            (o.run).run_id,
            'run.claimed',
            jsonb_build_object(
                'fence', (o.run).fence,
                'attempt', (o.run).attempts,
                'resumed', (o.run).checkpoint is not null
            )
        from ordered as o
    )
    select
        (o.run).run_id,
        (o.run).fence,
        (o.run).attempts,
        (o.run).lane,
        (o.run).trigger,
        (o.run).agent_id,
        (o.run).org_id,
        (o.run).thread_id,
        (o.run).prompt,
        (o.run).model,
        (o.run).checkpoint,
        -- (probes by primary key, whatever the statistics say about the tables)
        (
            select s.agent_iteration_cap
            from runlane.platform_settings as s
            where s.org_id = (o.run).org_id
        ),
        -- (only timer runs can be late: no call for the others)
        case when (o.run).timer_routine is not null then runlane._late_notice(o.run) end,
        -- The run.execution_started row from the row in hand and its source message, as
        -- runlane.run_timing builds it (runlane._timing_of, inlined: its arguments are
        -- columns), without reading the run again.
        runlane._timing_of(o.run, coalesce(m.created_at, (o.run).created_at))
        || jsonb_build_object('event', 'run.execution_started'),
        null::text
    from ordered as o
    -- (one probe by primary key per run, whatever the statistics say: limit 1 keeps the
    -- subquery a per-row probe instead of a join the planner may turn into a scan)
    left join lateral (
        select source.created_at
        from runlane.messages as source
        where source.message_id = (o.run).source_message_id
        limit 1
    ) as m on true
    order by o.position;

    -- The receipt: the claimed runs in claim order (those of v_accepted now running: we
    -- hold their locks), then the skipped ones with fence -1. A statement of its own, only
    -- for a keyed claim: the unkeyed forms run on schemas older than claim_receipts
    -- (an upgrade's expand step, 0002). On the idle path (never a computer-bound run)
    -- and on the fair path without computer-bound runs every accepted run was claimed,
    -- under greatest(its fence as locked + 1, the floor), the claim's own expression: the
    -- receipt comes from the arrays in hand, no second read of the runs. Claims with
    -- computer-bound runs (one may have lost its lease race) read the runs again: one
    -- branch runs, the other's one-time condition is false.
    if p_claim_key is not null
       and (v_created or cardinality(v_accepted) > 0 or cardinality(v_skipped) > 0) then
        v_from_arrays := v_idle or cardinality(v_computers) = 0;
        update runlane.claim_receipts as c
        set claim_key = p_claim_key,
            run_ids = w.run_ids || v_skipped,
            fences = w.fences || array_fill(-1::bigint, array[cardinality(v_skipped)]),
            claimed_at = now()
        from (
            select
                coalesce(array_agg(k.run_id order by k.position), '{}') as run_ids,
                coalesce(array_agg(k.fence order by k.position), '{}') as fences
            from (
                select a.run_id, a.position, greatest(l.fence + 1, v_fence_floor) as fence
                from unnest(v_accepted) with ordinality as a (run_id, position)
                inner join unnest(v_locked, v_locked_fences) as l (run_id, fence)
                    on l.run_id = a.run_id
                where v_from_arrays
                union all
                select r.run_id, array_position(v_accepted, r.run_id), r.fence
                from runlane.runs as r
                where not v_from_arrays and r.run_id = any(v_accepted) and r.state = 'running'
            ) as k
        ) as w
        where c.worker_id = p_worker and c.lanes = v_lanes;
    end if;

    -- Every run locked was left queued (a cap, the bound, a computer's lease): locks only.
    if cardinality(v_accepted) = 0 and cardinality(v_skipped) = 0 then
        perform runlane._commit_empty_claim_without_flush();
    end if;

    -- GUARD: gates closed between queue and claim (rare): the runs the claim skipped.
    if p_report_skipped and cardinality(v_skipped) > 0 then
        return query
        select
            r.run_id, r.fence, r.attempts, r.lane, r.trigger, r.agent_id, r.org_id,
            r.thread_id, null::text, r.model, null::jsonb, null::int, null::jsonb,
            null::jsonb, r.reason
        from unnest(v_skipped) with ordinality as u (run_id, position)
        join runlane.runs as r on r.run_id = u.run_id
        order by u.position;
    end if;
end;
$$;

comment on function runlane.claim_runs(text, text[], int, interval, uuid, boolean) is
'The worker''s claim: claims runnable runs with lease, fence and computer lease (wake times, computer '
'ownership, per-organization caps, interactive-first order, round robin across organizations); a resend '
'with the key of the last claim of this worker and lane set returns that claim''s runs instead of '
'claiming anew; with p_report_skipped also the runs it ended skipped because a gate closed between '
'queue and claim (skipped_reason set; claimed rows have NULL).';

revoke all on function runlane.claim_runs(text, text[], int, interval, uuid, boolean) from public;
grant execute on function runlane.claim_runs(text, text[], int, interval, uuid, boolean) to runlane_worker;

-- claim_runs with a claim key: the six-argument claim (above) without the rows of skipped
-- runs. Same guarantees, same receipt: a resend with the key of the last claim of this
-- worker and lane set returns the runs that claim took. A null p_claim_key is the
-- four-argument form.
create or replace function runlane.claim_runs(
    p_worker text,
    p_lanes text[],
    p_limit int,
    p_lease interval,
    p_claim_key uuid
)
returns table (
    run_id bigint,
    fence bigint,
    attempt int,
    lane text,
    trigger text,
    agent_id text,
    org_id text,
    thread_id text,
    prompt text,
    model text,
    checkpoint jsonb,
    iteration_cap int,
    late_notice jsonb,
    timing jsonb
)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
begin
    -- (PL/pgSQL, not SQL: a SQL function with SET clauses is parsed and planned on every
    -- call; this statement's plan is kept for the session)
    return query
    select
        c.run_id, c.fence, c.attempt, c.lane, c.trigger, c.agent_id, c.org_id, c.thread_id,
        c.prompt, c.model, c.checkpoint, c.iteration_cap, c.late_notice, c.timing
    from runlane.claim_runs(p_worker, p_lanes, p_limit, p_lease, p_claim_key, false) as c;
end;
$$;

comment on function runlane.claim_runs(text, text[], int, interval, uuid) is
'claim_runs with a claim key: a resend with the key of the last claim of this worker and lane '
'set returns the runs that claim took (still running under the same fence) instead of claiming anew.';

revoke all on function runlane.claim_runs(text, text[], int, interval, uuid) from public;
grant execute on function runlane.claim_runs(text, text[], int, interval, uuid) to runlane_worker;

-- claim_runs with four arguments: the six-argument claim (above) without a claim key and
-- without the rows of skipped runs: only claimed runs, nothing recorded for a resend.
create or replace function runlane.claim_runs(
    p_worker text,
    p_lanes text[],
    p_limit int default 10,
    p_lease interval default '60 seconds'
)
returns table (
    run_id bigint,
    fence bigint,
    attempt int,
    lane text,
    trigger text,
    agent_id text,
    org_id text,
    thread_id text,
    prompt text,
    model text,
    checkpoint jsonb,
    iteration_cap int,
    late_notice jsonb,
    timing jsonb
)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
begin
    -- (PL/pgSQL, not SQL: a SQL function with SET clauses is parsed and planned on every
    -- call; this statement's plan is kept for the session)
    return query
    select
        c.run_id, c.fence, c.attempt, c.lane, c.trigger, c.agent_id, c.org_id, c.thread_id,
        c.prompt, c.model, c.checkpoint, c.iteration_cap, c.late_notice, c.timing
    from runlane.claim_runs(p_worker, p_lanes, p_limit, p_lease, null, false) as c;
end;
$$;

comment on function runlane.claim_runs(text, text[], int, interval) is
'Atomically claims runnable runs with lease, fence and computer lease, honouring wake times, '
'computer ownership, per-organization caps, interactive-first order and round robin across '
'organizations within a class.';

revoke all on function runlane.claim_runs(text, text[], int, interval) from public;
grant execute on function runlane.claim_runs(text, text[], int, interval) to runlane_worker;
