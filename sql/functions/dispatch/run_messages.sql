-- run_messages: the chat messages a run answers, for the agent to build its input.
--
-- Guarantees:
-- * Returns the messages attached to the run (its source message and every steering
--   message that joined it, including those it took with take_steering), in
--   message_id order (the order they were submitted).
-- * Fenced: only the current owner (running, same fence) may read them; RL001 when
--   fenced out, RL008 for an unknown run.
-- * Held messages (not attached yet) are not returned: take_steering attaches them.
create or replace function runlane.run_messages(p_run_id bigint, p_fence bigint)
returns table (message_id bigint, body text, created_at timestamptz)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
begin
    perform runlane._require_owner(p_run_id, p_fence);

    return query
    select m.message_id, m.body, m.created_at
    from runlane.messages as m
    where m.run_id = run_messages.p_run_id
    order by m.message_id;
end;
$$;

comment on function runlane.run_messages(bigint, bigint) is
'The messages attached to a run (source and steering) in order, for its current owner. '
'RL001 fenced out, RL008 unknown run.';

revoke all on function runlane.run_messages(bigint, bigint) from public;
grant execute on function runlane.run_messages(bigint, bigint) to runlane_worker;
