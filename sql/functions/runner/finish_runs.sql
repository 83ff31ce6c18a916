-- finish_runs: the last outputs and the finish of many runs in one call (one commit),
-- for a worker that coalesces the ends of runs finishing at the same time.
-- docs/design/finish.md gives the reasons.
--
-- Guarantees:
-- * Run i is (p_run_ids[i], p_fences[i], p_outcomes[i], p_errors[i], p_costs[i]); its
--   outputs are the next p_output_counts[i] entries of p_output_kinds / p_output_bodies
--   (run 1's first, then run 2's, …).
-- * Each run is handled as runlane.append_output for each of its outputs in order, then
--   runlane.finish_run, would handle it: the same checks and SQLSTATEs in the same order,
--   the same fencing, the first visible output stamping first_response_at (never reset),
--   the same journal rows, notifications and follow-up runs; the run is locked and
--   updated once, and a cost of 0 writes no ledger row.
-- * Output notifications are hints: a failing one skips that run's remaining ones, never
--   a write.
-- * Each run succeeds or fails alone: a run that fails (RL001 fenced out, RL008 unknown,
--   22023 a bad outcome, 40P01 a deadlock, …) is rolled back alone and reported with its
--   SQLSTATE; its neighbours' outputs and finishes stand.
-- * Runs are finished in thread lock order ((agent_id, thread_id), then input position;
--   runlane._lock_thread), so two batches never deadlock on each other's threads.
-- * A run asked to stop (runlane.cancel_run) is refused its outputs (RL001); one finished
--   without outputs closes as canceled.
-- * Returns one row per run, in the order they were finished: ok, the run.first_response
--   timing row when one of its outputs stamped it (else null), the run.finished timing
--   row (null when a timing computation failed) and sqlstate (null when ok).
-- * Whole-call refusals: 22004 when an array is null; 22023 when the run arrays differ in
--   length, an output count is null or negative, or the counts do not add up to the
--   outputs; 54000 when more than 60 runs cannot all finish together (nothing written:
--   resend them in calls of at most 60).
-- * Resends (p_seqs[i], run i's write sequence number for its outputs and finish, all or
--   nothing; null = not sequenced): a run whose numbered write was applied writes nothing
--   and answers ok with its run.finished timing row again (and the run.first_response row
--   its outputs may have carried) when the run ended, else 22023; a number above the
--   run's last applied + 1 is refused (22023).
create or replace function runlane.finish_runs(
    p_run_ids bigint[],
    p_fences bigint[],
    p_outcomes text[],
    p_errors text[],
    p_costs numeric[],
    p_output_counts integer[],
    p_output_kinds text[],
    p_output_bodies text[],
    p_seqs bigint[]
)
returns table (run_id bigint, ok boolean, first_response jsonb, timing jsonb, sqlstate text)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_runs integer;
    v_i integer;
    v_order integer[];  -- input positions in thread lock order
    v_first integer[];  -- per input position, the index of its first output
    v_next integer;  -- the first output of the current run
    v_last integer;
    v_run runlane.runs;  -- the run as locked by _require_owner, before its close
    v_closed runlane.runs;  -- the run as closed
    v_visible boolean;
    v_stamp timestamptz;  -- first_response_at to set, when this call writes the first response
    v_output_id bigint;
    v_output_ids bigint[];
    v_reason text;
    v_origin timestamptz;
    v_together_ids bigint[];
    v_together_first jsonb[];
    v_together_timings jsonb[];
    v_org text := nullif(current_setting('runlane.org_id', true), '');
