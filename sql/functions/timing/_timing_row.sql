-- _timing_row: a timing log row, run_timing plus "event", that can never fail its caller.
--
-- append_output (run.first_response), claim_runs (run.execution_started) and finish_run
-- (run.finished) return this row to the worker for its log. The seed requires that a
-- timing read failure cannot fail an already committed operation, so any error here
-- (unknown run included) yields NULL instead of raising. The exception block is its own
-- subtransaction: nothing the caller wrote is undone.
create or replace function runlane._timing_row(p_run_id bigint, p_event text)
returns jsonb
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
begin
    return runlane.run_timing(p_run_id) || jsonb_build_object('event', p_event);
exception when others then
    return null;
end;
$$;

comment on function runlane._timing_row(bigint, text) is
'run_timing(p_run_id) plus {"event": p_event}; NULL instead of an error (timing never fails a write).';

revoke all on function runlane._timing_row(bigint, text) from public;
