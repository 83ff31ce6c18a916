-- _lock_thread: runlane._thread_lock, and the thread's newest interactive run with it.
--
-- submit_message and _dispatch_held_messages decide where a message goes from the
-- thread's unfinished interactive run, of which there is at most one (the thread lock
-- serializes them, and only they create interactive runs). Each records the run it
-- creates in the thread's row (threads.latest_run_id), so the run is found by primary key
-- (runs_pkey) under the lock, at a cost that no queue size and no cached plan changes.
--
-- Guarantees:
-- * Locks the thread exactly as runlane._thread_lock does (same row, same lock mode,
--   same order rules, 55P03 after lock_timeout) and returns:
--     0       the thread has no unfinished interactive run: its row did not exist and
--             was created now, or its search found none. (A thread with an unfinished
--             interactive run always has a row: the functions that create such runs lock
--             the thread first, retention deletes only the rows of threads with no run
--             at all, and 0026 created the rows that were missing. A run written into
--             runlane.runs directly, not by these functions, needs its thread's row too.)
--     run id  the thread's newest interactive run, which may have finished since: any
--             unfinished interactive run of the thread is this one.
--     NULL    the schema records no run (before 0026): search runs, as before.
-- * A row whose run was never recorded (older than 0026, or written by a session still
--   running the earlier functions) is searched once, through runs_unfinished_thread_idx,
--   and the unfinished run found (0 for none) recorded, so the next message reads it.
-- * The common case (the row exists, nobody holds it) is one index probe; a new thread,
--   or one another transaction holds, goes through _thread_lock (which creates a row
--   with the 0, and raises its 55P03 with a hint after lock_timeout).
-- * The callers read the recorded run by run_id alone, with sequential scans disabled
--   (submit_message): a plan cached while runs is small would otherwise scan the table.
create or replace function runlane._lock_thread(p_agent_id text, p_thread_id text)
returns bigint
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_latest bigint;
begin
    if not exists (
        select
        from pg_catalog.pg_attribute as a
        where
            a.attrelid = to_regclass('runlane.threads')
            and a.attname = 'latest_run_id'
            and not a.attisdropped
    ) then  -- before 0026: nothing recorded
        perform runlane._thread_lock(p_agent_id, p_thread_id);
        return null;
    end if;

    select t.latest_run_id into v_latest
    from runlane.threads as t
    where t.agent_id = _lock_thread.p_agent_id and t.thread_id = _lock_thread.p_thread_id
    for no key update skip locked;

    if not found then
        -- A new thread (its row is created with 0) or one another transaction holds.
        perform runlane._thread_lock(p_agent_id, p_thread_id);
        select t.latest_run_id into v_latest
        from runlane.threads as t
        where t.agent_id = _lock_thread.p_agent_id and t.thread_id = _lock_thread.p_thread_id;
    end if;

    if v_latest is null then
        -- GUARD: nothing recorded yet: search once (planned for the queue as it is), record.
        execute '
            select coalesce(max(r.run_id), 0)
            from runlane.runs as r
            where
                r.agent_id = $1
                and r.thread_id = $2
                and r.lane = ''interactive''
                and r.state in (''queued'', ''running'')'
        into v_latest
        using p_agent_id, p_thread_id;

        update runlane.threads as t
        set latest_run_id = v_latest
        where t.agent_id = _lock_thread.p_agent_id and t.thread_id = _lock_thread.p_thread_id;
    end if;

    return v_latest;
end;
$$;

comment on function runlane._lock_thread(text, text) is
'Locks the chat thread like _thread_lock and returns its newest interactive run (0: none; NULL: '
'not recorded on this schema).';

revoke all on function runlane._lock_thread(text, text) from public;
