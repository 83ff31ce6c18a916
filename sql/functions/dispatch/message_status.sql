-- message_status: which run answers a message, so a client can follow its reply.
--
-- Guarantees:
-- * One row: the message id, its state and the run that carries it. While the message
--   waits for its thread's running run (submit_message answered held): state 'held',
--   run_id null. Otherwise run_id is the run it is attached to and state that run's
--   (queued, running, succeeded, failed, canceled, skipped): a held message shows its
--   follow-up run from the commit that creates it (runlane._dispatch_held_messages), or
--   the running run that took it as steering (take_steering).
-- * RL008 for an unknown message and, for a login scoped to one organization
--   (runlane._api_org), for another organization's message: the same message and the
--   same work. 22004 for a null id. Read in one snapshot; never writes or locks.
-- * The message is read by id (a login held to one organization names it too: on Citus,
--   one node), then its run by the run's whole key: two primary-key probes.
create or replace function runlane.message_status(p_message_id bigint)
returns table (message_id bigint, state text, run_id bigint)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
    v_org text;
    v_run_id bigint;
    v_state text;
begin
    if p_message_id is null then
        raise exception 'message id is required'
            using errcode = '22004';
    end if;

    -- (the message, whose organization a login held to one names, and on Citus its node;
    -- then its run by the run's whole key, in this function's one snapshot)
    if v_scope is null then
        select m.org_id, m.run_id into v_org, v_run_id
        from runlane.messages as m
        where m.message_id = message_status.p_message_id;
    else
        select m.org_id, m.run_id into v_org, v_run_id
        from runlane.messages as m
        where m.message_id = message_status.p_message_id and m.org_id = v_scope;
    end if;
    if not found then
        raise exception 'unknown message %', p_message_id
            using errcode = 'RL008';
    end if;
    if v_run_id is not null then
        select r.state into v_state
        from runlane.runs as r
        where r.run_id = v_run_id and r.org_id = v_org;
    end if;
    return query select p_message_id, coalesce(v_state, 'held'), v_run_id;
end;
$$;

comment on function runlane.message_status(bigint) is
'Which run answers a message: held (run_id null) while it waits for the thread''s running run, '
'else the run that carries it and its state. RL008 unknown message.';

revoke all on function runlane.message_status(bigint) from public;
grant execute on function runlane.message_status(bigint) to runlane_api;
