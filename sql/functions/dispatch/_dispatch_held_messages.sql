-- _dispatch_held_messages: gives a thread's held messages to a run once the thread's
-- running run has stopped running.
--
-- Called by finish_run, retry_run and reap_stale AFTER the thread's run left the running
-- state (in the same transaction, after they locked and updated the run row: row lock
-- first, thread lock second, as runlane._lock_thread requires).
-- Guarantees:
-- * Nothing held (run_id NULL for this agent and thread): returns NULL, changes nothing.
-- * The thread has a queued interactive run (e.g. the one retry_run just re-queued):
--   every held message joins it; returns its id. No notification (its requeuer
--   publishes it). If a claim is taking that run at this very moment, the messages
--   stay held for it instead (returns NULL); they are never attached behind the back
--   of a run that may already have read its input.
-- * The thread still has a running interactive run: the messages stay held for it (it
--   can take them with take_steering; its own end dispatches them); returns NULL.
-- * Otherwise: creates the follow-up interactive run (prompt, model and computer of the
--   agent) whose source message is the EARLIEST held message, so timing counts from it
--   (run.pre_run_wait_ms includes the time it was held behind earlier work); attaches
--   every held message to it and notifies it (delivered at the caller's commit).
--   Returns its id, recorded as the thread's newest run (runlane._lock_thread).
create or replace function runlane._dispatch_held_messages(p_agent_id text, p_thread_id text)
returns bigint
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_earliest runlane.messages;
    v_run_id bigint;
    v_state text;
    v_latest bigint;
    v_org text;  -- the agent's organization: every statement names it (on Citus: one node)
begin
    if p_agent_id is null or p_thread_id is null then
        return null;
    end if;

    v_org := runlane._agent_org(p_agent_id);
    v_latest := runlane._lock_thread(p_agent_id, p_thread_id, v_org);

    select m.* into v_earliest
    from runlane.messages as m
    where
        m.agent_id = _dispatch_held_messages.p_agent_id
        and m.thread_id = _dispatch_held_messages.p_thread_id
        and m.org_id = v_org
        and m.run_id is null
    order by m.message_id
    limit 1;
    if not found then
        return null;
    end if;

    -- (the thread's only possible unfinished run is the one _lock_thread returned, read
    -- by run_id alone: see submit_message)
    select r.run_id, r.state into v_run_id, v_state
    from runlane.runs as r
    where r.run_id = v_latest and r.org_id = v_org;
    if v_state is distinct from 'queued' and v_state is distinct from 'running' then
        v_run_id := null;
        v_state := null;
    end if;

    if v_state = 'running' then
        return null;
    end if;

    if v_state = 'queued' then
        -- A claim in progress holds the queued run's row: leave the messages held rather
        -- than attach them behind the back of a run that may already be reading its
        -- input (it takes them with take_steering, or its end dispatches them).
        perform 1
        from runlane.runs as r
        -- (`is true`: no partial index on queued runs matches; see submit_message)
        where r.run_id = v_run_id and r.org_id = v_org and (r.state = 'queued') is true
        for no key update skip locked;
        if not found then
            return null;
        end if;
    end if;

    if v_run_id is not null then
        update runlane.messages as m
        set run_id = v_run_id
        where
            m.agent_id = _dispatch_held_messages.p_agent_id
            and m.thread_id = _dispatch_held_messages.p_thread_id
            and m.org_id = v_org
            and m.run_id is null;
        return v_run_id;
    end if;

    -- GUARD: the new run and its messages point at each other (its source message must
    -- be attached to it, runs_source_message_of_run_fk): its id is drawn first, and the
    -- run inserted and the messages attached by one statement, whose foreign keys are
    -- checked at its end. The run comes first: Citus runs the CTE as a statement of its
    -- own, where the run's key to its message is deferred (`runlane migrate --citus`).
    v_run_id := nextval('runlane.runs_run_id_seq'::regclass);
    if to_regclass('runlane.runs_handler_claim_order_idx') is not null then
        -- (the run carries its agent's handler: claims read by it)
        with run as (
            insert into runlane.runs as r (
                run_id, org_id, agent_id, lane, trigger, state, thread_id, prompt, model,
                computer_id, source_message_id, handler
            )
            select
                v_run_id, a.org_id, a.agent_id, 'interactive', 'interactive', 'queued',
                p_thread_id, a.prompt, a.model, a.computer_id, v_earliest.message_id, a.handler
            from runlane.agents as a
            where a.agent_id = _dispatch_held_messages.p_agent_id and a.org_id = v_org
            -- (the agent as a concurrent put_agent that moves its runs leaves it: see submit_message)
            for key share of a
        )
        update runlane.messages as m
        set run_id = v_run_id
        where
            m.agent_id = _dispatch_held_messages.p_agent_id
            and m.thread_id = _dispatch_held_messages.p_thread_id
            and m.org_id = v_org
            and m.run_id is null;
    else  -- (a schema before 0021: runs carry no handler)
        with attached as (
            update runlane.messages as m
            set run_id = v_run_id
            where
                m.agent_id = _dispatch_held_messages.p_agent_id
                and m.thread_id = _dispatch_held_messages.p_thread_id
                and m.org_id = v_org
                and m.run_id is null
        )
        insert into runlane.runs as r (
            run_id, org_id, agent_id, lane, trigger, state, thread_id, prompt, model,
            computer_id, source_message_id
        )
        select
            v_run_id, a.org_id, a.agent_id, 'interactive', 'interactive', 'queued',
            p_thread_id, a.prompt, a.model, a.computer_id, v_earliest.message_id
        from runlane.agents as a
        where a.agent_id = _dispatch_held_messages.p_agent_id and a.org_id = v_org;
    end if;

    perform runlane._record_thread_run(p_agent_id, p_thread_id, v_run_id, v_org);
    perform runlane._notify_run(v_run_id, 'interactive');
    return v_run_id;
end;
$$;

comment on function runlane._dispatch_held_messages(text, text) is
'After a thread''s run stopped running: attaches held messages to the queued run, or creates '
'the follow-up run sourced at the earliest held message (notified). Returns the run id or NULL.';

revoke all on function runlane._dispatch_held_messages(text, text) from public;
