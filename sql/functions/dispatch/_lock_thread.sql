-- _lock_thread: serializes the dispatch decisions of one chat thread, and returns the
-- thread's newest interactive run.
--
-- A thread is keyed by (agent_id, thread_id). submit_message, take_steering and
-- _dispatch_held_messages take this lock (take_steering and erase_thread through
-- runlane._thread_lock) before they decide where a message goes, so "at most one
-- unfinished interactive run per thread" and "every message attached or held" hold under
-- concurrent callers. Lock order: a caller that also locks the thread's run row
-- (finish_run, retry_run, reap_stale, take_steering) locks the row FIRST and this lock
-- second; submit_message never waits for a run row lock while it holds this one. A
-- transaction that takes the locks of several threads (finish_runs, reap_stale) takes
-- them in (agent_id, thread_id) order: two such transactions then never wait for each
-- other in a circle.
--
-- The thread's row records the newest interactive run (threads.latest_run_id, 0026):
-- submit_message and _dispatch_held_messages, the only creators of interactive runs,
-- record each run they create (runlane._record_thread_run), so the thread's unfinished
-- run is read by primary key under the lock, at a cost that no queue size and no cached
-- plan changes.
--
-- Guarantees:
-- * The lock is the thread's row in runlane.threads (created on first use, and again
--   after retention deleted it), locked `for no key update` until the caller's
--   transaction ends; a row the caller creates is written once, not locked as well
--   (others wait for its uncommitted key, not for a row lock). Only runlane's functions can
--   lock it: the table is closed to every other role (no advisory key anyone can squat).
-- * It waits at most lock_timeout (5 s, set by every public function that calls it) for
--   another transaction holding the same thread, then raises 55P03 (lock_not_available)
--   with a hint, instead of hanging.
-- * The common case (row exists, nobody holds it) is one index probe without a
--   subtransaction; the exception block is entered only on contention or first use.
-- * Returns:
--     0       the thread has no unfinished interactive run: its row did not exist and
--             was created now (with 0), or its search found none. A thread with an
--             unfinished interactive run always has a row: its creator locked the thread
--             first, retention deletes only the rows of threads with no run at all, and
--             0026 created the rows that were missing. (A run written into runlane.runs
--             directly, not by these functions, needs its thread's row too.)
--     run id  the thread's newest interactive run, which may have finished since: any
--             unfinished interactive run of the thread is this one.
-- * A row whose run was never recorded (older than 0026, or written by a session still
--   running the earlier functions) is searched once, through runs_unfinished_thread_idx,
--   and the unfinished run found (0 for none) recorded, so the next message reads it. On
--   a schema that records nothing (before 0026) every call searches: the result is the
--   same, and the callers read the run by key either way. Never NULL.
-- * On a schema without 0005 (a rolling upgrade's expand stage, `migrate --to 2`, where
--   HEAD functions already run) it takes the advisory lock of old instead, as the older
--   functions did: squattable, and without lock_timeout's message, until 0005 applies.
-- * p_org_id is the agent's organization (runlane._agent_org): from 0027 on every read
--   and write of the row names it, its whole key (on Citus: one node's shard, where a
--   locking read must be).
create or replace function runlane._lock_thread(p_agent_id text, p_thread_id text, p_org_id text)
returns bigint
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_records boolean;
    v_names_org boolean;  -- (0027 comes after 0026: then v_records too)
    v_org text;  -- a new row's organization: its agent's
    v_missing boolean;  -- the thread has no row (to create)
    v_latest bigint;
begin
    if to_regclass('runlane.threads') is null then  -- before 0005: the lock of old
        perform pg_advisory_xact_lock(hashtextextended('runlane.thread:' || p_agent_id || '/' || p_thread_id, 0));
        v_records := false;
    else
        -- (one catalog read for both columns: whether the row records its run, 0026, and
        -- whether it names its organization, 0027)
        select
            coalesce(bool_or(a.attname = 'latest_run_id'), false),
            coalesce(bool_or(a.attname = 'org_id'), false)
        into v_records, v_names_org
        from pg_catalog.pg_attribute as a
        where
            a.attrelid = 'runlane.threads'::regclass
            and a.attname in ('latest_run_id', 'org_id')
            and not a.attisdropped;

        if v_names_org then
            select t.latest_run_id into v_latest
            from runlane.threads as t
            where
                t.agent_id = _lock_thread.p_agent_id
                and t.thread_id = _lock_thread.p_thread_id
                and t.org_id = _lock_thread.p_org_id
            for no key update skip locked;
        elsif v_records then  -- (before 0027: the row names no organization)
            select t.latest_run_id into v_latest
            from runlane.threads as t
            where t.agent_id = _lock_thread.p_agent_id and t.thread_id = _lock_thread.p_thread_id
            for no key update skip locked;
        else  -- (before 0026: nothing recorded)
            perform 1
            from runlane.threads as t
            where t.agent_id = _lock_thread.p_agent_id and t.thread_id = _lock_thread.p_thread_id
            for no key update skip locked;
        end if;

        v_missing := not found;
        if v_missing and v_names_org then
            -- GUARD: the new row names its agent's organization; an agent erased meanwhile
            -- has none: the caller's message finds it gone, as it would a moment later.
            select a.org_id into v_org
            from runlane.agents as a
            where a.agent_id = p_agent_id and a.org_id = p_org_id;
            if v_org is null then
                raise exception 'unknown agent %', runlane._quote_for_error(p_agent_id)
                    using errcode = 'RL008';
            end if;
        end if;

        if v_missing then
            begin
                -- (retention deletes an empty thread's row, runlane.purge_empty_threads: a lock
                -- that waited for that deletion finds no row and creates it again)
                loop
                    if v_names_org then
                        insert into runlane.threads (agent_id, thread_id, latest_run_id, org_id)
                        values (p_agent_id, p_thread_id, 0, v_org)
                        on conflict do nothing;
                    elsif v_records then  -- (before 0027: the row names no organization)
                        insert into runlane.threads (agent_id, thread_id, latest_run_id)
                        values (p_agent_id, p_thread_id, 0)
                        on conflict do nothing;
                    else
                        insert into runlane.threads (agent_id, thread_id)
                        values (p_agent_id, p_thread_id)
                        on conflict do nothing;
                    end if;
                    -- A row this transaction inserted is invisible to every other one until it
                    -- ends (a concurrent insert of the key waits for it): it is locked already,
                    -- without a second write of it as a row lock.
                    if found then
                        if v_records then  -- (before 0026 a thread may have runs and no row)
                            v_latest := 0;
                        end if;
                        exit;
                    end if;

                    if v_names_org then
                        select t.latest_run_id into v_latest
                        from runlane.threads as t
                        where
                            t.agent_id = _lock_thread.p_agent_id
                            and t.thread_id = _lock_thread.p_thread_id
                            and t.org_id = _lock_thread.p_org_id
                        for no key update;
                    elsif v_records then
                        select t.latest_run_id into v_latest
                        from runlane.threads as t
                        where t.agent_id = _lock_thread.p_agent_id and t.thread_id = _lock_thread.p_thread_id
                        for no key update;
                    else
                        perform 1
                        from runlane.threads as t
                        where t.agent_id = _lock_thread.p_agent_id and t.thread_id = _lock_thread.p_thread_id
                        for no key update;
                    end if;
                    exit when found;
                end loop;
            exception when lock_not_available then
                raise exception 'a chat thread stayed locked by another transaction for longer than lock_timeout (%)',
                    current_setting('lock_timeout')
                    using errcode = 'lock_not_available',
                        hint = 'Another call on this thread has not committed (an application transaction left open '
                        'after submit_message?). Nothing was written; retry.';
            end;
        end if;
    end if;

    if v_latest is null then
        -- GUARD: nothing recorded: search (planned for the queue as it is), and record.
        execute '
            select coalesce(max(r.run_id), 0)
            from runlane.runs as r
            where
                r.agent_id = $1
                and r.thread_id = $2
                and r.org_id = $3
                and r.lane = ''interactive''
                and r.state in (''queued'', ''running'')'
        into v_latest
        using p_agent_id, p_thread_id, p_org_id;
        if v_records then
            perform runlane._record_thread_run(p_agent_id, p_thread_id, v_latest, p_org_id);
        end if;
    end if;
    return v_latest;
end;
$$;

comment on function runlane._lock_thread(text, text, text) is
'Locks the chat thread''s row in runlane.threads until the transaction ends (55P03 after 5 s of '
'waiting) and returns its newest interactive run, the only one that may be unfinished (0: none).';

revoke all on function runlane._lock_thread(text, text, text) from public;

-- _lock_thread (without the organization): the same, the organization looked up. Kept for
-- the functions of the generation before, which call it during a rolling upgrade.
create or replace function runlane._lock_thread(p_agent_id text, p_thread_id text)
returns bigint
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    return runlane._lock_thread(p_agent_id, p_thread_id, runlane._agent_org(p_agent_id));
end;
$$;

comment on function runlane._lock_thread(text, text) is
'_lock_thread(agent, thread, organization) with the agent''s organization looked up.';

revoke all on function runlane._lock_thread(text, text) from public;
