-- submit_message (keyed form): submit_message(agent, thread, body) that a client may retry.
--
-- Guarantees:
-- * The first call with a key for an agent does exactly what submit_message(agent,
--   thread, body) does and stores its answer (message_id, run_id, disposition) under the
--   key, in the same transaction. A later call with the same key and the same thread and
--   body returns that stored answer and creates nothing, also when both calls race: the
--   key row is inserted first (runlane._claim_idempotency_key), so the second caller waits
--   for the first to commit (at most lock_timeout, then 55P03) and reads its answer.
-- * The answer is the first call's, as it was: a replay says 'created' even when that run
--   has since finished (read its state with run_status).
-- * A first call that fails (bad thread or body, a lock timeout, …) rolls back with its
--   key: a retry with the key simply tries again.
-- * Errors: RL010 the key was already used with another thread or body, or for run_now;
--   RL008 unknown agent (also another organization's for a scoped login: checked before
--   any key is read, so keys leak nothing); 22004 a null key (the unkeyed form is
--   submit_message(agent, thread, body)); 22023 a blank key or one over 256 characters;
--   and every error of submit_message(agent, thread, body).
-- * Keys are kept as long as the message they name (deleted with it, by purge).
create or replace function runlane.submit_message(
    p_agent_id text, p_thread_id text, p_body text, p_idempotency_key text
)
returns table (message_id bigint, run_id bigint, disposition text)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_org text;
    v_prev runlane.idempotency_keys;
    v_message_id bigint;
    v_run_id bigint;
    v_disposition text;
begin
    -- GUARD: the key and the agent, before any key is read.
    if p_idempotency_key is null then
        raise exception 'the keyed submit_message needs an idempotency key'
            using errcode = '22004',
                  hint = 'Pass a key, or call submit_message(agent, thread, body) for a call without one.';
    end if;
    perform runlane._check_id('idempotency key', p_idempotency_key);

    select a.org_id into v_org
    from runlane.agents as a
    where a.agent_id = submit_message.p_agent_id;
    if not found or not runlane._in_scope(v_org) then
        raise exception 'unknown agent %', runlane._quote_for_error(p_agent_id)
            using errcode = 'RL008';
    end if;

    -- GUARD: the key row first; an earlier call's answer is returned as it was.
    v_prev := runlane._claim_idempotency_key(
        p_agent_id, p_idempotency_key, 'submit_message',
        sha256(convert_to(jsonb_build_array(p_thread_id, p_body)::text, 'UTF8'))
    );
    if v_prev.agent_id is not null then
        return query select v_prev.message_id, v_prev.run_id, v_prev.disposition;
        return;
    end if;

    select s.message_id, s.run_id, s.disposition
    into v_message_id, v_run_id, v_disposition
    from runlane.submit_message(p_agent_id, p_thread_id, p_body) as s;

    update runlane.idempotency_keys as k
    set message_id = v_message_id, run_id = v_run_id, disposition = v_disposition
    where k.agent_id = submit_message.p_agent_id and k.idempotency_key = submit_message.p_idempotency_key;

    return query select v_message_id, v_run_id, v_disposition;
end;
$$;

comment on function runlane.submit_message(text, text, text, text) is
'submit_message with an idempotency key: a retry with the same key returns the first call''s '
'(message_id, run_id, disposition) and creates nothing; RL010 the key was used with other arguments.';

revoke all on function runlane.submit_message(text, text, text, text) from public;
grant execute on function runlane.submit_message(text, text, text, text) to runlane_api;
