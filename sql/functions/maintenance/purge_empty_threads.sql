-- purge_empty_threads: retention of runlane.threads, the lock rows of chat threads.
--
-- A thread's row is created by its first message (runlane._thread_lock) and holds
-- nothing but the lock; once retention (purge_finished) or an erasure deleted the
-- thread's runs and messages, the row is all that is left of it. This deletes such rows.
--
-- Guarantees:
-- * Looks at the next p_limit (1 .. 10000) thread rows after (p_after_agent_id,
--   p_after_thread_id) in key order (from the first row when p_after_agent_id is null):
--   the work of a call is bounded however many threads exist, and a caller sweeps them
--   all by passing back the key it returns.
-- * Deletes those of them with nothing left: no run of the thread (any state, any lane)
--   and no held message (a message attached to a run is in its run's thread). One probe
--   per index that holds a thread's runs (finished: runs_thread_history_idx; unfinished
--   chat: runs_unfinished_thread_idx; the agent's one unfinished background run: its
--   unique index) and one for held messages (messages_waiting_idx), written out in both
--   statements: a helper with a pinned search_path is never inlined, and its calls cost
--   more than the probes.
-- * Their rows are locked `for update skip locked` (a row another transaction holds, a
--   thread in use, is skipped) and checked again after the lock (a later statement: it
--   sees whatever the last holder committed), so a thread that got a message meanwhile
--   keeps its row.
-- * Deleting a lock row is harmless even when a run or message arrives right after:
--   _thread_lock creates the row again, and a caller that was waiting for the deleted
--   row creates it too (its loop), so the lock still serializes the thread.
-- * Returns the rows deleted and the key of the last row looked at; a null key means the
--   sweep reached the end (start again from null).
-- * 22004 for a null p_limit, 22023 for one out of range.
create or replace function runlane.purge_empty_threads(
    p_after_agent_id text,
    p_after_thread_id text,
    p_limit int default 1000
)
returns table (purged int, last_agent_id text, last_thread_id text)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_agents text[];
    v_threads text[];
    v_looked int;
    v_last_agent text;  -- the last key of the window
    v_last_thread text;
    v_thread record;
    v_deleted int;
