-- submit_message: commits one chat message and decides which run answers it.
--
-- Guarantees:
-- * The message is stored in the caller's transaction; nothing is notified here (a
--   notification failing at commit must never lose the message). After commit the
--   caller publishes the returned run with runlane.publish_run(run_id).
-- * A thread is (agent_id, thread_id); decisions for one thread are serialized by
--   runlane._lock_thread, so the thread has at most one unfinished interactive run and
--   every message ends up attached to a run or held, never lost. Dispositions:
--     steering  the thread has a QUEUED interactive run: the message joins it (run_id =
--               that run); the run's source message stays the timing origin.
--     held      the thread has a RUNNING interactive run: the message waits (run_id
--               NULL). The running run may take it with take_steering; otherwise, when
--               that run ends, _dispatch_held_messages makes the follow-up run.
--     created   otherwise: a new queued interactive run (prompt, model and computer of
--               the agent) whose source message this is.
-- * A queued run is locked (for no key update) before the message joins it, so a claim
--   in progress either commits first (the message is then held for the running run) or
--   skips the run until this message is committed with it: a run never starts without
--   the steering messages attached to it.
-- * Interactive chat is NOT gated by agents.enabled / agents.admin_locked: those switches
--   gate agent triggering (schedules, run now), not a person talking to the agent.
-- * Errors: RL008 unknown agent (also another organization's agent for a login scoped to
--   one, runlane._api_org: the same message, nothing leaks by existence); 22004 null
--   thread or body; 22023 blank thread or one longer than 256 characters, empty or
--   whitespace-only body.
-- * Callers must use READ COMMITTED (the default): the decision re-reads the thread
--   after taking the thread lock.
-- * Cost follows the thread, not the queue: the thread's row names its newest interactive
--   run (runlane._lock_thread), read by primary key with sequential scans disabled, so no
--   plan cached on a small table scans it later; a run created here is recorded there
--   (runlane._record_thread_run).
create or replace function runlane.submit_message(p_agent_id text, p_thread_id text, p_body text)
returns table (message_id bigint, run_id bigint, disposition text)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
set enable_seqscan = off
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
    v_agent runlane.agents;
    v_message_id bigint;
    v_run_id bigint;
    v_state text;
    v_busy_rounds int := 0;
    v_latest bigint;
    v_org text;
