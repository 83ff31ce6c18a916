-- send_message: accepts one chat message in one call and one commit: submit_message, then
-- the notification publish_run sends for the run it created.
--
-- Guarantees:
-- * Stores and answers exactly as submit_message (agent, thread, body), or as its keyed
--   form when p_idempotency_key is given: the same rows, dispositions, errors and scope.
-- * For a 'created' run it queues runlane._notify_run(run, 'interactive'), delivered when
--   the caller's transaction commits, so only with the message. Publication never fails
--   the call nor its commit: runlane._notify queues nothing from a half-full NOTIFY queue
--   (the only commit-time failure of NOTIFY is a full one), and any error of the
--   notification itself is caught here. A skipped notification costs a wake-up, never
--   the message: the workers' scan finds the run.
-- * 'steering' sends nothing: the queued run was published by the call that created it
--   (a burst of messages is then one wake-up, not one per message). 'held' has no run.
-- * A keyed retry that replays 'created' notifies again: a hint, harmless for a run
--   already claimed or finished (a claim finds nothing to take).
-- * Does not set a wake time: use submit_message, then publish_run(run, wake_at).
create or replace function runlane.send_message(
    p_agent_id text, p_thread_id text, p_body text, p_idempotency_key text default null
)
returns table (message_id bigint, run_id bigint, disposition text)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_message_id bigint;
    v_run_id bigint;
    v_disposition text;
begin
    if p_idempotency_key is null then
        select s.message_id, s.run_id, s.disposition
        into v_message_id, v_run_id, v_disposition
        from runlane.submit_message(p_agent_id, p_thread_id, p_body) as s;
    else
        select s.message_id, s.run_id, s.disposition
        into v_message_id, v_run_id, v_disposition
        from runlane.submit_message(p_agent_id, p_thread_id, p_body, p_idempotency_key) as s;
    end if;

    if v_disposition = 'created' then
        -- GUARD: publication is a hint; nothing about it may fail the message.
        begin
            perform runlane._notify_run(v_run_id, 'interactive');
        exception when others then
            null;
        end;
    end if;

    return query select v_message_id, v_run_id, v_disposition;
end;
$$;

comment on function runlane.send_message(text, text, text, text) is
'submit_message and, for a created run, its notification, in one call and one commit; the '
'notification never fails the call. Same answer and errors as submit_message.';

revoke all on function runlane.send_message(text, text, text, text) from public;
grant execute on function runlane.send_message(text, text, text, text) to runlane_api;