begin
    if p_limit is null then
        raise exception 'a limit is required'
            using errcode = '22004';
    end if;
    if p_limit < 1 or p_limit > 10000 then
        raise exception 'limit % is out of range', p_limit
            using errcode = '22023',
                  hint = 'Look at between 1 and 10000 threads per call.';
    end if;

    -- GUARD: the window of this call, in key order (threads_pkey).
    select
        count(*)::int,
        (array_agg(w.agent_id order by w.agent_id desc, w.thread_id desc))[1],
        (array_agg(w.thread_id order by w.agent_id desc, w.thread_id desc))[1]
    into v_looked, v_last_agent, v_last_thread
    from (
        select t.agent_id, t.thread_id
        from runlane.threads as t
        -- (from the start: no id is blank, so every key is above ('', ''))
        where (t.agent_id, t.thread_id)
              > (coalesce(p_after_agent_id, ''), coalesce(p_after_thread_id, ''))
        order by t.agent_id, t.thread_id
        limit purge_empty_threads.p_limit
    ) as w;
    -- A short window is the end of the table: the next sweep starts over.
    last_agent_id := case when v_looked = p_limit then v_last_agent end;
    last_thread_id := case when v_looked = p_limit then v_last_thread end;
    if v_looked = 0 then
        purged := 0;
        return next;
        return;
    end if;

    -- On a schema Citus distributes, thread by thread, each read naming the thread's
    -- organization (one node): Citus locks no statement's rows read beside other nodes'.
    -- The same rule: locked unless in use, deleted when still empty under the lock.
    if runlane._citus_distributed('runlane.threads') then
        purged := 0;
        for v_thread in
            select t.agent_id, t.thread_id, t.org_id
            from runlane.threads as t
            where (t.agent_id, t.thread_id)
                  > (coalesce(p_after_agent_id, ''), coalesce(p_after_thread_id, ''))
              and (t.agent_id, t.thread_id) <= (v_last_agent, v_last_thread)
            order by t.agent_id, t.thread_id
        loop
            perform 1
            from runlane.threads as t
            where t.agent_id = v_thread.agent_id
              and t.thread_id = v_thread.thread_id
              and t.org_id = v_thread.org_id
            for update of t skip locked;
            continue when not found;
            delete from runlane.threads as t
            where t.agent_id = v_thread.agent_id
              and t.thread_id = v_thread.thread_id
              and t.org_id = v_thread.org_id
              and not exists (
                  select 1 from runlane.runs as r
                  where r.agent_id = t.agent_id
                    and r.thread_id = t.thread_id
                    and r.org_id = t.org_id
              )
              and not exists (
                  select 1 from runlane.messages as m
                  where m.agent_id = t.agent_id
                    and m.thread_id = t.thread_id
                    and m.org_id = t.org_id
                    and m.run_id is null
              );
            get diagnostics v_deleted = row_count;
            purged := purged + v_deleted;
        end loop;
        return next;
        return;
    end if;

    -- The empty ones of the window, locked unless in use.
    select coalesce(array_agg(e.agent_id), '{}'), coalesce(array_agg(e.thread_id), '{}')
    into v_agents, v_threads
    from (
        select t.agent_id, t.thread_id
        from runlane.threads as t
        where (t.agent_id, t.thread_id)
              > (coalesce(p_after_agent_id, ''), coalesce(p_after_thread_id, ''))
          and (t.agent_id, t.thread_id) <= (v_last_agent, v_last_thread)
          and not exists (
              select 1 from runlane.runs as r
              where r.agent_id = t.agent_id
                and r.thread_id = t.thread_id
                and r.state not in ('queued', 'running')
          )
          and not exists (
              select 1 from runlane.runs as r
              where r.agent_id = t.agent_id
                and r.thread_id = t.thread_id
                and r.lane = 'interactive'
                and r.state in ('queued', 'running')
          )
          and not exists (
              select 1 from runlane.runs as r
              where r.agent_id = t.agent_id
                and r.lane = 'background'
                and r.state in ('queued', 'running')
                and r.thread_id = t.thread_id
          )
          and not exists (
              select 1 from runlane.messages as m
              where m.agent_id = t.agent_id
                and m.thread_id = t.thread_id
                and m.run_id is null
          )
        order by t.agent_id, t.thread_id
        limit purge_empty_threads.p_limit
        for update of t skip locked
    ) as e;

    -- Checked again under the lock (this statement's snapshot sees every commit of a
    -- transaction that held the row before us).
    with gone as (
        delete from runlane.threads as t
        using unnest(v_agents, v_threads) as x (agent_id, thread_id)
        where t.agent_id = x.agent_id
          and t.thread_id = x.thread_id
          and not exists (
              select 1 from runlane.runs as r
              where r.agent_id = t.agent_id
                and r.thread_id = t.thread_id
                and r.state not in ('queued', 'running')
          )
          and not exists (
              select 1 from runlane.runs as r
              where r.agent_id = t.agent_id
                and r.thread_id = t.thread_id
                and r.lane = 'interactive'
                and r.state in ('queued', 'running')
          )
          and not exists (
              select 1 from runlane.runs as r
              where r.agent_id = t.agent_id
                and r.lane = 'background'
                and r.state in ('queued', 'running')
                and r.thread_id = t.thread_id
          )
          and not exists (
              select 1 from runlane.messages as m
              where m.agent_id = t.agent_id
                and m.thread_id = t.thread_id
                and m.run_id is null
          )
        returning 1
    )

    select count(*)::int into purged from gone;
    return next;
end;
$$;

comment on function runlane.purge_empty_threads(text, text, int) is
'Retention: deletes the lock rows (runlane.threads) of threads with no run and no held message '
'among the next p_limit threads after the given key; returns the count and the last key '
'looked at (null: the end).';

revoke all on function runlane.purge_empty_threads(text, text, int) from public;
grant execute on function runlane.purge_empty_threads(text, text, int) to runlane_worker;
