-- _thread_lock: serializes the dispatch decisions of one chat thread.
--
-- A thread is keyed by (agent_id, thread_id). submit_message, take_steering and
-- _dispatch_held_messages take this lock (the first and last through runlane._lock_thread,
-- which also returns the thread's newest chat run) before they decide where a message goes, so "at
-- most one unfinished interactive run per thread" and "every message attached or held"
-- hold under concurrent callers. Lock order: a caller that also locks the thread's run
-- row (finish_run, retry_run, reap_stale, take_steering) locks the row FIRST and this
-- lock second; submit_message never waits for a run row lock while it holds this one. A
-- transaction that takes the locks of several threads (finish_runs, reap_stale) takes
-- them in (agent_id, thread_id) order: two such transactions then never wait for each
-- other in a circle.
--
-- Guarantees:
-- * The lock is the thread's row in runlane.threads (created on first use, and again
--   after retention deleted it), locked `for no key update` until the caller's
--   transaction ends; a row the caller creates is written once, not locked as well
--   (others wait for its uncommitted key, not for a row lock). Only runlane's functions can
--   lock it: the table is closed to every other role (no advisory key anyone can squat).
-- * A row created here records 0 as the thread's newest chat run (0026 on): a thread with
--   an unfinished interactive run always has its row already (runlane._lock_thread).
-- * It waits at most lock_timeout (5 s, set by every public function that calls it) for
--   another transaction holding the same thread,
--   then raises 55P03 (lock_not_available) with a hint, instead of hanging.
-- * The common case (row exists, nobody holds it) is one index probe without a
--   subtransaction; the exception block is entered only on contention or first use.
-- * On a schema without 0005 (a rolling upgrade's expand stage, `migrate --to 2`, where
--   HEAD functions already run) it takes the advisory lock of old instead, as the older
--   functions did: squattable, and without lock_timeout's message, until 0005 applies.
create or replace function runlane._thread_lock(p_agent_id text, p_thread_id text)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_records boolean;
begin
    if to_regclass('runlane.threads') is null then  -- before 0005: the lock of old
        perform pg_advisory_xact_lock(hashtextextended('runlane.thread:' || p_agent_id || '/' || p_thread_id, 0));
        return;
    end if;

    perform 1
    from runlane.threads as t
    where t.agent_id = _thread_lock.p_agent_id and t.thread_id = _thread_lock.p_thread_id
    for no key update skip locked;
    if found then
        return;
    end if;

    -- (a row created here records that the thread has no unfinished chat run)
    v_records := exists (
        select
        from pg_catalog.pg_attribute as a
        where
            a.attrelid = 'runlane.threads'::regclass
            and a.attname = 'latest_run_id'
            and not a.attisdropped
    );

    begin
        -- (retention deletes an empty thread's row, runlane.purge_empty_threads: a lock
        -- that waited for that deletion finds no row and creates it again)
        loop
            if v_records then
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
            exit when found;

            perform 1
            from runlane.threads as t
            where t.agent_id = _thread_lock.p_agent_id and t.thread_id = _thread_lock.p_thread_id
            for no key update;
            exit when found;
        end loop;
    exception when lock_not_available then
        raise exception 'a chat thread stayed locked by another transaction for longer than lock_timeout (%)',
            current_setting('lock_timeout')
            using errcode = 'lock_not_available',
                hint = 'Another call on this thread has not committed (an application transaction left open '
                'after submit_message?). Nothing was written; retry.';
    end;
end;
$$;

comment on function runlane._thread_lock(text, text) is
'Locks the chat thread''s row in runlane.threads until the transaction ends; 55P03 after 5 s of waiting.';

revoke all on function runlane._thread_lock(text, text) from public;
