-- _resent_first_response: the run.first_response timing row for a resent write whose
-- lost reply may have carried it.
--
-- A write that stamps the first response (append_output, finish_runs) returns the
-- run.first_response row; when its reply is lost and it is resent, the resend is
-- answered as applied and writes nothing. This gives the row back to that resend: it is
-- the run.first_response row (runlane._timing_row, never an error) when the run's first
-- visible output was written by the run's current attempt, the one holding p_fence; else
-- NULL (the first response came from an earlier attempt, or there is none). A resend of
-- a later visible output of that same attempt gets the row too: a write does not record
-- its number in its output, so the attempt is the finest it can tell. The runner logs
-- run.first_response once per attempt, whichever reply brings it.
create or replace function runlane._resent_first_response(p_run runlane.runs, p_fence bigint)
returns jsonb
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
begin
    if (p_run).first_response_at is null or (p_run).fence is distinct from p_fence then
        return null;
    end if;
    if (
        select o.attempt
        from runlane.run_outputs as o
        where o.run_id = (p_run).run_id
          and o.kind in ('text', 'final', 'message_tool', 'card')
        order by o.output_id
        limit 1
    ) is distinct from (p_run).attempts then
        return null;
    end if;
    return runlane._timing_row((p_run).run_id, 'run.first_response');
end;
$$;

comment on function runlane._resent_first_response(runlane.runs, bigint) is
'run.first_response row for a resend under p_fence when the run''s first visible output is '
'of its current attempt (the lost reply may have carried it); else NULL.';

revoke all on function runlane._resent_first_response(runlane.runs, bigint) from public;
