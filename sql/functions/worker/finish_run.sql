-- finish_run: the owner closes its run.
--
-- Guarantees: refuses with RL001 once the caller no longer owns the run (RL008 unknown);
-- refuses a cost that is null (22004), NaN, infinite or negative (22023), writing
-- nothing; a positive p_cost is a charge made now (a ledger row counted by weekly_spend
-- in this week, runlane._record_charge) and is added to runs.cost in the same update
-- that closes the run with p_outcome (succeeded | failed | canceled) through
-- runlane._close_run_with, so the computer lease is released, the next computer waiter
-- notified, run.finished journaled and held messages dispatched. A runner that charged
-- as it went (runlane.charge) passes 0.
-- reason = p_error when it is a reason code (^[a-z][a-z_]{0,39}$, e.g. 'iteration_cap'),
-- else 'error' for a failed run and null otherwise; last_error = p_error.
-- A run asked to stop (runlane.cancel_run: reason 'cancel_requested') closes as
-- canceled with reason 'canceled', whatever p_outcome says.
-- Returns the run.finished timing row (runlane._timing_row); a failure computing it
-- never fails the finish: the row reads null instead.
-- Resends (p_seq, the attempt's write sequence number; the contract form passes none):
-- the finish is recorded as the run's last applied write (write_fence, write_seq); a
-- resend of an applied finish (its reply was lost) changes nothing and returns the
-- run.finished timing row again, not RL001, when the run ended; when it did not (another
-- write took the number) the finish is refused with 22023 (runlane._refuse_write_number).
-- A number above the last applied + 1 is refused with 22023 (runlane._require_owner).
create or replace function runlane.finish_run(
    p_run_id bigint,
    p_fence bigint,
    p_outcome text,
    p_error text,
    p_cost numeric,
    p_seq bigint
)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_run runlane.runs;
    v_reason text;
begin
    -- GUARD: arguments, before any lock is taken.
    if p_outcome is null or p_cost is null then
        raise exception 'outcome and cost are required'
            using errcode = '22004';
    end if;
    if p_outcome not in ('succeeded', 'failed', 'canceled') then
        raise exception 'unknown outcome %', runlane._quote_for_error(p_outcome)
            using errcode = '22023',
                  hint = 'A run finishes as succeeded, failed or canceled.';
    end if;
    -- The common case is one comparison; _require_amount names what is wrong.
    if not (p_cost >= 0 and p_cost <= 1e12) then
        perform runlane._require_amount(p_cost, 'cost');
    end if;
    
    -- GUARD: the caller still owns the run (row locked until commit).
    v_run := runlane._require_owner(p_run_id, p_fence, p_seq);
    if p_seq is not null and runlane._write_applied(v_run, p_fence, p_seq) then
        -- GUARD: a resend is answered as applied only when the run really ended.
        if v_run.state in ('queued', 'running') then
            perform runlane._refuse_write_number(v_run, p_fence, p_seq, 'finish');
        end if;
        return runlane._timing_row(p_run_id, 'run.finished');  -- a resend: finished already
    end if;

    v_reason := case
        when v_run.reason = 'cancel_requested' then 'canceled'
        when p_error ~ '^[a-z][a-z_]{0,39}$' then p_error
        when p_outcome = 'failed' then 'error'
    end;

    -- The charge goes in the closing update itself (and its ledger row beside it): one
    -- update of the run per finish. A run asked to stop (cancel_run) ends canceled,
    -- whatever its last step reported.
    perform runlane._close_run_with(
        v_run,
        case when v_run.reason = 'cancel_requested' then 'canceled' else p_outcome end,
        v_reason, p_error, p_cost, null
    );

    -- Timing is a report on a finish already made: _timing_row answers null instead of
    -- raising (its own subtransaction), so it can never undo the finish.
    return runlane._timing_row(p_run_id, 'run.finished');
end;
$$;

comment on function runlane.finish_run(bigint, bigint, text, text, numeric, bigint) is
'Closes an owned run as succeeded, failed or canceled (RL001 when fenced out); returns the run.finished timing row, '
'also to a resend of the applied p_seq.';

revoke all on function runlane.finish_run(bigint, bigint, text, text, numeric, bigint) from public;
grant execute on function runlane.finish_run(bigint, bigint, text, text, numeric, bigint) to runlane_worker;

-- The contract form: no write sequence number (never deduplicated).
create or replace function runlane.finish_run(
    p_run_id bigint,
    p_fence bigint,
    p_outcome text,
    p_error text default null,
    p_cost numeric default 0
)
returns jsonb
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
begin
    return runlane.finish_run(p_run_id, p_fence, p_outcome, p_error, p_cost, null);
end;
$$;

comment on function runlane.finish_run(bigint, bigint, text, text, numeric) is
'Closes an owned run as succeeded, failed or canceled (RL001 when fenced out); returns the run.finished timing row.';

revoke all on function runlane.finish_run(bigint, bigint, text, text, numeric) from public;
grant execute on function runlane.finish_run(bigint, bigint, text, text, numeric) to runlane_worker;
