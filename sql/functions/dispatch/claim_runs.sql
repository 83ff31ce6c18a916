-- claim_runs: atomically takes up to p_limit runnable runs of p_lanes for p_worker and
-- returns what the worker needs to execute each. docs/design/claim.md gives the reasons.
--
-- Guarantees:
-- * Only runs whose handler is in p_handlers are read and claimed (null: any handler);
--   each row names its handler. A run moved by put_agent after this claim read it is
--   taken for the handler it was read with. Runs of other handlers cost the claim
--   nothing (runs.handler leads the claim indexes after the lane); caps, the bound and
--   the gates count every run whatever its handler.
-- * Concurrent callers never get the same run (FOR UPDATE SKIP LOCKED). Runs not awake
--   (wake_at in the future) and runs whose computer another run's live lease holds are
--   not touched; the runs behind them are claimed.
-- * Interactive-class work (runs.claim_class 0) before scheduled and reaction work;
--   within a class round robin across organizations, oldest first within each, lanes
--   merged: a newcomer's run waits behind at most one run of each other organization.
-- * An organization never has more running background runs than agent_max_concurrency;
--   a worker never more running runs of one organization than runlane.max_per_org (a
--   session setting; strict, or work_conserving: binding only while an organization
--   within its room waits). A run held back by a cap or the bound stays queued, and the
--   claim takes other candidates in its place.
-- * A background run whose agent is off, admin-locked or without a model, or whose owner
--   spent the weekly budget, is ended skipped (runlane._skip_gated_runs), never claimed;
--   interactive runs are never gated.
-- * Each claimed run gets fence + 1 (at least runlane._fence_floor), attempts + 1, a lease
--   of p_lease, its computer lease, first_started_at once, and a run.claimed journal row
--   {fence, attempt, resumed}.
-- * A claim never waits for a lock an API login can hold, and a login limited to one
--   organization is refused (42501).
-- * Keyed (p_claim_key): the first call that commits records its runs and fences in
--   claim_receipts; a resend of that key claims nothing and returns those runs still
--   running under the same fence (and, with p_report_skipped, its skipped runs). A resend
--   racing its original waits for it. An empty claim records nothing (unless it created
--   the receipt); a null key records nothing.
-- * A claim that finds no eligible run writes nothing (no WAL flush); one that takes
--   nothing holds row locks only and, on runlane.autocommit_claims sessions, commits
--   without waiting for the flush.
-- * With p_report_skipped, the runs this claim skipped follow the claimed ones, with
--   skipped_reason set (claimed rows: null). A lane named twice is one lane.
-- * Errors: 22004, 22023 (arguments), 0A000 (not READ COMMITTED), 42501.
-- Returns per claimed run its late notice (timer runs started over 15 minutes late) and
-- its run.execution_started timing row.
create or replace function runlane.claim_runs(
    p_worker text,
    p_lanes text[],
    p_limit int,
    p_lease interval,
    p_claim_key uuid,
    p_report_skipped boolean,
    p_handlers text[]
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
    skipped_reason text,
    handler text
)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
set plan_cache_mode = force_generic_plan
as $$
#variable_conflict use_column
declare
    v_handlers text[];  -- the handlers read: p_handlers, or every handler with queued runs
    v_lanes text[];  -- p_lanes sorted: the receipt's key
    v_key uuid;
    v_ids bigint[];
    v_fences bigint[];
    v_created boolean := false;
    v_eligible boolean;
    v_max_per_org int;
    v_mode text;
    v_work_conserving boolean := false;
    v_idle_bound int;
    v_idle boolean := false;
    v_locked bigint[];
    v_locked_fences bigint[];
    v_accepted bigint[];
    v_skipped bigint[] := '{}';
    v_computers_taken bigint[];
    v_any_computer boolean := false;
    v_fence_floor bigint;
    v_from_arrays boolean;
    v_fair record;  -- runlane._claim_fair's answer
    v_distributed boolean;  -- Citus holds runlane.runs: runlane._claim_runs_of_node claims
