-- _thread_is_empty: true when the chat thread (p_agent_id, p_thread_id) has no run in any
-- state or lane and no held message: nothing is left of it but its lock row.
--
-- One probe per index that holds a thread's runs (finished: runs_thread_history_idx;
-- unfinished chat: runs_unfinished_thread_idx; the agent's unfinished background run:
-- runs_unfinished_agent_idx) and one for held messages (messages_waiting_idx). A message
-- attached to a run is in its run's thread, so the runs cover it.
create or replace function runlane._thread_is_empty(p_agent_id text, p_thread_id text)
returns boolean
language sql
stable
set search_path = pg_catalog, pg_temp
as $$
    select
        not exists (
            select 1 from runlane.runs as r
            where r.agent_id = p_agent_id
              and r.thread_id = p_thread_id
              and r.state not in ('queued', 'running')
        )
        and not exists (
            select 1 from runlane.runs as r
            where r.agent_id = p_agent_id
              and r.thread_id = p_thread_id
              and r.lane = 'interactive'
              and r.state in ('queued', 'running')
        )
        and not exists (
            select 1 from runlane.runs as r
            where r.agent_id = p_agent_id
              and r.lane = 'background'
              and r.state in ('queued', 'running')
              and r.thread_id = p_thread_id
        )
        and not exists (
            select 1 from runlane.messages as m
            where m.agent_id = p_agent_id
              and m.thread_id = p_thread_id
              and m.run_id is null
        );
$$;

comment on function runlane._thread_is_empty(text, text) is
'True when the chat thread has no run (any state or lane) and no held message.';

revoke all on function runlane._thread_is_empty(text, text) from public;