begin
    -- GUARD: arguments, before any run is touched.
    if p_run_ids is null or p_fences is null or p_outcomes is null or p_errors is null
        or p_costs is null or p_output_counts is null or p_output_kinds is null
        or p_output_bodies is null or p_seqs is null then
        raise exception 'every array is required (pass empty arrays for no outputs)'
            using errcode = '22004';
    end if;
    v_runs := cardinality(p_run_ids);
    if cardinality(p_fences) <> v_runs or cardinality(p_outcomes) <> v_runs
        or cardinality(p_errors) <> v_runs or cardinality(p_costs) <> v_runs
        or cardinality(p_output_counts) <> v_runs or cardinality(p_seqs) <> v_runs then
        raise exception 'the run arrays differ in length'
            using errcode = '22023',
                  hint = 'Pass one fence, outcome, error, cost, output count and sequence number per run id.';
    end if;
    if exists (select from unnest(p_output_counts) as c (n) where c.n is null or c.n < 0)
        or cardinality(p_output_kinds) <> cardinality(p_output_bodies)
        or coalesce((select sum(c.n) from unnest(p_output_counts) as c (n)), 0)
        <> cardinality(p_output_kinds) then
        raise exception 'output counts do not match the outputs given'
            using errcode = '22023',
                  hint = 'Each output count is zero or more; they add up to the outputs passed.';
    end if;

    -- STEP: together: the whole batch in a few statements (runlane._finish_runs_together)
    -- when every run is the common case; anything else (a run fenced out or off its
    -- computer, asked to stop, a resend, a bad argument, any error) rolls that attempt
    -- back, whole, and the runs are finished one by one below. On a schema Citus
    -- distributes, one by one at once: the batch's statements read many organizations'
    -- rows, which Citus cannot lock together; each run's own statements name its own.
    if v_runs > 0 and not runlane._citus_distributed('runlane.runs') then
        begin
            select t.run_ids, t.first_responses, t.timings
            into v_together_ids, v_together_first, v_together_timings
            from runlane._finish_runs_together(
                p_run_ids, p_fences, p_outcomes, p_errors, p_costs, p_output_counts,
                p_output_kinds, p_output_bodies, p_seqs
            ) as t;
        exception when others then
            v_together_ids := null;
        end;
        if v_together_ids is not null then
            return query
            select t.run_id, true, t.first_response, t.timing, null::text
            from unnest(v_together_ids, v_together_first, v_together_timings)
                with ordinality as t (run_id, first_response, timing, position)
            order by t.position;
            return;
        end if;
    end if;

    -- STEP: run by run, each in its own subtransaction (one subtransaction id per run:
    -- at most 60, so that other sessions' snapshots never overflow their cache).
    if v_runs > 60 then
        raise exception 'finish_runs finishes at most 60 runs one by one, got %', v_runs
            using errcode = '54000',
                  hint = 'These runs did not all finish together and nothing was written: '
                      || 'send them again in calls of at most 60 runs.';
    end if;

    select
        array_agg(u.i order by r.agent_id, r.thread_id, u.i),
        array_agg(u.first order by u.i)
    into v_order, v_first
    from (
        select
            c.i::integer as i,
            p_run_ids[c.i] as id,
            sum(c.n) over (order by c.i) - c.n + 1 as first
        from unnest(p_output_counts) with ordinality as c (n, i)
    ) as u
    left join runlane.runs as r
        on r.run_id = u.id
        and (v_org is null or r.org_id = v_org);  -- (runlane.org_id: on Citus, one node)

    foreach v_i in array coalesce(v_order, '{}') loop
        run_id := p_run_ids[v_i];
        v_next := v_first[v_i];
        v_last := v_next + p_output_counts[v_i] - 1;
        first_response := null;
        timing := null;
        v_run := null;
        v_stamp := null;
        v_output_ids := '{}';
        begin
            -- GUARD: a sequenced run is checked first, so a resend of its applied write is
            -- answered without writing anything again.
            -- The number is recorded by the closing update below (runlane._close_run_with's
            -- p_write_seq), in this same subtransaction: one update of the run, not two.
            if p_seqs[v_i] is not null then
                v_run := runlane._require_owner(p_run_ids[v_i], p_fences[v_i], p_seqs[v_i], false);
                if runlane._write_applied(v_run, p_fences[v_i], p_seqs[v_i]) then
                    -- GUARD: answered as applied only when the run really ended.
                    if v_run.state in ('queued', 'running') then
                        perform runlane._refuse_write_number(
                            v_run, p_fences[v_i], p_seqs[v_i], 'finish');
                    end if;
                    timing := runlane._timing_row(v_run.run_id, 'run.finished');
                    -- the lost reply may have carried the first response of its outputs
                    if exists (
                        select 1
                        from unnest(p_output_kinds[v_next:v_last]) as k (kind)
                        where k.kind in ('text', 'final', 'message_tool', 'card')
                    ) then
                        first_response := runlane._resent_first_response(v_run, p_fences[v_i]);
                    end if;
                    ok := true;
                    finish_runs.sqlstate := null;
                    return next;
                    continue;
                end if;
            end if;
            -- STEP: the outputs, as append_output: arguments, then ownership, then the row.
            for v_j in v_next .. v_last loop
                if p_output_kinds[v_j] is null or p_output_bodies[v_j] is null then
                    raise exception 'an output needs a kind and a body'
                        using errcode = '22004';
                end if;
                perform runlane._check_body('output body', p_output_bodies[v_j]);
                v_visible := case
                    when p_output_kinds[v_j] in ('text', 'final', 'message_tool', 'card') then true
                    when p_output_kinds[v_j] in ('reasoning', 'placeholder', 'progress', 'metadata')
                        then false
                end;
                if v_visible is null then
                    raise exception 'unknown output kind %', runlane._quote_for_error(p_output_kinds[v_j])
                        using errcode = '22023',
                              hint = 'Visible: text, final, message_tool, card. '
                                  || 'Not visible: reasoning, placeholder, progress, metadata.';
                end if;
                if v_run.run_id is null then
                    v_run := runlane._require_owner(p_run_ids[v_i], p_fences[v_i]);
                end if;
                perform runlane._refuse_stopped(v_run);  -- GUARD: nothing more after a Stop

                select o.output_id into v_output_id
                from runlane._write_run_outputs(
                    array[v_run.run_id], array[v_run.org_id], array[v_run.attempts],
                    array[p_output_kinds[v_j]], array[p_output_bodies[v_j]]
                ) as o;
                v_output_ids := v_output_ids || v_output_id;

                -- GUARD: the first visible output stamps the first response, once for the
                -- run's life (written by the closing update below, same transaction).
                if v_visible and v_stamp is null and v_run.first_response_at is null then
                    v_stamp := clock_timestamp();
                end if;
            end loop;

            -- (a run without outputs enters no block: each entry is a subtransaction)
            if cardinality(v_output_ids) > 0 then
                begin
                    foreach v_output_id in array v_output_ids loop
                        perform runlane._notify_output(v_run.run_id, v_output_id);
                    end loop;
                exception when others then
                    null;  -- a hint only: chat clients page with outputs_since after a reconnect
                end;
            end if;

            -- STEP: the finish, as finish_run: arguments, then ownership, then the close.
            if p_outcomes[v_i] is null or p_costs[v_i] is null then
                raise exception 'outcome and cost are required'
                    using errcode = '22004';
            end if;
            if p_outcomes[v_i] not in ('succeeded', 'failed', 'canceled') then
                raise exception 'unknown outcome %', runlane._quote_for_error(p_outcomes[v_i])
                    using errcode = '22023',
                          hint = 'A run finishes as succeeded, failed or canceled.';
            end if;
            if not (p_costs[v_i] >= 0 and p_costs[v_i] <= 1e12) then
                perform runlane._require_amount(p_costs[v_i], 'cost');  -- raises
            end if;
            if v_run.run_id is null then
                v_run := runlane._require_owner(p_run_ids[v_i], p_fences[v_i]);
            end if;

            v_reason := case
                when v_run.reason = 'cancel_requested' then 'canceled'
                when p_errors[v_i] ~ '^[a-z][a-z_]{0,39}$' then p_errors[v_i]
                when p_outcomes[v_i] = 'failed' then 'error'
            end;
            v_closed := runlane._close_run_with(
                v_run,
                case when v_run.reason = 'cancel_requested' then 'canceled' else p_outcomes[v_i] end,
                v_reason, p_errors[v_i], p_costs[v_i], v_stamp, p_seqs[v_i]);

            -- Timing is a report on a finish already made: a failure here reads null and
            -- never undoes the run (its own subtransaction).
            begin
                select m.created_at into v_origin
                from runlane.messages as m
                where m.message_id = v_run.source_message_id and m.org_id = v_run.org_id;
                v_origin := coalesce(v_origin, v_run.created_at);
                if v_stamp is not null then
                    -- The run as it was when its first response was written: running.
                    v_run.first_response_at := v_stamp;
                    first_response := runlane._timing_of(v_run, v_origin)
                        || jsonb_build_object('event', 'run.first_response');
                end if;
                timing := runlane._timing_of(v_closed, v_origin)
                    || jsonb_build_object('event', 'run.finished');
            exception when others then
                timing := null;
            end;
            ok := true;
            finish_runs.sqlstate := null;
        exception when others then
            ok := false;
            first_response := null;
            timing := null;
            finish_runs.sqlstate := sqlstate;  -- the handler's SQLSTATE
        end;
        return next;
    end loop;
end;
$$;

comment on function runlane.finish_runs(
    bigint[], bigint[], text[], text[], numeric[], integer[], text[], text[], bigint[]
) is
'Writes each run''s outputs then finishes it (as append_output + finish_run), each run in its own '
'subtransaction; one row per run: ok, first_response and run.finished timing rows, sqlstate '
'(RL001 fenced out, …) of a run that was rolled back alone; a resend of a run''s applied '
'sequence number is ok again and writes nothing.';

revoke all on function runlane.finish_runs(
    bigint[], bigint[], text[], text[], numeric[], integer[], text[], text[], bigint[]
) from public;
grant execute on function runlane.finish_runs(
    bigint[], bigint[], text[], text[], numeric[], integer[], text[], text[], bigint[]
) to runlane_worker;

-- The form without write sequence numbers (never deduplicated).
create or replace function runlane.finish_runs(
    p_run_ids bigint[],
    p_fences bigint[],
    p_outcomes text[],
    p_errors text[],
    p_costs numeric[],
    p_output_counts integer[],
    p_output_kinds text[],
    p_output_bodies text[]
)
returns table (run_id bigint, ok boolean, first_response jsonb, timing jsonb, sqlstate text)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
begin
    return query
    select * from runlane.finish_runs(
        p_run_ids, p_fences, p_outcomes, p_errors, p_costs, p_output_counts, p_output_kinds,
        p_output_bodies, array_fill(null::bigint, array[coalesce(cardinality(p_run_ids), 0)]));
end;
$$;

comment on function runlane.finish_runs(
    bigint[], bigint[], text[], text[], numeric[], integer[], text[], text[]
) is
'Writes each run''s outputs then finishes it (as append_output + finish_run), each run in its own '
'subtransaction; one row per run: ok, first_response and run.finished timing rows, sqlstate '
'(RL001 fenced out, …) of a run that was rolled back alone.';

revoke all on function runlane.finish_runs(
    bigint[], bigint[], text[], text[], numeric[], integer[], text[], text[]
) from public;
grant execute on function runlane.finish_runs(
    bigint[], bigint[], text[], text[], numeric[], integer[], text[], text[]
) to runlane_worker;
