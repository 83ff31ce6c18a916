-- _thread_lock: runlane._lock_thread for a caller that needs the chat thread's lock and
-- not its newest run (take_steering, erase_thread).
--
-- Guarantees: exactly those of runlane._lock_thread (the same row, lock mode, lock order,
-- 55P03 after lock_timeout, advisory lock before 0005); the result is dropped.
create or replace function runlane._thread_lock(p_agent_id text, p_thread_id text)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    perform runlane._lock_thread(p_agent_id, p_thread_id);
end;
$$;

comment on function runlane._thread_lock(text, text) is
'Locks the chat thread''s row in runlane.threads until the transaction ends; 55P03 after 5 s of waiting.';

revoke all on function runlane._thread_lock(text, text) from public;
