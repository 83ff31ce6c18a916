-- _claim_runs_of_node: claim_runs on a schema Citus distributes: the claim of a worker
-- connected to one node, from the organizations whose rows that node stores.
--
-- Guarantees (claim_runs' own, held within the node; docs/scaling.md says what they
-- mean across nodes):
-- * Candidates are read from this server's shards of runlane.runs alone, without locks:
--   each (class, lane, handler, organization)'s oldest eligible runs (queued, awake, of
--   p_handlers or, null, any handler, their computer free of another run's live lease),
--   in the fair order: interactive class first, then round robin across organizations,
--   oldest first within each. Every later statement names one organization and runs on
--   this server (Citus's local execution): a claim sends no command to another node but
--   the writes of the global tables it needs (a computer lease, a keyed claim's receipt).
-- * Runs are locked organization by organization, FOR UPDATE SKIP LOCKED: concurrent
--   claimers never get the same run.
-- * The caps: before any run of an organization is locked for a background run or under
--   the per-worker bound (p_max_per_org), this claim locks the organization's
--   org_claim_locks row (the first read's organizations in org_id order, waiting; later
--   reads' without waiting, an organization another claimer holds is left to it) and
--   counts, in a new snapshot, its running background runs and this worker's running
--   runs there. An organization never has more running background runs than
--   agent_max_concurrency; a worker never more running runs of one organization than the
--   bound (work-conserving, p_work_conserving: binding only while a run within its room
--   was found; the page is then filled past it).
-- * A gated background run (agent off, admin-locked, no model, owner's budget spent) is
--   ended skipped (runlane._skip_gated_runs), never claimed.
-- * Each claimed run gets fence + 1 (at least runlane._fence_floor, this server's
--   timeline), attempts + 1, a lease of p_lease, its computer lease, first_started_at
--   once, a run.claimed journal row; the rows come back in the fair order with the late
--   notice and run.execution_started timing row claim_runs returns.
-- * Keyed (p_claim_key): the receipt is this server's own row of (p_worker, lanes) in
--   runlane.node_claim_receipts (a table of each worker node, not Citus's: a global row
--   would be written on every server, and a node down would stop every claim). A resend
--   of the recorded key claims nothing and returns the recorded runs still running under
--   their fences (and, with p_report_skipped, its skipped runs); a resend racing its
--   original waits for it. A worker's first receipt on a node deletes the node's
--   receipts unused for a day (a worker's id is new with each process; a resend follows
--   its claim within half a lease). A claim that finds no eligible run locks and writes
--   nothing.
-- * 0A000 on a server that stores no shard of runlane.runs (a coordinator without
--   shards), or has no runlane.node_claim_receipts (`runlane migrate --citus` creates it
--   on every node): each hint says what to do.
-- Private: called by claim_runs, whose arguments it has checked, where Citus holds runs.
create or replace function runlane._claim_runs_of_node(
    p_worker text,
    p_lanes text[],
    p_handlers text[],
    p_limit int,
    p_lease interval,
    p_claim_key uuid,
    p_report_skipped boolean,
    p_max_per_org int,
    p_work_conserving boolean
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
set search_path = pg_catalog, pg_temp
-- (custom plans: Citus plans a statement whose organization or rows are parameters only
-- once their values are known; claim_runs' own setting forces generic ones)
set plan_cache_mode = force_custom_plan
-- (no JIT: the read over every shard looks costly to the planner, and compiling it took
-- hundreds of milliseconds to save microseconds)
set jit = off
as $$
#variable_conflict use_column
declare
    v_shards text[] := runlane._local_shards('runlane.runs');
    v_lease_shard text := (runlane._local_shards('runlane.computer_leases'))[1];
    v_lanes text[];  -- p_lanes sorted: the receipt's key
    v_key uuid;
    v_ids bigint[];
    v_fences bigint[];
    v_created boolean := false;
    v_handlers text[] := p_handlers;
    v_bound int := p_max_per_org;  -- (null once a work-conserving bound stops binding)
    v_bound_cut boolean := false;  -- the bound held back a run this claim read
    v_bound_cut_runs bigint[] := '{}'::bigint[];  -- (those runs)
    v_cut_runs bigint[];
    v_read_sql text;
    v_read_name text;
    v_prepared text;
    v_candidates bigint[];
    v_candidate_orgs text[];
    v_tried bigint[] := '{}'::bigint[];
    v_full_orgs text[] := '{}'::text[];  -- organizations whose background room is used up
    v_busy_orgs text[] := '{}'::text[];  -- organizations another claimer's lock holds
    v_counted_orgs text[] := '{}'::text[];  -- organizations whose claim row this claim holds
    v_bg_rooms int[] := '{}'::int[];  -- (parallel to v_counted_orgs)
    v_bound_rooms int[] := '{}'::int[];  -- (parallel to v_counted_orgs; null: no bound)
    v_budgets numeric[] := '{}'::numeric[];  -- (parallel to v_counted_orgs: weekly budgets)
    v_picks bigint[];
    v_lock_orgs text[];
    v_org text;
    v_i int;
    v_room int;
    v_cap int;
    v_budget numeric;
    v_bg_running int;
    v_mine int;
    v_first_read boolean := true;
    v_row record;
    v_gate text;
    v_accepted bigint[] := '{}'::bigint[];  -- claim order
    v_accepted_orgs text[] := '{}'::text[];
    v_computer_runs bigint[] := '{}'::bigint[];
    v_computer_orgs text[] := '{}'::text[];
    v_computer_ids text[] := '{}'::text[];
    v_lost bigint[] := '{}'::bigint[];  -- accepted runs whose computer another run's lease holds
    v_skipped bigint[] := '{}'::bigint[];
    v_skip_reasons text[] := '{}'::text[];
    v_fence_floor bigint;
    v_fence bigint;
    v_cut boolean;
    v_accepted_ranks int[] := '{}'::int[];  -- (parallel to v_accepted: read, then place in the read)
    v_replay boolean := false;
    v_enabled boolean;
    v_locked_agent boolean;
    v_model text;
    v_owner text;
    v_receipt_runs bigint[];
    v_receipt_fences bigint[];
    v_skipped_orgs text[] := '{}'::text[];
    v_now timestamptz;
    v_tx_start timestamptz := now();  -- (Citus plans no function call in ON CONFLICT's WHERE)
    v_run runlane.runs;
    v_claimed runlane.runs[] := '{}'::runlane.runs[];
    v_caps int[];  -- (by claim position)
    v_origins timestamptz[];  -- (by claim position: the source message's time, else the run's)
    v_sources bigint[];  -- (by claim position: the run's source message)
    v_position int;
    v_journal_orgs text[];
    v_journal jsonb[];
begin
    if cardinality(v_shards) = 0 then
        raise exception 'this server stores no organization''s runs: a worker claims on a Citus worker node'
            using errcode = '0A000',
                  hint = 'Connect the worker to a worker node; runlane.org_node(org) names the node '
                      || 'of an organization, and each node''s workers claim its organizations.';
    end if;
    if to_regclass('runlane.node_claim_receipts') is null then
        raise exception 'this worker node has no runlane.node_claim_receipts'
            using errcode = '0A000',
                  hint = 'Run `runlane migrate --citus` on the coordinator: it creates the table '
                      || 'on every worker node, one added since included.';
    end if;

    -- STEP: a resend of the recorded key answers from the receipt (read first unlocked:
    -- an ordinary claim locks it only when it finds a run to claim).
    if p_claim_key is not null then
        v_lanes := case when p_lanes[2] < p_lanes[1] then array[p_lanes[2], p_lanes[1]] else p_lanes end;
        select c.claim_key into v_key
        from runlane.node_claim_receipts as c
        where c.worker_id = p_worker and c.lanes = v_lanes;
        if v_key = p_claim_key then
            select c.claim_key, c.run_ids, c.fences into v_key, v_ids, v_fences
            from runlane.node_claim_receipts as c
            where c.worker_id = p_worker and c.lanes = v_lanes
            for update;
            v_replay := v_key = p_claim_key;
        end if;
    end if;

    -- STEP: the handlers with queued runs on this node, when the caller serves any.
    if v_handlers is null and not v_replay then
        select string_agg(format($q$
            select h.handler from unnest($1::text[]) as l (lane)
            cross join lateral (
                with recursive found (handler) as (
                    (select r.handler from %1$s as r where r.state = 'queued' and r.lane = l.lane
                     order by r.handler limit 1)
                    union all
                    select n.handler from found as f
                    cross join lateral (
                        select r.handler from %1$s as r
                        where r.state = 'queued' and r.lane = l.lane and r.handler > f.handler
                        order by r.handler limit 1
                    ) as n
                )
                select found.handler from found
            ) as h$q$, s.shard), ' union ')
        into v_read_sql
        from unnest(v_shards) as s (shard);
        execute 'select coalesce(array_agg(distinct q.handler), ''{}'') from (' || v_read_sql || ') as q'
            into v_handlers
            using p_lanes;
    end if;

    -- The fair read over this node's shards: $1 lanes, $2 handlers, $3 runs per
    -- organization, $4 runs tried, $5 organizations not read (full or bound), $6 the
    -- background lane's full organizations, $7 how many.
    select format($q$
        select coalesce(array_agg(c.run_id order by c.claim_class, c.round, c.run_id), '{}'),
               coalesce(array_agg(c.org_id order by c.claim_class, c.round, c.run_id), '{}')
        from (
            select u.run_id, u.org_id, u.claim_class,
                   row_number() over (partition by u.claim_class, u.org_id order by u.run_id) as round
            from (%s) as u
            order by u.claim_class, round, u.run_id
            limit $7
        ) as c$q$,
        string_agg(format($q$
            select e.run_id, e.org_id, e.claim_class
            from unnest($1::text[]) as l (lane)
            cross join unnest($2::text[]) as hd (handler)
            cross join unnest(array[0, 1]::smallint[]) as k (claim_class)
            cross join lateral (
                with recursive heads (org_id) as (
                    (select r.org_id from %1$s as r
                     where r.state = 'queued' and r.claim_class = k.claim_class and r.lane = l.lane
                       and r.handler = hd.handler and r.org_id <> all($5)
                     order by r.org_id limit 1)
                    union all
                    select n.org_id from heads as h
                    cross join lateral (
                        select r.org_id from %1$s as r
                        where r.state = 'queued' and r.claim_class = k.claim_class and r.lane = l.lane
                          and r.handler = hd.handler and r.org_id > h.org_id and r.org_id <> all($5)
                        order by r.org_id limit 1
                    ) as n
                )
                select r.run_id, r.org_id, r.claim_class
                from heads as h
                cross join lateral (
                    select r.run_id, r.org_id, r.claim_class
                    from %1$s as r
                    where r.state = 'queued' and r.claim_class = k.claim_class and r.lane = l.lane
                      and r.handler = hd.handler and r.org_id = h.org_id
                      and (r.wake_at is null or r.wake_at <= now())
                      and r.run_id <> all($4)
                      and not (r.lane = 'background' and r.org_id = any($6))
                      and (r.computer_id is null or not exists (
                          select 1 from %2$s as cl
                          where cl.computer_id = r.computer_id and cl.expires_at > now()
                            and cl.run_id <> r.run_id
                      ))
                    order by r.run_id
                    limit $3
                ) as r
            ) as e$q$, s.shard, v_lease_shard), ' union all ')
    )
    into v_read_sql
    from unnest(v_shards) as s (shard);

    -- The read is prepared once per session and shard set (planning it is most of its
    -- cost), under a name of its own text's hash. A statement of that name this session
    -- prepared otherwise (the worker's login can prepare one) is never executed with
    -- this function's rights: its text must be the read's, or it is prepared again.
    v_read_name := 'runlane_node_claim_read_' || md5(v_read_sql);
    v_read_sql := format(
        'prepare %I(text[], text[], int, bigint[], text[], text[], int) as %s', v_read_name, v_read_sql
    );
    select p.statement into v_prepared from pg_catalog.pg_prepared_statements as p where p.name = v_read_name;
    if v_prepared is distinct from v_read_sql then
        if v_prepared is not null then
            execute 'deallocate ' || quote_ident(v_read_name);
        end if;
        execute v_read_sql;
    end if;

    -- STEP: read, pick and lock until the page is full or the node has nothing more.
    for v_attempt in 1..8 loop
        exit when v_replay or cardinality(v_accepted) >= p_limit;
        -- (a generic plan: the read names no Citus table, and its parameters only bound
        -- the index descents; the function's own setting is for Citus's statements)
        perform set_config('plan_cache_mode', 'force_generic_plan', true);
        execute format(
            'execute %I(%L, %L, %s, %L, %L, %L, %s)',
            v_read_name, p_lanes, coalesce(v_handlers, '{}'),
            least(p_limit, coalesce(v_bound, p_limit)), v_tried,
            v_busy_orgs || array(
                select o.org_id from unnest(v_counted_orgs, v_bound_rooms) as o (org_id, room)
                where o.room <= 0 and v_bound is not null
            ),
            v_full_orgs, 2 * p_limit + 8
        )
        into v_candidates, v_candidate_orgs;
        perform set_config('plan_cache_mode', 'force_custom_plan', true);
        if cardinality(v_candidates) = 0 then
            -- (a work-conserving bound that held runs back reads on without it)
            exit when not (p_work_conserving and v_bound is not null and v_bound_cut);
            v_bound := null;
            -- (the runs the bound held back are read again: without it they may be taken)
            v_tried := array(select t from unnest(v_tried) as t where t <> all(v_bound_cut_runs));
            continue;
        end if;
        if v_first_read and p_claim_key is not null then
            -- GUARD: the receipt, locked once a run is eligible: a resend racing its
            -- original waits for it here, then answers from what it recorded.
            select c.claim_key, c.run_ids, c.fences into v_key, v_ids, v_fences
            from runlane.node_claim_receipts as c
            where c.worker_id = p_worker and c.lanes = v_lanes
            for update;
            if not found then
                insert into runlane.node_claim_receipts as c (worker_id, lanes, claim_key)
                values (p_worker, v_lanes, p_claim_key)
                on conflict (worker_id, lanes) do nothing;
                v_created := found;
                if v_created then
                    delete from runlane.node_claim_receipts as c
                    where c.claimed_at < now() - interval '1 day';
                end if;
                if not v_created then
                    select c.claim_key, c.run_ids, c.fences into v_key, v_ids, v_fences
                    from runlane.node_claim_receipts as c
                    where c.worker_id = p_worker and c.lanes = v_lanes
                    for update;
                end if;
            end if;
            v_replay := not v_created and v_key = p_claim_key;
            exit when v_replay;  -- (the replay below answers)
        end if;
        v_tried := v_tried || v_candidates;

        -- Organizations that need their claim row: background runs (the cap) and, with
        -- a bound, every run. The first read's wait in org_id order; later reads' skip
        -- one another claimer holds (it claims those runs).
        select coalesce(array_agg(distinct c.org_id order by c.org_id), '{}')
        into v_lock_orgs
        from unnest(v_candidates, v_candidate_orgs) as c (run_id, org_id)
        where c.org_id <> all(v_counted_orgs)
          and (p_max_per_org is not null or 'background' = any(p_lanes));
        foreach v_org in array v_lock_orgs loop
            if v_first_read then
                perform 1 from runlane.org_claim_locks as l where l.org_id = v_org for update;
            else
                perform 1 from runlane.org_claim_locks as l where l.org_id = v_org for update skip locked;
                if not found and exists (
                    select 1 from runlane.org_claim_locks as l where l.org_id = v_org
                ) then
                    v_busy_orgs := v_busy_orgs || v_org;
                    continue;
                end if;
            end if;
            if not found then
                insert into runlane.org_claim_locks as l (org_id) values (v_org)
                on conflict (org_id) do nothing;
                perform 1 from runlane.org_claim_locks as l where l.org_id = v_org for update;
            end if;
            -- (a new statement: a snapshot that sees every claim committed while it waited)
            select
                count(*) filter (where r.lane = 'background')::int,
                count(*) filter (where r.lease_owner = p_worker)::int
            into v_bg_running, v_mine
            from runlane.runs as r
            where r.org_id = v_org and r.state = 'running';
            select s.agent_max_concurrency, s.agent_weekly_budget into v_cap, v_budget
            from runlane.platform_settings as s
            where s.org_id = v_org;
            v_counted_orgs := v_counted_orgs || v_org;
            v_budgets := v_budgets || v_budget;
            v_bg_rooms := v_bg_rooms || (coalesce(v_cap, 0) - v_bg_running);
            v_bound_rooms := v_bound_rooms || (p_max_per_org - v_mine);
        end loop;
        v_first_read := false;

        -- The picks: the candidates in the fair order, each organization's within its room
        -- under the bound, up to the page's room; locked organization by organization.
        select coalesce(bool_or(c.org_rank > c.room), false),
               coalesce(array_agg(c.run_id) filter (where c.org_rank > c.room), '{}')
        into v_cut, v_cut_runs
        from (
            select
                u.run_id,
                row_number() over (partition by u.org_id order by u.position) as org_rank,
                v_bound_rooms[array_position(v_counted_orgs, u.org_id)] as room
            from unnest(v_candidates, v_candidate_orgs) with ordinality as u (run_id, org_id, position)
            where v_bound is not null and u.org_id <> all(v_busy_orgs)
        ) as c;
        v_bound_cut := v_bound_cut or v_cut;
        v_bound_cut_runs := v_bound_cut_runs || v_cut_runs;
        for v_org, v_picks in
            select p.org_id, array_agg(p.run_id order by p.position)
            from (
                select c.run_id, c.org_id, c.position,
                       row_number() over (order by c.position) as page_rank
                from (
                    select
                        u.run_id, u.org_id, u.position,
                        row_number() over (partition by u.org_id order by u.position) as org_rank
                    from unnest(v_candidates, v_candidate_orgs) with ordinality as u (run_id, org_id, position)
                    where u.org_id <> all(v_busy_orgs)
                ) as c
                where v_bound is null
                   or c.org_rank <= coalesce(v_bound_rooms[array_position(v_counted_orgs, c.org_id)], c.org_rank)
            ) as p
            where p.page_rank <= p_limit - cardinality(v_accepted)
            group by p.org_id
            order by min(p.position)
        loop
            v_i := array_position(v_counted_orgs, v_org);
            v_room := cardinality(v_picks);
            -- (a background lane's organizations are all counted: its budget is in hand)
            v_budget := v_budgets[v_i];
            for v_row in
                select r.run_id, r.lane, r.computer_id, r.agent_id
                from runlane.runs as r
                where r.org_id = v_org
                  and r.run_id = any(v_picks)
                  and r.state = 'queued'
                  and (r.wake_at is null or r.wake_at <= now())
                order by r.run_id
                limit v_room
                for update of r skip locked
            loop
                v_gate := null;
                if v_row.lane = 'background' then
                    select a.enabled, a.admin_locked, a.model, a.owner_id
                    into v_enabled, v_locked_agent, v_model, v_owner
                    from runlane.agents as a
                    where a.org_id = v_org and a.agent_id = v_row.agent_id;
                    -- (the budget read apart: a statement Citus runs on a shard calls no
                    -- function that reads tables)
                    v_gate := case
                        when not found or not v_enabled then 'agent_off'
                        when v_locked_agent then 'agent_locked'
                        when coalesce(v_model, '') = '' then 'no_model'
                        when v_budget is not null and runlane._budget_exhausted(v_owner, v_org, now())
                            then 'budget_exhausted'
                    end;
                    if v_gate is not null then
                        v_skipped := v_skipped || v_row.run_id;
                        v_skip_reasons := v_skip_reasons || v_gate;
                        v_skipped_orgs := v_skipped_orgs || v_org;
                        continue;
                    end if;
                    if v_bg_rooms[v_i] <= 0 then
                        v_full_orgs := v_full_orgs || v_org;
                        continue;  -- (locked, left queued: its organization is at its cap)
                    end if;
                    v_bg_rooms[v_i] := v_bg_rooms[v_i] - 1;
                end if;
                if v_i is not null then
                    v_bound_rooms[v_i] := v_bound_rooms[v_i] - 1;
                end if;
                if v_row.computer_id is not null then
                    v_computer_runs := v_computer_runs || v_row.run_id;
                    v_computer_orgs := v_computer_orgs || v_org;
                    v_computer_ids := v_computer_ids || v_row.computer_id;
                end if;
                v_accepted := v_accepted || v_row.run_id;
                v_accepted_orgs := v_accepted_orgs || v_org;
                v_accepted_ranks := v_accepted_ranks
                    || (v_attempt * 10000 + array_position(v_candidates, v_row.run_id));
            end loop;
        end loop;
    end loop;

    -- (the claim order: the fair order of the reads, not the order of the locks)
    select coalesce(array_agg(a.run_id order by a.rank), '{}'), coalesce(array_agg(a.org_id order by a.rank), '{}')
    into v_accepted, v_accepted_orgs
    from unnest(v_accepted, v_accepted_orgs, v_accepted_ranks) as a (run_id, org_id, rank);

    -- STEP: a resend of the recorded key: the recorded runs, claimed by nothing now. A
    -- claim that found nothing looks again: its original may have committed since.
    if p_claim_key is not null and not v_replay and not v_created
       and cardinality(v_accepted) = 0 and cardinality(v_skipped) = 0 then
        select c.claim_key, c.run_ids, c.fences into v_key, v_ids, v_fences
        from runlane.node_claim_receipts as c
        where c.worker_id = p_worker and c.lanes = v_lanes and c.claim_key = p_claim_key
        for update;
        v_replay := found;
    end if;
    if v_replay then
        begin
            for v_row in
                select u.run_id, u.fence, u.position
                from unnest(v_ids, v_fences) with ordinality as u (run_id, fence, position)
                order by u.fence = -1, u.position
            loop
                select r.* into v_run from runlane.runs as r where r.run_id = v_row.run_id;
                continue when not found;
                if v_row.fence >= 0 and v_run.state = 'running' and v_run.fence = v_row.fence then
                    return query select
                        v_run.run_id, v_run.fence, v_run.attempts, v_run.lane, v_run.trigger,
                        v_run.agent_id, v_run.org_id, v_run.thread_id, v_run.prompt, v_run.model,
                        v_run.checkpoint,
                        (select s.agent_iteration_cap from runlane.platform_settings as s
                         where s.org_id = v_run.org_id),
                        runlane._late_notice(v_run),
                        runlane._timing_of(v_run, coalesce(
                            (select m.created_at from runlane.messages as m
                             where m.org_id = v_run.org_id and m.message_id = v_run.source_message_id),
                            v_run.created_at
                        )) || jsonb_build_object('event', 'run.execution_started'),
                        null::text, v_run.handler;
                elsif v_row.fence = -1 and p_report_skipped and v_run.state = 'skipped' then
                    return query select
                        v_run.run_id, v_run.fence, v_run.attempts, v_run.lane, v_run.trigger,
                        v_run.agent_id, v_run.org_id, v_run.thread_id, null::text, v_run.model,
                        null::jsonb, null::int, null::jsonb, null::jsonb, v_run.reason, v_run.handler;
                end if;
            end loop;
            return;
        end;
    end if;

    -- STEP: gated runs end skipped (rare).
    if cardinality(v_skipped) > 0 then
        perform runlane._skip_gated_runs(v_skipped, v_skip_reasons);
    end if;

    if cardinality(v_accepted) = 0 and cardinality(v_skipped) = 0 then
        if not v_first_read then  -- (a read found runs: a lock may have been taken)
            perform runlane._commit_empty_claim_without_flush();  -- (locks only; see there)
        end if;
        return;
    end if;

    -- STEP: the fence floor, then the computer leases, in computer_id order (a lease live
    -- for another run leaves its run queued).
    v_fence_floor := runlane._fence_floor();
    if cardinality(v_computer_runs) > 0 then
        for v_row in
            select c.run_id, c.org_id, c.computer_id
            from unnest(v_computer_runs, v_computer_orgs, v_computer_ids) as c (run_id, org_id, computer_id)
            order by c.computer_id, c.run_id
        loop
            select r.fence into v_fence from runlane.runs as r
            where r.org_id = v_row.org_id and r.run_id = v_row.run_id;
            insert into runlane.computer_leases as cl (computer_id, run_id, fence, expires_at, org_id)
            values (
                v_row.computer_id, v_row.run_id, greatest(v_fence + 1, v_fence_floor),
                v_tx_start + p_lease, v_row.org_id
            )
            on conflict (computer_id) do update
            set run_id = excluded.run_id, fence = excluded.fence, expires_at = excluded.expires_at,
                org_id = excluded.org_id
            where cl.expires_at <= v_tx_start or cl.run_id = excluded.run_id;
            if not found then
                v_lost := v_lost || v_row.run_id;
            end if;
        end loop;
    end if;

    -- STEP: the claim write, organization by organization: the runs' update, then what
    -- the rows need of the organization (its iteration cap, the runs' source messages'
    -- times); then every run.claimed journal row in one statement.
    v_now := clock_timestamp();
    v_claimed := array_fill(null::runlane.runs, array[cardinality(v_accepted)]);
    v_caps := array_fill(null::int, array[cardinality(v_accepted)]);
    v_origins := array_fill(null::timestamptz, array[cardinality(v_accepted)]);
    v_sources := array_fill(null::bigint, array[cardinality(v_accepted)]);
    for v_org, v_picks in
        select a.org_id, array_agg(a.run_id)
        from unnest(v_accepted, v_accepted_orgs) as a (run_id, org_id)
        where a.run_id <> all(v_lost)
        group by a.org_id
    loop
        select s.agent_iteration_cap into v_cap
        from runlane.platform_settings as s
        where s.org_id = v_org;
        v_ids := '{}';
        for v_run in
            update runlane.runs as r
            set state = 'running',
                reason = null,
                fence = greatest(r.fence + 1, v_fence_floor),
                attempts = r.attempts + 1,
                lease_owner = p_worker,
                lease_expires_at = now() + p_lease,
                heartbeat_at = now(),
                first_started_at = coalesce(r.first_started_at, v_now)
            where r.org_id = v_org and r.run_id = any(v_picks)
            returning r.*
        loop
            v_position := array_position(v_accepted, v_run.run_id);
            v_claimed[v_position] := v_run;
            v_caps[v_position] := v_cap;
            v_origins[v_position] := v_run.created_at;
            v_sources[v_position] := v_run.source_message_id;
            if v_run.source_message_id is not null then
                v_ids := v_ids || v_run.source_message_id;
            end if;
        end loop;
        if cardinality(v_ids) > 0 then
            for v_row in
                select m.message_id, m.created_at
                from runlane.messages as m
                where m.org_id = v_org and m.message_id = any(v_ids)
            loop
                -- (a source message is its one run's: runs_source_message_of_run_fk)
                v_origins[array_position(v_sources, v_row.message_id)] := v_row.created_at;
            end loop;
        end if;
    end loop;
    select
        coalesce(array_agg(c.run_id order by c.ordinality), '{}'),
        coalesce(array_agg(c.org_id order by c.ordinality), '{}'),
        coalesce(array_agg(
            jsonb_build_object('fence', c.fence, 'attempt', c.attempts, 'resumed', c.checkpoint is not null)
            order by c.ordinality
        ), '{}')
    into v_ids, v_journal_orgs, v_journal
    from unnest(v_claimed) with ordinality as c
    where c.run_id is not null;
    perform runlane._write_run_events(v_ids, v_journal_orgs, 'run.claimed', v_journal);

    -- STEP: the receipt, for a keyed claim: the claimed runs in claim order, then the
    -- skipped ones with fence -1.
    if p_claim_key is not null then
        select
            coalesce(array_agg(k.run_id order by k.ordinality), '{}') || v_skipped,
            coalesce(array_agg(k.fence order by k.ordinality), '{}')
                || array_fill(-1::bigint, array[cardinality(v_skipped)])
        into v_receipt_runs, v_receipt_fences
        from unnest(v_claimed) with ordinality as k
        where k.run_id is not null;
        update runlane.node_claim_receipts as c
        set claim_key = p_claim_key,
            run_ids = v_receipt_runs,
            fences = v_receipt_fences,
            claimed_at = now()
        where c.worker_id = p_worker and c.lanes = v_lanes;
    end if;

    -- STEP: the rows, in claim order, then the skipped runs when asked for (values in
    -- hand: no statement Citus plans).
    for v_position in 1..cardinality(v_claimed) loop
        v_run := v_claimed[v_position];
        continue when v_run.run_id is null;
        return query select
            v_run.run_id, v_run.fence, v_run.attempts, v_run.lane, v_run.trigger,
            v_run.agent_id, v_run.org_id, v_run.thread_id, v_run.prompt, v_run.model,
            v_run.checkpoint,
            v_caps[v_position],
            case when v_run.timer_routine is not null then runlane._late_notice(v_run) end,
            runlane._timing_of(v_run, v_origins[v_position])
                || jsonb_build_object('event', 'run.execution_started'),
            null::text,
            v_run.handler;
    end loop;
    if p_report_skipped and cardinality(v_skipped) > 0 then
        for v_position in 1..cardinality(v_skipped) loop
            select r.* into v_run from runlane.runs as r
            where r.org_id = v_skipped_orgs[v_position] and r.run_id = v_skipped[v_position];
            return query select
                v_run.run_id, v_run.fence, v_run.attempts, v_run.lane, v_run.trigger,
                v_run.agent_id, v_run.org_id, v_run.thread_id, null::text, v_run.model,
                null::jsonb, null::int, null::jsonb, null::jsonb, v_run.reason, v_run.handler;
        end loop;
    end if;
end;
$$;

comment on function runlane._claim_runs_of_node(
    text, text[], text[], int, interval, uuid, boolean, int, boolean
) is
'claim_runs where Citus distributes the schema: claims runs of the organizations this server '
'stores, every statement naming one organization.';

revoke all on function runlane._claim_runs_of_node(
    text, text[], text[], int, interval, uuid, boolean, int, boolean
) from public;
