-- _timing_of: the run_timing object of a run row already in hand.
--
-- Guarantees: exactly what runlane.run_timing returns for a run whose row is p_run and
-- whose origin (its source message's created_at, else its own created_at) is p_origin:
-- the one definition of the run-level timing measurements, which run_timing reads rows
-- for and finish_runs feeds with the rows it has just written (no second read of the run
-- or its source message). Pure: reads nothing, writes nothing.
create or replace function runlane._timing_of(p_run runlane.runs, p_origin timestamptz)
returns jsonb
language plpgsql
immutable
set search_path = pg_catalog, pg_temp
as $$
begin
    -- jsonb_strip_nulls drops every key whose timestamp (or terminal state) is missing.
    return jsonb_strip_nulls(jsonb_build_object(
        'run.id', p_run.run_id,
        'run.lane', p_run.lane,
        'run.trigger', p_run.trigger,
        'run.attempt', p_run.attempts,
        'run.outcome', case
            when p_run.state in ('succeeded', 'failed', 'canceled', 'skipped') then p_run.state
        end,
        -- The arithmetic is written out here rather than calling _ms_between: this runs on
        -- every claim, first response and finish, and a function with a pinned search_path
        -- is never inlined (it cost ~45% of database time in the claim benchmark).
        'run.pre_run_wait_ms', round(extract(epoch from p_run.created_at - p_origin) * 1000)::bigint,
        'run.queue_wait_ms',
        round(extract(epoch from p_run.first_started_at - p_run.created_at) * 1000)::bigint,
        'run.first_response_ms',
        round(extract(epoch from p_run.first_response_at - p_origin) * 1000)::bigint,
        'run.total_ms', round(extract(epoch from p_run.finished_at - p_origin) * 1000)::bigint,
        'run.execution_wall_ms',
        round(extract(epoch from p_run.finished_at - p_run.first_started_at) * 1000)::bigint
    ));
end;
$$;

comment on function runlane._timing_of(runlane.runs, timestamptz) is
'The run_timing object of a run row in hand and its origin timestamp (no reads).';

revoke all on function runlane._timing_of(runlane.runs, timestamptz) from public;
