-- _finish_runs_together: runlane.finish_runs' common case, every run of the call written
-- and finished by a few statements for the whole batch. docs/design/finish.md gives the
-- reasons.
--
-- Guarantees:
-- * All or nothing: either every run of the call is written and finished exactly as
--   finish_runs' run-by-run path (runlane.append_output for each output, then
--   runlane.finish_run) would write and finish it, or this raises and the caller rolls
--   the attempt back and takes the run-by-run path. It raises unless every run
--   - has valid arguments: a fence, a known outcome, a cost in [0, 1e12], a write
--     sequence number null or >= 1, outputs runlane._check_body and run_outputs' own
--     constraints accept, an id that appears once in the call;
--   - is running under that fence, still holds its computer when bound to one (its
--     computer_leases row, locked FOR SHARE until commit), was not asked to stop, and its
--     numbered write is the next one, not applied yet;
--   and on any error on the way (a lock timeout, a deadlock, a timing row).
-- * Locks as the run-by-run path takes them: the runs' rows FOR NO KEY UPDATE in thread
--   lock order ((agent_id, thread_id), then input position), then the interactive runs'
--   threads FOR NO KEY UPDATE in (agent_id, thread_id) order (runlane._lock_thread),
--   after the runs left the running state.
-- * The same rows as the run-by-run path: outputs in input order with the run's attempt;
--   first_response_at stamped once for the run's life with the time its first visible
--   output was written; charges (runlane._record_charge, none for a cost of 0); one
--   closing update per run (state, reason, last_error's first 1,000 characters,
--   finished_at, lease cleared, cost, the write sequence number); a run.finished journal
--   row {outcome, reason}; each run's computer lease deleted and the computer's next
--   awake waiter notified; each run's stream told it ended (runlane._notify_stream_end);
--   held messages of each interactive run's thread dispatched.
-- * Output notifications are hints: a failing one skips the rest, never a write.
-- * Returns, in thread lock order, each run's id, its run.first_response timing row (null
--   unless one of its outputs stamped it) and its run.finished timing row.
create or replace function runlane._finish_runs_together(
    p_run_ids bigint[],
    p_fences bigint[],
    p_outcomes text[],
    p_errors text[],
    p_costs numeric[],
    p_output_counts integer[],
    p_output_kinds text[],
    p_output_bodies text[],
    p_seqs bigint[],
    out run_ids bigint[],
    out first_responses jsonb[],
    out timings jsonb[]
)
language plpgsql
set search_path = pg_catalog, pg_temp
set plan_cache_mode = force_generic_plan
as $$
declare
    v_runs integer := cardinality(p_run_ids);
    v_ids bigint[];  -- the runs, locked, in thread lock order
    v_orgs text[];  -- their organizations
    v_positions integer[];  -- their input positions
    v_attempts integer[];
    v_unstamped boolean[];  -- whether the run has no first response yet
    v_origins timestamptz[];  -- its timing's origin: its source message's created_at, else its own
    v_closed_orgs text[];
    v_closed_details jsonb[];
    v_stamps timestamptz[];  -- first_response_at the run's outputs stamp (or null)
    v_output_runs bigint[];
    v_output_ids bigint[];
    v_agents text[];  -- the threads of the interactive runs, in lock order
    v_threads text[];
    v_computers text[];  -- the computers of the runs bound to one, in computer order
    v_computer_runs bigint[];
    v_computer_fences bigint[];
    v_locked integer;
    v_round integer;
    v_thread record;