begin
    -- GUARD: a login limited to one organization never claims (runlane.api_logins).
    perform runlane._refuse_scoped_worker();
    -- GUARD: the arguments, in one test on the usual path; runlane._claim_check_arguments
    -- names what is wrong (or deduplicates the lanes) only when it fails.
    if not coalesce(
        p_report_skipped is not null
        and length(p_worker) <= 256 and p_worker ~ '^[[:alnum:]]'
        and cardinality(p_lanes) = 1 and p_lanes <@ array['interactive', 'background']
        and p_limit between 1 and 1000
        and p_lease > interval '0' and p_lease <= interval '1 hour'
        and current_setting('transaction_isolation') = 'read committed',
        false
    ) then
        p_lanes := runlane._claim_check_arguments(p_worker, p_lanes, p_limit, p_lease, p_report_skipped);
    end if;
    -- GUARD: the handlers: one well-formed name on the usual path; more are checked and
    -- deduplicated by runlane._claim_check_handlers. None given: every handler with
    -- queued runs in the lanes (one index descent per handler). On a schema before 0021
    -- (a rolling upgrade) runs carry no handler: each is of handler 'default', and the
    -- claim reads without one (v_handlers null) by the statements of that schema.
    -- (Citus's catalog looked for first: on plain PostgreSQL one lookup, no further call)
    v_distributed := to_regclass('pg_catalog.pg_dist_partition') is not null
        and runlane._citus_distributed('runlane.runs');
    if v_distributed and p_handlers is null then
        v_handlers := null;  -- (any handler: runlane._claim_runs_of_node finds them on the node)
    elsif to_regclass('runlane.runs_handler_claim_order_idx') is null then
        if p_handlers is not null and not 'default' = any(p_handlers) then
            return;
        end if;
        v_handlers := null;
    elsif p_handlers is null then
        select coalesce(array_agg(distinct q.handler), '{}') into v_handlers
        from unnest(p_lanes) as l (lane)
        cross join lateral (
            with recursive found (handler) as (
                (
                    select r.handler
                    from runlane.runs as r
                    where r.state = 'queued' and r.lane = l.lane
                    order by r.handler
                    limit 1
                )
                union all
                select n.handler
                from found as f
                cross join lateral (
                    select r.handler
                    from runlane.runs as r
                    where r.state = 'queued' and r.lane = l.lane and r.handler > f.handler
                    order by r.handler
                    limit 1
                ) as n
            )
            select found.handler from found
        ) as q;
    elsif coalesce(cardinality(p_handlers) = 1 and p_handlers[1] ~ '^[a-z0-9_.-]{1,64}$', false) then
        v_handlers := p_handlers;
    else
        v_handlers := runlane._claim_check_handlers(p_handlers);
    end if;

    -- STEP: resend replay. One statement reads whether any run is eligible and, only if
    -- one is or the key is the recorded one, locks the receipt: an empty queue writes
    -- nothing. A resend of the recorded key returns the recorded runs instead of claiming.
    if p_claim_key is not null and not v_distributed then
        v_lanes := case when p_lanes[2] < p_lanes[1] then array[p_lanes[2], p_lanes[1]] else p_lanes end;
        if v_handlers is null then
            -- (before 0021: no probe; the receipt is read as when a run is eligible)
            v_eligible := true;
            select c.claim_key, c.run_ids, c.fences into v_key, v_ids, v_fences
            from runlane.claim_receipts as c
            where c.worker_id = p_worker and c.lanes = v_lanes
            for update;
        else
            -- (eligible: one descent of runs_handler_fair_claim_idx per class, lane and
            -- handler, limit 1)
            select q.eligible, c.claim_key, c.run_ids, c.fences
            into v_eligible, v_key, v_ids, v_fences
            from (
                select exists (
                    select 1
                    from unnest(p_lanes) as l (lane)
                    cross join unnest(v_handlers) as hd (handler)
                    cross join unnest(array[0, 1]::smallint[]) as k (claim_class)
                    cross join lateral (
                        select r.run_id
                        from runlane.runs as r
                        where r.state = 'queued'
                          and r.claim_class = k.claim_class
                          and r.lane = l.lane
                          and r.handler = hd.handler
                          and (r.wake_at is null or r.wake_at <= now())
                        order by r.org_id, r.run_id
                        limit 1
                    ) as e
                ) as eligible
                offset 0  -- (a subquery: pulled up, the probe would run again in the receipt's filter)
            ) as q
            left join lateral (
                select rc.claim_key, rc.run_ids, rc.fences
                from runlane.claim_receipts as rc
                where rc.worker_id = p_worker
                  and rc.lanes = v_lanes
                  and (q.eligible or rc.claim_key = p_claim_key)
                for update
            ) as c on true;
        end if;
        if not v_eligible and v_key is distinct from p_claim_key then
            -- (an empty queue is no backlog: the next claim may take the idle statement)
            if current_setting('runlane.claim_backlog', true) = 'on' then
                perform set_config('runlane.claim_backlog', 'off', false);
            end if;
            return;
        end if;
        -- (no receipt read: none yet, claim_key is never null; eligible runs got this far)
        if v_key is null and p_worker is not null then
            -- a worker's first claim creates its receipt (a concurrent one waits for it)
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
                rp.run_id, rp.fence, rp.attempt, rp.lane, rp.trigger, rp.agent_id, rp.org_id,
                rp.thread_id, rp.prompt, rp.model, rp.checkpoint, rp.iteration_cap,
                rp.late_notice, rp.timing, rp.skipped_reason,
                coalesce(
                    (select to_jsonb(r) ->> 'handler' from runlane.runs as r where r.run_id = rp.run_id),
                    'default'
                )
            from runlane._claim_replay(v_ids, v_fences, p_report_skipped)
                with ordinality as rp
            order by rp.ordinality;
            return;
        end if;
    end if;

    -- STEP: the per-worker organization bound (runlane.max_per_org) and its mode
    -- (runlane.max_per_org_mode). Plain values are read here, anything else by
    -- runlane._max_per_org and runlane._max_per_org_work_conserving.
    v_max_per_org := case
        when current_setting('runlane.max_per_org', true) ~ '^[1-9][0-9]{0,5}$'
            then current_setting('runlane.max_per_org', true)::int
        when coalesce(current_setting('runlane.max_per_org', true), '') <> ''
            then runlane._max_per_org()
    end;
    if v_max_per_org is not null then
        v_mode := current_setting('runlane.max_per_org_mode', true);
        v_work_conserving := case
            when v_mode = 'work_conserving' then true
            when coalesce(v_mode, '') in ('', 'strict') then false
            else runlane._max_per_org_work_conserving()
        end;
    end if;
    -- (an idle claim takes every eligible run: a work-conserving bound does not bind it)
    v_idle_bound := case when not v_work_conserving then v_max_per_org end;
    -- GUARD: a keyed claim under the bound locks the worker's bound row (after its lane's
    -- receipt: one order for every lane), so the worker's lanes claim one at a time.
    if v_idle_bound is not null and p_claim_key is not null and not v_distributed then
        perform runlane._lock_worker_bound(p_worker);
    end if;

    -- STEP: on a schema Citus distributes, the claim of this node's organizations.
    if v_distributed then
        return query
        select * from runlane._claim_runs_of_node(
            p_worker, p_lanes, v_handlers, p_limit, p_lease, p_claim_key, p_report_skipped,
            v_max_per_org, v_work_conserving
        );
        return;
    end if;

    -- STEP: idle chat fast path. No background lane asked for, and no session backlog
    -- (runlane.claim_backlog): when every eligible run fits in p_limit and none is bound
    -- to a computer or a timer, one statement finds, locks, orders (the fair path's
    -- order) and bounds them. More than fit: the fair path, and the session's next claims
    -- go there at once until a read holds the whole queue. (Before 0021, v_handlers
    -- null, the fair path answers: this statement reads by handler.)
    if not 'background' = any(p_lanes) and v_handlers is not null
       and coalesce(current_setting('runlane.claim_backlog', true), '') <> 'on' then
        with eligible as materialized (
            -- (the lane's oldest p_limit + 1 eligible runs of the handlers: one descent of
            -- runs_handler_claim_order_idx per handler)
            select e.run_id, e.org_id, e.claim_class, e.computer_id, e.timer_routine
            from unnest(v_handlers) as hd (handler)
            cross join lateral (
                select r.run_id, r.org_id, r.claim_class, r.computer_id, r.timer_routine
                from runlane.runs as r
                where r.state = 'queued'
                  and r.lane = p_lanes[1]
                  and r.handler = hd.handler
                  and r.claim_class >= 0
                  and (r.wake_at is null or r.wake_at <= now())
                order by r.claim_class, r.run_id
                limit p_limit + 1
            ) as e
            order by e.claim_class, e.run_id
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
            -- (one runs_pkey probe per candidate; "is true" keeps partial indexes of
            -- unfinished runs out of the plan; the fence as locked is the receipt's)
            select k.run_id, k.fence
            from eligible as e
            cross join lateral (
                select r.run_id, r.fence
                from runlane.runs as r
                where r.run_id = e.run_id
                  and r.org_id = e.org_id  -- (the whole primary key)
                  and (select f.all_taken from fits as f)
                  and (r.state = 'queued') is true
                  and r.handler = any(v_handlers)  -- (put_agent may move it meanwhile)
                  and (r.wake_at is null or r.wake_at <= now())
                for update of r skip locked
            ) as k
        ),
        ordered as (
            -- round: the run's round in the fair order; org_rank: its place among its
            -- organization's runs in this claim
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

    if v_idle then
        v_fence_floor := runlane._fence_floor();  -- (the idle path claims at least one run)
    else
        -- STEP: fair path (runlane._claim_fair): candidates read in the fair order and
        -- locked until the page is full, within the bound, the gates and the caps.
        v_fair := runlane._claim_fair(
            p_worker, p_lanes, v_handlers, p_limit, p_lease, p_claim_key, v_max_per_org, v_work_conserving
        );
        v_locked := v_fair.locked;
        v_locked_fences := v_fair.locked_fences;
        v_accepted := v_fair.accepted;
        v_skipped := v_fair.skipped;
        v_computers_taken := v_fair.computers_taken;
        v_fence_floor := v_fair.fence_floor;
        v_any_computer := v_fair.any_computer;
        if cardinality(v_locked) = 0 and cardinality(v_skipped) = 0 then
            perform runlane._commit_empty_claim_without_flush();  -- (locks only; see there)
            return;
        end if;
    end if;

    -- STEP: the claim write: the runs' update, their run.claimed journal rows and the rows
    -- returned, one statement, built from the updated rows in hand.
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
        -- (the claim's order; array_position: fewer plan nodes than a join)
        select c.run, array_position(v_accepted, (c.run).run_id) as position
        from claimed as c
    ),
    journal as materialized (
        -- (a volatile call: evaluated once, before the rows below are returned)
        select runlane._write_run_events(
            array_agg((o.run).run_id order by o.position),
            array_agg((o.run).org_id order by o.position),
            'run.claimed',
            array_agg(
                jsonb_build_object(
                    'fence', (o.run).fence,
                    'attempt', (o.run).attempts,
                    'resumed', (o.run).checkpoint is not null
                )
                order by o.position
            )
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
        null::text,
        -- (a worker of one handler reads only its runs; the row's own otherwise, and
        -- 'default' on a schema before 0021, whose runs carry none)
        case
            when cardinality(v_handlers) = 1 then v_handlers[1]
            else coalesce(to_jsonb(o.run) ->> 'handler', 'default')
        end
    from ordered as o
    cross join journal
    -- (one probe by primary key per run: limit 1 keeps it a per-row probe)
    left join lateral (
        select source.created_at
        from runlane.messages as source
        where source.message_id = (o.run).source_message_id
        limit 1
    ) as m on true
    order by o.position;

    -- STEP: the receipt, for a keyed claim: the claimed runs in claim order, then the
    -- skipped ones with fence -1. Built from the arrays in hand unless a computer-bound run
    -- was accepted (it may have lost its lease race): then the runs are read again.
    if p_claim_key is not null
       and (v_created or cardinality(v_accepted) > 0 or cardinality(v_skipped) > 0) then
        v_from_arrays := v_idle or not v_any_computer;
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

    -- STEP: the runs this claim skipped because a gate closed (rare), when asked for.
    if p_report_skipped and cardinality(v_skipped) > 0 then
        return query
        select
            r.run_id, r.fence, r.attempts, r.lane, r.trigger, r.agent_id, r.org_id,
            r.thread_id, null::text, r.model, null::jsonb, null::int, null::jsonb,
            null::jsonb, r.reason, coalesce(to_jsonb(r) ->> 'handler', 'default')
        from unnest(v_skipped) with ordinality as u (run_id, position)
        join runlane.runs as r on r.run_id = u.run_id
        order by u.position;
    end if;
end;
$$;

comment on function runlane.claim_runs(text, text[], int, interval, uuid, boolean, text[]) is
'The worker''s claim: claims runnable runs of the handlers it serves (p_handlers; null: any) '
'with lease, fence and computer lease (wake times, computer ownership, per-organization caps, '
'interactive-first order, round robin across organizations); a resend '
'with the key of the last claim of this worker and lane set returns that claim''s runs instead of '
'claiming anew; with p_report_skipped also the runs it ended skipped because a gate closed between '
'queue and claim (skipped_reason set; claimed rows have NULL).';

revoke all on function runlane.claim_runs(text, text[], int, interval, uuid, boolean, text[]) from public;
grant execute on function runlane.claim_runs(text, text[], int, interval, uuid, boolean, text[]) to runlane_worker;

-- claim_runs without handlers: the seven-argument claim (above) of any handler, its rows
-- without the handler column (the shape workers of 0.2 and before call).
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
as $$
begin
    -- (PL/pgSQL, not SQL: a SQL function with SET clauses is parsed and planned on every
    -- call; this statement's plan is kept for the session)
    return query
    select
        c.run_id, c.fence, c.attempt, c.lane, c.trigger, c.agent_id, c.org_id, c.thread_id,
        c.prompt, c.model, c.checkpoint, c.iteration_cap, c.late_notice, c.timing,
        c.skipped_reason
    from runlane.claim_runs(
        p_worker, p_lanes, p_limit, p_lease, p_claim_key, p_report_skipped, null
    ) as c;
end;
$$;

comment on function runlane.claim_runs(text, text[], int, interval, uuid, boolean) is
'claim_runs of any handler: the keyed claim reporting skipped runs, its rows without the handler.';

revoke all on function runlane.claim_runs(text, text[], int, interval, uuid, boolean) from public;
grant execute on function runlane.claim_runs(text, text[], int, interval, uuid, boolean) to runlane_worker;

-- claim_runs with a claim key: the seven-argument claim (above) without the rows of skipped
-- runs. Same guarantees, same receipt: a resend with the key of the last claim of this
-- worker and lane set returns the runs that claim took. A null p_claim_key is the
-- four-argument form. Any handler.
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
    from runlane.claim_runs(p_worker, p_lanes, p_limit, p_lease, p_claim_key, false, null) as c;
end;
$$;

comment on function runlane.claim_runs(text, text[], int, interval, uuid) is
'claim_runs with a claim key: a resend with the key of the last claim of this worker and lane '
'set returns the runs that claim took (still running under the same fence) instead of claiming anew.';

revoke all on function runlane.claim_runs(text, text[], int, interval, uuid) from public;
grant execute on function runlane.claim_runs(text, text[], int, interval, uuid) to runlane_worker;

-- claim_runs with four arguments: the seven-argument claim (above) without a claim key and
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
    from runlane.claim_runs(p_worker, p_lanes, p_limit, p_lease, null, false, null) as c;
end;
$$;

comment on function runlane.claim_runs(text, text[], int, interval) is
'Atomically claims runnable runs with lease, fence and computer lease, honouring wake times, '
'computer ownership, per-organization caps, interactive-first order and round robin across '
'organizations within a class.';

revoke all on function runlane.claim_runs(text, text[], int, interval) from public;
grant execute on function runlane.claim_runs(text, text[], int, interval) to runlane_worker;
