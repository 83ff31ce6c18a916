-- _close_run_with: the single terminal transition of a run, with the finish's charge and
-- first-response stamp folded into the same update (runlane._close_run is this with
-- neither; finish_runs uses both so a run is updated once per finish, not twice).
--
-- Guarantees, for the run p_run (the caller holds its row lock):
--   * ONE update of the run: state = p_outcome, reason = p_reason, last_error = p_error
--     (its first 1,000 characters),
--     finished_at = clock_timestamp(), lease owner and expiry cleared, cost increased by
--     p_cost (finite and >= 0, checked by the caller), and first_response_at set to
--     p_first_response_at only when it is still null (never reset);
--   * a positive p_cost is also a charge made now: one ledger row and its owner's bucket
--     (runlane._record_charge), so weekly_spend counts it in this week; 0 writes none;
--   * the computer lease held by this run (and only that row) is deleted, and the next
--     awake queued run waiting on the freed computer is notified (skipped for a run
--     without a computer: it holds no lease and frees none);
--   * a run_events row 'run.finished' with detail {outcome, reason}: codes only, never
--     text or identifiers;
--   * the run's stream is told it ended (runlane._notify_stream_end), so its followers
--     stop at once instead of on their next poll;
--   * for an interactive run with a thread, messages held while it ran are dispatched
--     into their follow-up run (runlane._dispatch_held_messages);
--   * returns the run row as updated (for timing, without reading it again).
-- Clearing lease_owner also tells the 0002 compatibility trigger this is a new-generation
-- write, so it stamps nothing.
-- The seven-argument form also records a sequenced finish in that same update: with
-- p_write_seq not null, write_fence = the run's fence and write_seq = p_write_seq (what
-- runlane._require_owner would have written in an update of its own; finish_runs checks
-- ownership with p_record false and records here). Null: the write columns stay as they are.
create or replace function runlane._close_run_with(
    p_run runlane.runs,
    p_outcome text,
    p_reason text,
    p_error text,
    p_cost numeric,
    p_first_response_at timestamptz,
    p_write_seq bigint
)
returns runlane.runs
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_closed runlane.runs;
    -- (read once, before the update: Citus calls no volatile function inside an UPDATE of
    -- a distributed table; the update names the run's whole key, so it reaches one node)
    v_finished_at timestamptz := clock_timestamp();
begin
    if p_outcome is null or p_outcome not in ('succeeded', 'failed', 'canceled') then
        raise exception 'a run closes as succeeded, failed or canceled, not %',
            coalesce(p_outcome, 'null')
            using errcode = '22023';
    end if;

    -- GUARD: a finish that charges nothing (the common case) writes no ledger row.
    if p_cost > 0 then
        perform runlane._record_charge(p_run, p_cost);
    end if;

    -- (two statements, not one: the form without a number must also run on a schema
    -- older than 0004, which has no write columns, during a rolling upgrade)
    if p_write_seq is null then
        update runlane.runs as r
        set state = _close_run_with.p_outcome,
            reason = _close_run_with.p_reason,
            last_error = left(_close_run_with.p_error, 1000),
            finished_at = v_finished_at,
            lease_owner = null,
            lease_expires_at = null,
            cost = r.cost + coalesce(_close_run_with.p_cost, 0),
            first_response_at = coalesce(r.first_response_at, _close_run_with.p_first_response_at)
        where r.run_id = (_close_run_with.p_run).run_id and r.org_id = (_close_run_with.p_run).org_id
        returning r.* into v_closed;
    else
        update runlane.runs as r
        set state = _close_run_with.p_outcome,
            reason = _close_run_with.p_reason,
            last_error = left(_close_run_with.p_error, 1000),
            finished_at = v_finished_at,
            lease_owner = null,
            lease_expires_at = null,
            cost = r.cost + coalesce(_close_run_with.p_cost, 0),
            first_response_at = coalesce(r.first_response_at, _close_run_with.p_first_response_at),
            write_fence = (_close_run_with.p_run).fence,
            write_seq = _close_run_with.p_write_seq
        where r.run_id = (_close_run_with.p_run).run_id and r.org_id = (_close_run_with.p_run).org_id
        returning r.* into v_closed;
    end if;

    perform runlane._free_computer(p_run);

    perform runlane._write_run_events(
        array[(p_run).run_id], array[(p_run).org_id], 'run.finished',
        array[jsonb_build_object('outcome', p_outcome, 'reason', p_reason)]
    );
    perform runlane._notify_stream_end((p_run).run_id);

    -- GUARD: only an interactive run with a thread can have messages held behind it.
    if (p_run).lane = 'interactive' and (p_run).thread_id is not null then
        perform runlane._dispatch_held_messages((p_run).agent_id, (p_run).thread_id);
    end if;

    return v_closed;
end;
$$;

comment on function runlane._close_run_with(runlane.runs, text, text, text, numeric, timestamptz, bigint) is
'Terminal transition in one update (state, reason, error, finished_at, cost, first_response_at '
'when unset, and the write sequence number of a sequenced finish); frees the computer lease, '
'journals run.finished, notifies the next computer waiter, dispatches held messages of an '
'interactive run; returns the updated row.';

revoke all on function runlane._close_run_with(
    runlane.runs, text, text, text, numeric, timestamptz, bigint
) from public;

-- The form without a write sequence number (finish_run, retry_run and the others record
-- theirs through runlane._require_owner).
create or replace function runlane._close_run_with(
    p_run runlane.runs,
    p_outcome text,
    p_reason text,
    p_error text,
    p_cost numeric,
    p_first_response_at timestamptz
)
returns runlane.runs
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    return runlane._close_run_with(
        p_run, p_outcome, p_reason, p_error, p_cost, p_first_response_at, null
    );
end;
$$;

comment on function runlane._close_run_with(runlane.runs, text, text, text, numeric, timestamptz) is
'Terminal transition in one update (state, reason, error, finished_at, cost, first_response_at '
'when unset); frees the computer lease, journals run.finished, notifies the next computer '
'waiter, dispatches held messages of an interactive run; returns the updated row.';

revoke all on function runlane._close_run_with(runlane.runs, text, text, text, numeric, timestamptz) from public;
