-- take_steering: the running run takes the chat messages that arrived while it ran.
--
-- Guarantees:
-- * Refused with RL001 once the run was stopped (runlane.cancel_run; runlane._refuse_stopped).
-- * Fenced (runlane._require_owner): RL001 when fenced out or not running, RL008 for an
--   unknown run. The run row is locked first, then the thread (the lock order of
--   runlane._thread_lock).
-- * Attaches every held message of the run's thread (same agent and thread, run_id
--   NULL) to this run and returns them in message_id order; each is returned once, to
--   one run. Later run_messages calls include them.
-- * Only interactive runs take steering: a background run on the same thread id gets
--   no rows (chat messages are answered by chat runs).
-- * Resends (p_seq, the attempt's write sequence number; the contract form passes none):
--   a resend of an applied take (its reply was lost) attaches nothing and returns EVERY
--   message attached to the run, in message_id order: the caller drops the ones it
--   already knows and is left with what the lost reply held.
create or replace function runlane.take_steering(p_run_id bigint, p_fence bigint, p_seq bigint)
returns table (message_id bigint, body text, created_at timestamptz)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_run runlane.runs;
begin
    v_run := runlane._require_owner(p_run_id, p_fence, p_seq);
    if p_seq is not null and runlane._write_applied(v_run, p_fence, p_seq) then
        return query  -- a resend: what the lost reply held is attached by now
        select m.message_id, m.body, m.created_at
        from runlane.messages as m
        where m.run_id = v_run.run_id and m.org_id = v_run.org_id
        order by m.message_id;
        return;
    end if;
    perform runlane._refuse_stopped(v_run);  -- GUARD: nothing more after a Stop

    if v_run.lane <> 'interactive' or v_run.thread_id is null then
        return;
    end if;

    perform runlane._thread_lock(v_run.agent_id, v_run.thread_id);

    return query
    with taken as (
        update runlane.messages as m
        set run_id = v_run.run_id
        where
            m.agent_id = v_run.agent_id
            and m.org_id = v_run.org_id
            and m.thread_id = v_run.thread_id
            and m.run_id is null
        returning m.message_id, m.body, m.created_at
    )
    select t.message_id, t.body, t.created_at
    from taken as t
    order by t.message_id;
end;
$$;

comment on function runlane.take_steering(bigint, bigint, bigint) is
'Attaches the thread''s held messages to this running interactive run and returns them in order. '
'RL001 fenced out, RL008 unknown run. A resend of the applied p_seq returns every attached message.';

revoke all on function runlane.take_steering(bigint, bigint, bigint) from public;
grant execute on function runlane.take_steering(bigint, bigint, bigint) to runlane_worker;

-- The contract form: no write sequence number (never deduplicated).
create or replace function runlane.take_steering(p_run_id bigint, p_fence bigint)
returns table (message_id bigint, body text, created_at timestamptz)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
begin
    return query select * from runlane.take_steering(p_run_id, p_fence, null);
end;
$$;

comment on function runlane.take_steering(bigint, bigint) is
'Attaches the thread''s held messages to this running interactive run and returns them in order. '
'RL001 fenced out, RL008 unknown run.';

revoke all on function runlane.take_steering(bigint, bigint) from public;
grant execute on function runlane.take_steering(bigint, bigint) to runlane_worker;
