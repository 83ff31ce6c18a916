-- _thread_lock: serializes the dispatch decisions of one chat thread.
--
-- A thread is keyed by (agent_id, thread_id). submit_message, take_steering and
-- _dispatch_held_messages take this transaction-scoped advisory lock before they decide
-- where a message goes, so "at most one unfinished interactive run per thread" and
-- "every message attached or held" hold under concurrent callers. Lock order: a caller
-- that also locks the thread's run row (finish_run, retry_run, reap_stale, take_steering)
-- locks the row FIRST and this lock second; submit_message never waits for a run row
-- lock while it holds this one. A transaction that takes the locks of several threads
-- (finish_runs, reap_stale) takes them in (agent_id, thread_id) order: two such
-- transactions then never wait for each other in a circle.
create or replace function runlane._thread_lock(p_agent_id text, p_thread_id text)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    -- PL/pgSQL, not SQL: a SQL function with a pinned search_path is never inlined and
    -- is planned again on every call (about 9 µs against 4 µs; twice per chat run).
    perform pg_advisory_xact_lock(
        hashtextextended('runlane.thread:' || p_agent_id || '/' || p_thread_id, 0));
end;
$$;

comment on function runlane._thread_lock(text, text) is
'Transaction-scoped advisory lock of one chat thread (agent_id, thread_id).';

revoke all on function runlane._thread_lock(text, text) from public;
