-- _lock_for_erasure: locks what an erasure of agents of one organization deletes, in the
-- order every other writer takes it, until the caller's transaction ends.
--
-- Guarantees:
-- * Locks the chat-thread rows of p_agents (runlane.threads), then the agents' rows,
--   each `for update`, in key order: a writer of a thread locks its thread row first and
--   its agent's row second (submit_message's key-share check of its new message), so an
--   erasure and a writer never wait for each other in a circle, nor do two erasures.
-- * From then on no run, message or key of those agents can be written: a writer that
--   waited for the agent's row finds it gone when the erasure commits (its insert fails
--   and writes nothing). A thread row created meanwhile by such a writer rolls back with it.
-- * Waits at most lock_timeout (the caller's 5 s), then raises 55P03 with a hint.
-- * Each statement names the organization (on Citus: its node alone); thread rows name
--   none before 0027 and are read by agent there.
create or replace function runlane._lock_for_erasure(p_agents text[], p_org_id text)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    if runlane._rows_name_their_org() then
        perform 1
        from runlane.threads as t
        where t.agent_id = any(p_agents) and t.org_id = p_org_id
        order by t.agent_id, t.thread_id
        for update;
    else  -- (before 0027)
        perform 1
        from runlane.threads as t
        where t.agent_id = any(p_agents)
        order by t.agent_id, t.thread_id
        for update;
    end if;

    perform 1
    from runlane.agents as a
    where a.agent_id = any(p_agents) and a.org_id = p_org_id
    order by a.agent_id
    for update;
exception when lock_not_available then
    raise exception 'an agent or chat thread to erase stayed locked by another transaction for longer '
        'than lock_timeout (%)', current_setting('lock_timeout')
        using errcode = 'lock_not_available',
              hint = 'Another call on it has not committed (an application transaction left open?). '
                  || 'Nothing was erased; retry.';
end;
$$;

comment on function runlane._lock_for_erasure(text[], text) is
'Locks the thread rows, then the rows, of one organization''s agents to erase, in key order; '
'55P03 after lock_timeout.';

revoke all on function runlane._lock_for_erasure(text[], text) from public;
