-- finish_runs: the last outputs and the finish of many runs in one call (one commit),
-- for a worker that coalesces the ends of runs finishing at the same time.
--
-- Guarantees:
-- * Run i is (p_run_ids[i], p_fences[i], p_outcomes[i], p_errors[i], p_costs[i]); its
--   outputs are the next p_output_counts[i] entries of p_output_kinds / p_output_bodies
--   (the outputs of run 1 first, then those of run 2, …).
-- * Each run is handled exactly as one statement of runlane.append_output for each of its
--   outputs in order, then runlane.finish_run, would handle it: the same fencing, the
--   first visible output stamping first_response in the same transaction as the finish,
--   the same journal rows, notifications and follow-up runs.
-- * Each run in its own subtransaction: a run that fails (RL001 fenced out, RL008
--   unknown, 22023 a bad outcome, 40P01 a deadlock, …) is rolled back alone and reported
--   with its SQLSTATE; its neighbours' outputs and finishes stand.
-- * Returns one row per run, in input order: ok, the run.first_response timing row when
--   one of its outputs stamped it (else null), the run.finished timing row (null when a
--   timing computation failed: a finish never fails for its report), and sqlstate
--   (null when ok).
-- * Whole-call refusals: 22004 when an array is null, 22023 when the run arrays differ in
--   length, an output count is null or negative, or the counts do not add up to the
--   outputs given.
-- * Each finished run uses one subtransaction id: keep batches under 64 runs so that
--   other sessions' snapshots never overflow the subtransaction cache.
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
as $$
declare
    v_runs integer;
    v_next integer := 1;  -- the first output of the current run
    v_last integer;
    v_timing jsonb;
begin
    -- GUARD: arguments, before any run is touched.
    if p_run_ids is null or p_fences is null or p_outcomes is null or p_errors is null
        or p_costs is null or p_output_counts is null or p_output_kinds is null
        or p_output_bodies is null then
        raise exception 'every array is required (pass empty arrays for no outputs)'
            using errcode = '22004';
    end if;
    v_runs := cardinality(p_run_ids);
    if cardinality(p_fences) <> v_runs or cardinality(p_outcomes) <> v_runs
        or cardinality(p_errors) <> v_runs or cardinality(p_costs) <> v_runs
        or cardinality(p_output_counts) <> v_runs then
        raise exception 'the run arrays differ in length'
            using errcode = '22023',
                  hint = 'Pass one fence, outcome, error, cost and output count per run id.';
    end if;
    if exists (select from unnest(p_output_counts) as c (n) where c.n is null or c.n < 0)
        or cardinality(p_output_kinds) <> cardinality(p_output_bodies)
        or coalesce((select sum(c.n) from unnest(p_output_counts) as c (n)), 0)
        <> cardinality(p_output_kinds) then
        raise exception 'output counts do not match the outputs given'
            using errcode = '22023',
                  hint = 'Each output count is zero or more; they add up to the outputs passed.';
    end if;

    for v_i in 1 .. v_runs loop
        run_id := p_run_ids[v_i];
        v_last := v_next + p_output_counts[v_i] - 1;
        first_response := null;
        begin
            for v_j in v_next .. v_last loop
                v_timing := runlane.append_output(
                    p_run_ids[v_i], p_fences[v_i], p_output_kinds[v_j], p_output_bodies[v_j]);
                if first_response is null then
                    first_response := v_timing;
                end if;
            end loop;
            timing := runlane.finish_run(
                p_run_ids[v_i], p_fences[v_i], p_outcomes[v_i], p_errors[v_i], p_costs[v_i]);
            ok := true;
            finish_runs.sqlstate := null;
        exception when others then
            ok := false;
            first_response := null;
            timing := null;
            finish_runs.sqlstate := sqlstate;  -- the handler's SQLSTATE
        end;
        v_next := v_last + 1;
        return next;
    end loop;
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
