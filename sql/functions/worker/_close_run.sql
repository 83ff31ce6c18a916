-- _close_run: the single terminal transition of a run (finish_run, retry_run with its
-- attempts spent, reap_stale).
--
-- Guarantees, for the run p_run (the caller holds its row lock):
--   * state = p_outcome, reason = p_reason, last_error = p_error (first 1,000 characters),
--     finished_at = clock_timestamp(), lease owner and expiry cleared;
--   * the computer lease held by this run (and only that row) is deleted;
--   * a run_events row 'run.finished' with detail {outcome, reason}: codes only, never
--     text or identifiers;
--   * the next awake queued run waiting on the freed computer is notified;
--   * for an interactive run, messages held while it ran are dispatched into their
--     follow-up run (runlane._dispatch_held_messages).
-- The work is done by runlane._close_run_with (see there).
-- Clearing lease_owner also tells the 0002 compatibility trigger this is a new-generation
-- write, so it stamps nothing.
create or replace function runlane._close_run(
    p_run runlane.runs,
    p_outcome text,
    p_reason text,
    p_error text
)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    -- One definition of the transition: runlane._close_run_with, charging nothing and
    -- stamping no first response.
    perform runlane._close_run_with(p_run, p_outcome, p_reason, p_error, 0, null);
end;
$$;

comment on function runlane._close_run(runlane.runs, text, text, text) is
'Terminal transition: state, reason, error, finished_at; frees the computer lease, journals run.finished, '
'notifies the next computer waiter and dispatches held messages of an interactive run.';

revoke all on function runlane._close_run(runlane.runs, text, text, text) from public;
