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
-- * From 0027 on the row is found by its whole key, p_org_id (the agent's organization)
--   included: on Citus the update goes to the one node that holds it.
-- * On a schema before 0026 (no column to record in) it does nothing: _lock_thread
--   searches runs there.
create or replace function runlane._record_thread_run(
    p_agent_id text, p_thread_id text, p_run_id bigint, p_org_id text
)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    -- (0027's org_id implies 0026's latest_run_id: one catalog probe on a current schema)
    if exists (
        select 1
        from pg_catalog.pg_attribute as a
        where a.attrelid = 'runlane.threads'::regclass and a.attname = 'org_id' and not a.attisdropped
    ) then
        update runlane.threads as t
        set latest_run_id = p_run_id
        where
            t.agent_id = _record_thread_run.p_agent_id
            and t.thread_id = _record_thread_run.p_thread_id
            and t.org_id = _record_thread_run.p_org_id;
    elsif exists (
        select 1
        from pg_catalog.pg_attribute as a
        where a.attrelid = 'runlane.threads'::regclass and a.attname = 'latest_run_id' and not a.attisdropped
    ) then
        update runlane.threads as t
        set latest_run_id = p_run_id
        where t.agent_id = _record_thread_run.p_agent_id and t.thread_id = _record_thread_run.p_thread_id;
    end if;
end;
$$;

comment on function runlane._record_thread_run(text, text, bigint, text) is
'Records p_run_id as the chat thread''s newest interactive run (threads.latest_run_id); '
'nothing before migration 0026.';

revoke all on function runlane._record_thread_run(text, text, bigint, text) from public;

-- _record_thread_run (without the organization): the same, the organization looked up.
-- Kept for the functions of the generation before, which call it during a rolling upgrade.
create or replace function runlane._record_thread_run(p_agent_id text, p_thread_id text, p_run_id bigint)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    perform runlane._record_thread_run(p_agent_id, p_thread_id, p_run_id, runlane._agent_org(p_agent_id));
end;
$$;

comment on function runlane._record_thread_run(text, text, bigint) is
'_record_thread_run(agent, thread, run, organization) with the agent''s organization looked up.';

revoke all on function runlane._record_thread_run(text, text, bigint) from public;
