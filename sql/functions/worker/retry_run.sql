-- retry_run: the owner reports a failed attempt.
--
-- Guarantees: refuses with RL001 once the caller no longer owns the run (RL008 unknown).
-- While attempts < max_attempts the run goes back to queued with wake_at = now() +
-- p_delay, reason 'retry_scheduled', last_error = p_error (its first 1,000 characters:
-- what runlane.run_detail shows), lease cleared, its computer
-- lease deleted (the next computer waiter is notified and may use the computer during
-- the delay), 'run.retry_scheduled' journaled, messages held on an interactive run's
-- thread while it ran join it (runlane._dispatch_held_messages); returns 'queued'. Once attempts are spent
-- the run closes through runlane._close_run as failed / attempts_exhausted; returns
-- 'failed'. A run asked to stop (runlane.cancel_run) is never retried: it closes as
-- canceled / canceled; returns 'canceled'. p_delay is 0 .. 7 days (22023).
-- Resends (p_seq, the attempt's write sequence number; the contract form passes none): a
-- resend of an applied retry (its reply was lost) changes nothing and returns what the
-- retry left: 'failed' when it closed the run, else 'queued'; while the run is still
-- running under p_fence (another write took the number) it is refused with 22023
-- (runlane._refuse_write_number). A number above the last applied + 1: 22023.
create or replace function runlane.retry_run(
    p_run_id bigint,
    p_fence bigint,
    p_error text,
    p_delay interval,
    p_seq bigint
)
returns text
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_run runlane.runs;
    v_wake_at timestamptz;
begin
    if p_delay is null then
        raise exception 'retry delay is required'
            using errcode = '22004';
    end if;
    if p_delay < interval '0' or p_delay > interval '7 days' then
        raise exception 'retry delay % is out of range', p_delay
            using errcode = '22023',
                  hint = 'A retry delay is between 0 and 7 days.';
    end if;

    v_run := runlane._require_owner(p_run_id, p_fence, p_seq);
    if p_seq is not null and runlane._write_applied(v_run, p_fence, p_seq) then
        -- GUARD: a resend is answered as applied only when the attempt really ended.
        if v_run.state = 'running' and v_run.fence = p_fence then
            perform runlane._refuse_write_number(v_run, p_fence, p_seq, 'retry');
        end if;
        -- a resend: what the retry left
        return case when v_run.state in ('failed', 'canceled') then v_run.state else 'queued' end;
    end if;

    -- GUARD: a run asked to stop (cancel_run) is never retried: it closes as canceled.
    if v_run.reason = 'cancel_requested' then
        perform runlane._close_run(v_run, 'canceled', 'canceled', p_error);
        return 'canceled';
    end if;

    if v_run.attempts >= v_run.max_attempts then
        perform runlane._close_run(v_run, 'failed', 'attempts_exhausted', p_error);
        return 'failed';
    end if;

    v_wake_at := now() + p_delay;

    update runlane.runs as r
    set state = 'queued',
        wake_at = v_wake_at,
        reason = 'retry_scheduled',
        last_error = left(retry_run.p_error, 1000),
        lease_owner = null,
        lease_expires_at = null
    where r.run_id = v_run.run_id and r.org_id = v_run.org_id;

    perform runlane._free_computer(v_run);

    perform runlane._write_run_events(
        array[v_run.run_id], array[v_run.org_id], 'run.retry_scheduled',
        array[jsonb_build_object('attempt', v_run.attempts, 'wake_at', v_wake_at)]
    );

    if p_delay = interval '0' then
        perform runlane._notify_run(v_run.run_id, v_run.lane);
    end if;

    -- Messages held while it ran join the queued run, as new ones would (steering).
    if v_run.lane = 'interactive' then
        perform runlane._dispatch_held_messages(v_run.agent_id, v_run.thread_id);
    end if;

    return 'queued';
end;
$$;

comment on function runlane.retry_run(bigint, bigint, text, interval, bigint) is
'A failed attempt: requeued after p_delay while attempts remain (returns queued), else failed/attempts_exhausted; '
'a resend of the applied p_seq changes nothing and returns the same answer.';

revoke all on function runlane.retry_run(bigint, bigint, text, interval, bigint) from public;
grant execute on function runlane.retry_run(bigint, bigint, text, interval, bigint) to runlane_worker;

-- The contract form: no write sequence number (never deduplicated).
create or replace function runlane.retry_run(
    p_run_id bigint,
    p_fence bigint,
    p_error text,
    p_delay interval
)
returns text
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
begin
    return runlane.retry_run(p_run_id, p_fence, p_error, p_delay, null);
end;
$$;

comment on function runlane.retry_run(bigint, bigint, text, interval) is
'A failed attempt: requeued after p_delay while attempts remain (returns queued), else failed/attempts_exhausted.';

revoke all on function runlane.retry_run(bigint, bigint, text, interval) from public;
grant execute on function runlane.retry_run(bigint, bigint, text, interval) to runlane_worker;
