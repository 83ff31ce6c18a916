-- _close_run: the single terminal transition of a run (finish_run, retry_run with its
-- attempts spent, reap_stale).
--
-- Guarantees, for the run p_run (the caller holds its row lock):
--   * state = p_outcome, reason = p_reason, last_error = p_error,
--     finished_at = clock_timestamp(), lease owner and expiry cleared;
--   * the computer lease held by this run (and only that row) is deleted;
--   * a run_events row 'run.finished' with detail {outcome, reason}: codes only, never
--     text or identifiers;
--   * the next awake queued run waiting on the freed computer is notified;
--   * for an interactive run, messages held while it ran are dispatched into their
--     follow-up run (runlane._dispatch_held_messages).
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
    if p_outcome is null or p_outcome not in ('succeeded', 'failed', 'canceled') then
        raise exception 'a run closes as succeeded, failed or canceled, not %',
            coalesce(p_outcome, 'null')
            using errcode = '22023';
    end if;

    update runlane.runs as r
    set state = _close_run.p_outcome,
        reason = _close_run.p_reason,
        last_error = _close_run.p_error,
        finished_at = clock_timestamp(),
        lease_owner = null,
        lease_expires_at = null
    where r.run_id = (_close_run.p_run).run_id;

    delete from runlane.computer_leases as cl
    where cl.computer_id = (_close_run.p_run).computer_id
      and cl.run_id = (_close_run.p_run).run_id;

    insert into runlane.run_events (run_id, event, detail)
    values (
        (p_run).run_id,
        'run.finished',
        jsonb_build_object('outcome', p_outcome, 'reason', p_reason)
    );

    perform runlane._notify_computer_waiter((p_run).computer_id);

    if (p_run).lane = 'interactive' and (p_run).thread_id is not null then
        perform runlane._dispatch_held_messages((p_run).agent_id, (p_run).thread_id);
    end if;
end;
$$;

comment on function runlane._close_run(runlane.runs, text, text, text) is
'Terminal transition: state, reason, error, finished_at; frees the computer lease, journals run.finished, '
'notifies the next computer waiter and dispatches held messages of an interactive run.';

revoke all on function runlane._close_run(runlane.runs, text, text, text) from public;
