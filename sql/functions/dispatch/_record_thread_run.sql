-- _record_thread_run: records a new interactive run as its chat thread's newest
-- (threads.latest_run_id), where runlane._lock_thread reads it.
--
-- Called by the only creators of interactive runs, submit_message and
-- _dispatch_held_messages, in the transaction that creates the run, under the thread's
-- lock (so the row exists and no other transaction changes it meanwhile).
--
-- Guarantees:
-- * After it, the thread's row names p_run_id: the next decision on the thread reads that
--   run by primary key.
-- * On a schema before 0026 (no column to record in) it does nothing: _lock_thread
--   searches runs there.
create or replace function runlane._record_thread_run(p_agent_id text, p_thread_id text, p_run_id bigint)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    if exists (
        select
        from pg_catalog.pg_attribute as a
        where
            a.attrelid = 'runlane.threads'::regclass
            and a.attname = 'latest_run_id'
            and not a.attisdropped
    ) then
        update runlane.threads as t
        set latest_run_id = p_run_id
        where t.agent_id = _record_thread_run.p_agent_id and t.thread_id = _record_thread_run.p_thread_id;
    end if;
end;
$$;

comment on function runlane._record_thread_run(text, text, bigint) is
'Records p_run_id as the chat thread''s newest interactive run (threads.latest_run_id); '
'nothing before migration 0026.';

revoke all on function runlane._record_thread_run(text, text, bigint) from public;
