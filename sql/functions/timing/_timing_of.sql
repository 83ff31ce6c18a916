-- _timing_of: the run_timing object of a run row already in hand.
--
-- Guarantees: exactly what runlane.run_timing returns for a run whose row is p_run and
-- whose origin (its source message's created_at, else its own created_at) is p_origin:
-- the one definition of the run-level timing measurements, which run_timing reads rows
-- for and finish_runs feeds with the rows it has just written (no second read of the run
-- or its source message). Pure: reads nothing, writes nothing.
--
-- The one runlane function without a pinned search_path, on purpose: a SQL function
-- with a SET clause is never inlined, and this one runs for every claimed and every
-- finished run. Inlined, the expression is planned into its caller's statement, parsed
-- under the caller's pinned search_path (every caller is a runlane function that pins
-- pg_catalog, pg_temp); nobody else may execute it. Called as a PL/pgSQL function it costs
-- about 7 us per run more (13 against 6 us per row over 20,000 rows). Callers
-- pass plain columns or variables: an argument with a subquery in it (used three times in
-- the body) keeps the planner from inlining. STABLE, not IMMUTABLE: jsonb_build_object
-- is stable, and an IMMUTABLE function over it is not inlined.
create or replace function runlane._timing_of(p_run runlane.runs, p_origin timestamptz)
returns jsonb
language sql
stable
as $$
    -- jsonb_strip_nulls drops every key whose timestamp (or terminal state) is missing.
    -- The arithmetic is written out here rather than calling _ms_between: a function with a
    -- pinned search_path is never inlined (it cost ~45% of database time in the claim
    -- benchmark).
    select jsonb_strip_nulls(jsonb_build_object(
        'run.id', p_run.run_id,
        'run.lane', p_run.lane,
        'run.trigger', p_run.trigger,
        'run.attempt', p_run.attempts,
        'run.outcome', case
            when p_run.state in ('succeeded', 'failed', 'canceled', 'skipped') then p_run.state
        end,
        'run.pre_run_wait_ms', round(extract(epoch from p_run.created_at - p_origin) * 1000)::bigint,
        'run.queue_wait_ms',
        round(extract(epoch from p_run.first_started_at - p_run.created_at) * 1000)::bigint,
        'run.first_response_ms',
        round(extract(epoch from p_run.first_response_at - p_origin) * 1000)::bigint,
        'run.total_ms', round(extract(epoch from p_run.finished_at - p_origin) * 1000)::bigint,
        'run.execution_wall_ms',
        round(extract(epoch from p_run.finished_at - p_run.first_started_at) * 1000)::bigint
    ))
$$;

comment on function runlane._timing_of(runlane.runs, timestamptz) is
'The run_timing object of a run row in hand and its origin timestamp (no reads; inlined into its caller).';

revoke all on function runlane._timing_of(runlane.runs, timestamptz) from public;