begin
    -- GUARD: arguments the run-by-run path would refuse for some run.
    if exists (
        select
        from unnest(p_run_ids, p_fences, p_outcomes, p_costs, p_seqs)
            as u (run_id, fence, outcome, cost, seq)
        where u.run_id is null or u.fence is null
            or u.outcome is null or u.outcome not in ('succeeded', 'failed', 'canceled')
            or u.cost is null or not (u.cost >= 0 and u.cost <= 1e12)
            or u.seq < 1
    ) or (select count(distinct u.run_id) from unnest(p_run_ids) as u (run_id)) <> v_runs then
        raise exception 'not every run of this call can be finished together';
    end if;
    perform runlane._check_body('output body', o.body)
    from unnest(p_output_bodies) as o (body);

    -- STEP: lock the rows, in thread lock order, of the runs their callers still own.
    select
        array_agg(l.run_id order by l.agent_id, l.thread_id, l.i),
        array_agg(l.org_id order by l.agent_id, l.thread_id, l.i),
        array_agg(l.i order by l.agent_id, l.thread_id, l.i),
        array_agg(l.attempts order by l.agent_id, l.thread_id, l.i),
        array_agg(l.first_response_at is null order by l.agent_id, l.thread_id, l.i),
        array_agg(l.origin order by l.agent_id, l.thread_id, l.i),
        array_agg(l.computer_id order by l.computer_id) filter (where l.computer_id is not null),
        array_agg(l.run_id order by l.computer_id) filter (where l.computer_id is not null),
        array_agg(l.fence order by l.computer_id) filter (where l.computer_id is not null)
    into v_ids, v_orgs, v_positions, v_attempts, v_unstamped, v_origins, v_computers, v_computer_runs,
        v_computer_fences
    from (
        select
            u.i::integer as i,
            r.run_id,
            r.org_id,
            r.agent_id,
            r.thread_id,
            r.attempts,
            r.first_response_at,
            coalesce(source.created_at, r.created_at) as origin,
            r.computer_id,
            r.fence
        from unnest(p_run_ids, p_fences, p_seqs) with ordinality as u (run_id, fence, seq, i)
        inner join runlane.runs as r on r.run_id = u.run_id
        -- (one probe by primary key per run: limit 1 keeps it a probe, never a join the
        -- planner could turn into a scan of every message)
        left join lateral (
            select m.created_at
            from runlane.messages as m
            where m.message_id = r.source_message_id
            limit 1
        ) as source on true
        where r.state = 'running'
            and r.fence = u.fence
            and r.reason is distinct from 'cancel_requested'
            and not coalesce(r.write_fence = u.fence and r.write_seq >= u.seq, false)
            and coalesce(
                u.seq <= coalesce(case when r.write_fence = u.fence then r.write_seq end, 0) + 1, true
            )
        order by r.agent_id, r.thread_id, u.i
        for no key update of r
    ) as l;
    if coalesce(cardinality(v_ids), 0) <> v_runs then
        raise exception 'not every run of this call is running under its caller''s fence';
    end if;

    -- GUARD: a run on a computer writes only while it holds its computer; its lease row is
    -- locked FOR SHARE until commit, so a claim taking the computer over waits for this.
    if v_computers is not null then
        if (
            select count(*)
            from unnest(v_computers, v_computer_runs, v_computer_fences)
                as x (computer_id, run_id, fence)
            cross join lateral (
                select
                from runlane.computer_leases as cl
                where cl.computer_id = x.computer_id and cl.run_id = x.run_id and cl.fence = x.fence
                for share
            ) as k
        ) <> cardinality(v_computers) then
            raise exception 'a run of this call no longer holds its computer';
        end if;
    end if;

    -- STEP: the outputs, in input order per run; the first visible one stamps the run's
    -- first response (unless it has one).
    if cardinality(p_output_kinds) > 0 then
        with firsts as (
            select c.i, sum(c.n) over (order by c.i) - c.n + 1 as first, c.n
            from unnest(p_output_counts) with ordinality as c (n, i)
        ),
        wanted as (
            select
                array_agg(l.run_id order by l.position, j.j) as run_ids,
                array_agg(l.org_id order by l.position, j.j) as org_ids,
                array_agg(l.attempt order by l.position, j.j) as attempts,
                array_agg(p_output_kinds[j.j] order by l.position, j.j) as kinds,
                array_agg(p_output_bodies[j.j] order by l.position, j.j) as bodies
            from unnest(v_ids, v_orgs, v_positions, v_attempts) with ordinality
                as l (run_id, org_id, i, attempt, position)
            inner join firsts as f on f.i = l.i
            cross join lateral generate_series(f.first::integer, (f.first + f.n - 1)::integer) as j (j)
        ),
        written as materialized (
            select
                o.run_id,
                o.output_id,
                o.kind in ('text', 'final', 'message_tool', 'card') as visible,
                o.written_at
            from wanted as w
            cross join lateral runlane._write_run_outputs(
                w.run_ids, w.org_ids, w.attempts, w.kinds, w.bodies
            ) as o
        ),
        stamps as (
            select w.run_id, min(w.written_at) filter (where w.visible) as stamp
            from written as w
            group by w.run_id
        )
        select
            (
                select array_agg(case when l.unstamped then s.stamp end order by l.position)
                from unnest(v_ids, v_unstamped) with ordinality as l (run_id, unstamped, position)
                left join stamps as s on s.run_id = l.run_id
            ),
            (select array_agg(w.run_id order by w.output_id) from written as w),
            (select array_agg(w.output_id order by w.output_id) from written as w)
        into v_stamps, v_output_runs, v_output_ids;

        begin
            perform runlane._notify_output(n.run_id, n.output_id)
            from unnest(v_output_runs, v_output_ids) as n (run_id, output_id);
        exception when others then
            null;  -- a hint only: chat clients page with outputs_since after a reconnect
        end;
    end if;

    -- GUARD: a finish that charges nothing (the common case) writes no ledger row.
    if exists (select from unnest(p_costs) as c (cost) where c.cost > 0) then
        perform runlane._record_charge(r, p_costs[l.i])
        from unnest(v_ids, v_positions) as l (run_id, i)
        inner join runlane.runs as r on r.run_id = l.run_id
        where p_costs[l.i] > 0;
    end if;

    -- STEP: the close: one update per run, its run.finished journal row, and its timing rows
    -- from the row in hand. The first-response row is the run as it was when its stamp was
    -- written: running, so without the outcome, total and execution figures.
    with closed as (
        update runlane.runs as r
        set state = p_outcomes[l.i],
            reason = case
                when p_errors[l.i] ~ '^[a-z][a-z_]{0,39}$' then p_errors[l.i]
                when p_outcomes[l.i] = 'failed' then 'error'
            end,
            last_error = left(p_errors[l.i], 1000),
            finished_at = clock_timestamp(),
            lease_owner = null,
            lease_expires_at = null,
            cost = r.cost + p_costs[l.i],
            first_response_at = coalesce(r.first_response_at, l.stamp),
            write_fence = case when p_seqs[l.i] is null then r.write_fence else r.fence end,
            write_seq = coalesce(p_seqs[l.i], r.write_seq)
        from unnest(v_ids, v_positions, v_stamps, v_origins) with ordinality
            as l (run_id, i, stamp, origin, position)
        where r.run_id = l.run_id
        returning
            r.run_id,
            r.org_id,
            r.state,
            r.reason,
            r.agent_id,
            case when r.lane = 'interactive' then r.thread_id end as thread_id,
            l.stamp,
            l.position,
            -- (inlined: its arguments are columns; the origin was read with the lock)
            runlane._timing_of(r, l.origin) as timing
    )
    select
        array_agg(c.run_id order by c.position),
        array_agg(c.org_id order by c.position),
        array_agg(jsonb_build_object('outcome', c.state, 'reason', c.reason) order by c.position),
        array_agg(
            case when c.stamp is not null then
                c.timing - 'run.outcome' - 'run.total_ms' - 'run.execution_wall_ms'
                || jsonb_build_object('event', 'run.first_response')
            end
            order by c.position
        ),
        array_agg(c.timing || jsonb_build_object('event', 'run.finished') order by c.position),
        array_agg(c.agent_id order by c.agent_id, c.thread_id) filter (where c.thread_id is not null),
        array_agg(c.thread_id order by c.agent_id, c.thread_id) filter (where c.thread_id is not null)
    into run_ids, v_closed_orgs, v_closed_details, first_responses, timings, v_agents, v_threads
    from closed as c;

    perform runlane._write_run_events(run_ids, v_closed_orgs, 'run.finished', v_closed_details);

    perform runlane._notify_stream_end(run_ids);

    -- STEP: computers: each run's lease (that row only) freed, the next waiter notified.
    if v_computers is not null then
        delete from runlane.computer_leases as cl
        using unnest(v_computers, v_computer_runs) as x (computer_id, run_id)
        where cl.computer_id = x.computer_id and cl.run_id = x.run_id;

        perform runlane._notify_computer_waiter(x.computer_id)
        from unnest(v_computers) as x (computer_id);
    end if;

    -- STEP: threads: every interactive run's thread locked, in order, now that its run left the
    -- running state (a thread without its row gets one, then all are locked again in order);
    -- then the held messages of the threads that hold some are dispatched.
    if v_agents is not null then
        -- (one primary-key probe per thread, in the arrays' order, which is lock order;
        -- a second round only after giving the threads without a row one)
        for v_round in 1 .. 2 loop
            select count(*) into v_locked
            from unnest(v_agents, v_threads) as x (agent_id, thread_id)
            cross join lateral (
                select
                from runlane.threads as t
                where t.agent_id = x.agent_id and t.thread_id = x.thread_id
                for no key update
            ) as k;
            exit when v_locked = cardinality(v_agents);
            if v_round = 2 then
                raise exception 'a thread of this call has no row to lock';
            end if;
            if runlane._rows_name_their_org() then
                insert into runlane.threads as t (agent_id, thread_id, org_id)
                select x.agent_id, x.thread_id, a.org_id
                from unnest(v_agents, v_threads) as x (agent_id, thread_id)
                left join runlane.agents as a on a.agent_id = x.agent_id
                order by x.agent_id, x.thread_id
                on conflict do nothing;
            else  -- (before 0027: the row names no organization)
                insert into runlane.threads as t (agent_id, thread_id)
                select x.agent_id, x.thread_id
                from unnest(v_agents, v_threads) as x (agent_id, thread_id)
                order by x.agent_id, x.thread_id
                on conflict do nothing;
            end if;
        end loop;

        for v_thread in
            select x.agent_id, x.thread_id
            from unnest(v_agents, v_threads) as x (agent_id, thread_id)
            where exists (
                select
                from runlane.messages as m
                where m.agent_id = x.agent_id and m.thread_id = x.thread_id and m.run_id is null
            )
            order by x.agent_id, x.thread_id
        loop
            perform runlane._dispatch_held_messages(v_thread.agent_id, v_thread.thread_id);
        end loop;
    end if;
end;
$$;

comment on function runlane._finish_runs_together(
    bigint[], bigint[], text[], text[], numeric[], integer[], text[], text[], bigint[]
) is
'finish_runs'' common case for a whole batch at once (outputs, charges, closes, journal, computers, '
'threads, timing rows); raises unless every run is running under its fence, holds its computer, not stopped, '
'its write not applied, its arguments valid: the caller then finishes run by run.';

revoke all on function runlane._finish_runs_together(
    bigint[], bigint[], text[], text[], numeric[], integer[], text[], text[], bigint[]
) from public;
