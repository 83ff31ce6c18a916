-- release_run: the owner gives its running run back to the queue without failing it
-- (graceful shutdown, computer retry delay).
--
-- Guarantees: refuses with RL001 once the caller no longer owns the run (RL008 unknown);
-- the run becomes queued with wake_at = p_wake_at exactly as given (null = at once),
-- reason = coalesce(p_reason, 'released') (a reason code), lease owner and expiry
-- cleared, its computer lease deleted, 'run.released' journaled; the run itself (when
-- awake) and the next waiter of its computer are notified so another worker resumes at
-- once; messages held on an interactive run's thread while it ran join it
-- (runlane._dispatch_held_messages). The attempt stays counted; the fence is unchanged
-- until the next claim.
-- Setting lease_owner to null is what marks this as a new-generation requeue for the
-- 0002 compatibility trigger: it stamps no legacy backoff, so the explicit wake_at wins
-- even when it equals the old one. Returns true. A run asked to stop (runlane.cancel_run)
-- is not handed back: it closes as canceled / canceled and false is returned.
-- Resends (p_seq, the attempt's write sequence number; the contract form passes none): a
-- resend of an applied release (its reply was lost) changes nothing and returns true;
-- while the run is still running under p_fence (another write took the number) it is
-- refused with 22023 (runlane._refuse_write_number). A number above the last applied + 1:
-- 22023.
create or replace function runlane.release_run(
    p_run_id bigint,
    p_fence bigint,
    p_wake_at timestamptz,
    p_reason text,
    p_seq bigint
)
returns boolean
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_run runlane.runs;
    v_reason text := coalesce(p_reason, 'released');
begin
    if v_reason !~ '^[a-z][a-z_]{0,39}$' then
        raise exception 'release reason must be a reason code such as shutdown'
            using errcode = '22023',
                  hint = 'Lower-case letters and underscores, at most 40 characters.';
    end if;

    perform runlane._check_wake_at(p_wake_at);

    v_run := runlane._require_owner(p_run_id, p_fence, p_seq);
    if p_seq is not null and runlane._write_applied(v_run, p_fence, p_seq) then
        -- GUARD: a resend is answered as applied only when the attempt really ended.
        if v_run.state = 'running' and v_run.fence = p_fence then
            perform runlane._refuse_write_number(v_run, p_fence, p_seq, 'release');
        end if;
        return true;  -- a resend: released already
    end if;

    -- GUARD: a run asked to stop (cancel_run) is not handed back: it closes as canceled.
    if v_run.reason = 'cancel_requested' then
        perform runlane._close_run(v_run, 'canceled', 'canceled', null);
        return false;
    end if;

    update runlane.runs as r
    set state = 'queued',
        wake_at = release_run.p_wake_at,
        reason = v_reason,
        lease_owner = null,
        lease_expires_at = null
    where r.run_id = v_run.run_id and r.org_id = v_run.org_id;

    perform runlane._free_computer(v_run);

    perform runlane._write_run_events(
        array[v_run.run_id], array[v_run.org_id], 'run.released',
        array[jsonb_build_object('reason', v_reason, 'attempt', v_run.attempts, 'wake_at', p_wake_at)]
    );

    if p_wake_at is null or p_wake_at <= now() then
        perform runlane._notify_run(v_run.run_id, v_run.lane);
    end if;

    -- Messages held while it ran join the queued run, as new ones would (steering).
    if v_run.lane = 'interactive' then
        perform runlane._dispatch_held_messages(v_run.agent_id, v_run.thread_id);
    end if;

    return true;
end;
$$;

comment on function runlane.release_run(bigint, bigint, timestamptz, text, bigint) is
'Requeues an owned run without failing it (shutdown, computer retry delay) with an explicit '
'wake time; RL001 when fenced out; true again for a resend of the applied p_seq.';

revoke all on function runlane.release_run(bigint, bigint, timestamptz, text, bigint) from public;
grant execute on function runlane.release_run(bigint, bigint, timestamptz, text, bigint) to runlane_worker;

-- The contract form: no write sequence number (never deduplicated).
create or replace function runlane.release_run(
    p_run_id bigint,
    p_fence bigint,
    p_wake_at timestamptz default null,
    p_reason text default null
)
returns boolean
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
begin
    return runlane.release_run(p_run_id, p_fence, p_wake_at, p_reason, null);
end;
$$;

comment on function runlane.release_run(bigint, bigint, timestamptz, text) is
'Requeues an owned run without failing it (shutdown, computer retry delay) with an explicit '
'wake time; RL001 when fenced out.';

revoke all on function runlane.release_run(bigint, bigint, timestamptz, text) from public;
grant execute on function runlane.release_run(bigint, bigint, timestamptz, text) to runlane_worker;