begin
    -- GUARD: arguments and the agent.
    if p_thread_id is null then
        raise exception 'a message needs a thread id'
            using errcode = '22004';
    end if;
    if btrim(p_thread_id) = '' then
        raise exception 'a message needs a thread id, got an empty one'
            using errcode = '22023';
    end if;
    -- Thread ids are indexed: a huge one would fail deep in an index insert (54000).
    if length(p_thread_id) > 256 then
        raise exception 'a thread id is at most 256 characters, got %', length(p_thread_id)
            using errcode = '22023';
    end if;
    if p_body is null then
        raise exception 'a message needs a body'
            using errcode = '22004';
    end if;
    -- An empty message gives the agent nothing to answer: refused like an empty thread id
    -- (whitespace and invisible characters, ASCII and Unicode, count as empty).
    if p_body ~ '^[[:space:][:cntrl:]\u0085\u00a0\u1680\u180e\u2000-\u200f\u2028-\u202f\u205f-\u2064\u3000\ufeff]*$' then
        raise exception 'a message needs a body (p_body), got an empty or whitespace-only one'
            using errcode = '22023',
                  hint = 'Send the text the person wrote; to start the agent without a message, use run_now.';
    end if;
    perform runlane._check_id('thread id', p_thread_id);
    perform runlane._check_body('message body', p_body);

    -- (the organization first, then every statement by the whole key: on Citus, one node.
    -- A login held to one organization reads only there, so a foreign id costs what an
    -- unknown one does; else runlane._agent_org, inline: every message's path)
    if v_scope is not null then
        v_org := v_scope;
    else
        if to_regclass('runlane.agent_orgs') is not null then
            select o.org_id into v_org from runlane.agent_orgs as o where o.agent_id = p_agent_id;
        end if;
        if v_org is null then
            select a.org_id into v_org from runlane.agents as a where a.agent_id = p_agent_id;
        end if;
    end if;
    select a.* into v_agent
    from runlane.agents as a
    where a.agent_id = submit_message.p_agent_id
      and a.org_id = v_org
      and (v_scope is null or a.org_id = v_scope);
    if not found then
        raise exception 'unknown agent %', runlane._quote_for_error(p_agent_id)
            using errcode = 'RL008';
    end if;

    v_latest := runlane._lock_thread(v_agent.agent_id, p_thread_id, v_org);

    -- GUARD: the agent as it is now, under the KEY SHARE lock the message's foreign key
    -- takes anyway. erase_agent (a delete) and put_agent moving the agent's runs to another
    -- handler (FOR UPDATE) conflict with it: either they committed first, and the message
    -- finds the agent gone (RL008, not a foreign-key error) or its new handler, or they
    -- wait for this transaction and then see its run.
    select a.* into v_agent
    from runlane.agents as a
    where a.agent_id = v_agent.agent_id and a.org_id = v_org
    for key share;
    if not found then
        raise exception 'unknown agent %', runlane._quote_for_error(p_agent_id)
            using errcode = 'RL008';
    end if;

    -- GUARD: find the thread's unfinished interactive run (a queued one first).
    -- The queued run's row is locked with SKIP LOCKED first: its usual lockers are
    -- claims, which never wait for this thread lock, while waiting for a row lock with
    -- the thread lock held is the reverse of finish_run's order (row, then thread).
    -- When the row is busy, re-read after a short pause: the claim either commits (the
    -- run is running: hold the message) or rolls back (still queued: steer). Should it
    -- stay busy (someone holds the row for long), wait for the lock instead: a run that
    -- was queued when the wait began cannot be held by a finishing owner.
    -- The thread's only possible unfinished run is the one _lock_thread returned, read
    -- by its key alone: a state or lane condition would let the plan pick a lane index and
    -- walk the lane's queue. Where the lock must test the state, it is written
    -- `(state = 'queued') is true`, which no partial index on queued runs matches: a
    -- plain `state = 'queued'` with the organization lets a plan cached on a small table
    -- walk the organization's queue in the fair-claim index.
    loop
        select r.run_id, r.state into v_run_id, v_state
        from runlane.runs as r
        where r.run_id = v_latest and r.org_id = v_org;
        if v_state is distinct from 'queued' and v_state is distinct from 'running' then
            v_run_id := null;
            v_state := null;
        end if;

        exit when v_run_id is null or v_state = 'running';

        v_busy_rounds := v_busy_rounds + 1;
        if v_busy_rounds <= 50 then
            perform 1
            from runlane.runs as r
            where r.run_id = v_run_id and r.org_id = v_org and (r.state = 'queued') is true
            for no key update skip locked;
        else
            perform 1
            from runlane.runs as r
            where r.run_id = v_run_id and r.org_id = v_org and (r.state = 'queued') is true
            for no key update;
        end if;
        exit when found;

        if v_busy_rounds < 50 then
            perform pg_sleep(0.001);
        end if;
        v_run_id := null;
        v_state := null;
    end loop;

    if v_state in ('queued', 'running') then
        insert into runlane.messages as m (org_id, agent_id, thread_id, body, run_id)
        values (
            v_agent.org_id, v_agent.agent_id, p_thread_id, p_body,
            case when v_state = 'queued' then v_run_id end
        )
        returning m.message_id into v_message_id;
    end if;

    if v_state = 'queued' then
        return query select v_message_id, v_run_id, 'steering'::text;
    elsif v_state = 'running' then
        return query select v_message_id, null::bigint, 'held'::text;
    else
        -- GUARD: the message and its run point at each other. Both ids are drawn first
        -- and both rows inserted by one statement (the foreign keys are checked at its
        -- end), so each row is written once: no insert of the message then an update of
        -- it (a second, non-HOT version and its foreign-key checks again). The run comes
        -- first: Citus runs the CTE as a statement of its own, where the run's key to its
        -- message is deferred (`runlane migrate --citus`) and the message's to its run holds.
        v_message_id := nextval('runlane.messages_message_id_seq'::regclass);
        v_run_id := nextval('runlane.runs_run_id_seq'::regclass);
        if to_regclass('runlane.runs_handler_claim_order_idx') is not null then
            -- (the run carries its agent's handler: claims read by it)
            with run as (
                insert into runlane.runs as r (
                    run_id, org_id, agent_id, lane, trigger, state, thread_id, prompt, model,
                    computer_id, source_message_id, handler
                )
                values (
                    v_run_id, v_agent.org_id, v_agent.agent_id, 'interactive', 'interactive', 'queued',
                    p_thread_id, v_agent.prompt, v_agent.model, v_agent.computer_id, v_message_id,
                    v_agent.handler
                )
            )
            insert into runlane.messages as m (message_id, org_id, agent_id, thread_id, body, run_id)
            values (v_message_id, v_agent.org_id, v_agent.agent_id, p_thread_id, p_body, v_run_id);
        else  -- (a schema before 0021: runs carry no handler)
            with message as (
                insert into runlane.messages as m (message_id, org_id, agent_id, thread_id, body, run_id)
                values (v_message_id, v_agent.org_id, v_agent.agent_id, p_thread_id, p_body, v_run_id)
            )
            insert into runlane.runs as r (
                run_id, org_id, agent_id, lane, trigger, state, thread_id, prompt, model,
                computer_id, source_message_id
            )
            values (
                v_run_id, v_agent.org_id, v_agent.agent_id, 'interactive', 'interactive', 'queued',
                p_thread_id, v_agent.prompt, v_agent.model, v_agent.computer_id, v_message_id
            );
        end if;
        perform runlane._record_thread_run(v_agent.agent_id, p_thread_id, v_run_id, v_org);

        return query select v_message_id, v_run_id, 'created'::text;
    end if;
end;
$$;

comment on function runlane.submit_message(text, text, text) is
'Commits a chat message: created (new interactive run), steering (joins the queued run) or held '
'(waits for the running run). Does not notify: publish the run afterwards with publish_run. '
'RL008 unknown agent.';

revoke all on function runlane.submit_message(text, text, text) from public;
grant execute on function runlane.submit_message(text, text, text) to runlane_api;

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
    v_prev jsonb;
    v_message_id bigint;
    v_run_id bigint;
    v_disposition text;
    v_org text;
begin
    -- GUARD: the key (and the agent, its scope) first; an earlier call's answer is
    -- returned as it was.
    v_prev := runlane._claim_idempotency_key(
        p_agent_id, p_idempotency_key, 'submit_message',
        sha256(convert_to(jsonb_build_array(p_thread_id, p_body)::text, 'UTF8'))
    );
    if v_prev is not null then
        return query select
            (v_prev ->> 'message_id')::bigint, (v_prev ->> 'run_id')::bigint, v_prev ->> 'disposition';
        return;
    end if;

    select s.message_id, s.run_id, s.disposition
    into v_message_id, v_run_id, v_disposition
    from runlane.submit_message(p_agent_id, p_thread_id, p_body) as s;

    if runlane._rows_name_their_org() then
        v_org := runlane._agent_org(p_agent_id);  -- (a value: the statement names it)
        update runlane.idempotency_keys as k
        set message_id = v_message_id, run_id = v_run_id, disposition = v_disposition
        where k.agent_id = submit_message.p_agent_id
          and k.idempotency_key = submit_message.p_idempotency_key
          and k.org_id = v_org;
    else
        update runlane.idempotency_keys as k
        set message_id = v_message_id, run_id = v_run_id, disposition = v_disposition
        where k.agent_id = submit_message.p_agent_id and k.idempotency_key = submit_message.p_idempotency_key;
    end if;

    return query select v_message_id, v_run_id, v_disposition;
end;
$$;

comment on function runlane.submit_message(text, text, text, text) is
'submit_message with an idempotency key: a retry with the same key returns the first call''s '
'(message_id, run_id, disposition) and creates nothing; RL010 the key was used with other arguments.';

revoke all on function runlane.submit_message(text, text, text, text) from public;
grant execute on function runlane.submit_message(text, text, text, text) to runlane_api;
