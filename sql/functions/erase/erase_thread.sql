-- erase_thread: "delete this conversation".
--
-- Guarantees:
-- * Deletes every run of the chat thread (agent_id, thread_id), whatever its lane, with
--   its outputs, journal, computer lease, idempotency keys and messages
--   (runlane._erase_runs), the thread's held messages and its lock row; returns the
--   number of runs deleted. A thread with nothing in it answers 0: erasing twice is safe.
-- * The thread's charges stay as amounts without content (owner, organization, amount,
--   time; no run): the owner's weekly_spend, and so the weekly budget, is unchanged.
--   Retention deletes them with the runs of their age.
-- * While a run of the thread is queued or running: 55006, nothing deleted (cancel it
--   with runlane.cancel_run first).
-- * Takes the thread's lock (runlane._lock_thread), then the agent's
--   (runlane._lock_agent): the check and the deletion see the same thread, since no
--   message, chat run or Run now of the agent can be written in between.
-- * Afterwards thread_history answers as for a thread that never existed, and every
--   function given an erased run or message answers RL008 (unknown).
-- * Every statement names the agent's organization (runlane._agent_org): on Citus the
--   erasure runs on that organization's node.
-- * Errors: RL008 unknown agent (also another organization's for a login scoped to one:
--   the same message); 22004 a null id; 22023 a blank or over-long id; 55P03 after
--   lock_timeout (5 s) of waiting for a lock; 55000 on a schema before 0022.
create or replace function runlane.erase_thread(p_agent_id text, p_thread_id text)
returns int
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
    v_org text;  -- the agent's, named in every statement (on Citus, one node)
    v_runs bigint[];
    v_run_id bigint;
    v_state text;
    v_erased int;
begin
    perform runlane._check_id('agent id', p_agent_id);
    perform runlane._check_id('thread id', p_thread_id);
    -- (held to one organization: only there, so a foreign id costs an unknown one's)
    v_org := coalesce(v_scope, runlane._agent_org(p_agent_id));
    if not exists (
        select 1 from runlane.agents as a
        where a.agent_id = erase_thread.p_agent_id
          and a.org_id = v_org
          and (v_scope is null or a.org_id = v_scope)
    ) then
        raise exception 'unknown agent %', runlane._quote_for_error(p_agent_id)
            using errcode = 'RL008';
    end if;
    perform runlane._require_erasure_schema();

    perform runlane._lock_thread(p_agent_id, p_thread_id, v_org);
    perform runlane._lock_agent(p_agent_id, v_org);

    select r.run_id, r.state into v_run_id, v_state
    from runlane.runs as r
    where r.agent_id = erase_thread.p_agent_id
      and r.thread_id = erase_thread.p_thread_id
      and r.org_id = v_org
      and r.state in ('queued', 'running')
    order by r.run_id
    limit 1;
    if found then
        raise exception 'thread % of agent % has an unfinished run (run %, %)',
            runlane._quote_for_error(p_thread_id), runlane._quote_for_error(p_agent_id), v_run_id, v_state
            using errcode = '55006',
                  hint = 'Cancel it with runlane.cancel_run and erase again once it has finished; '
                      || 'nothing was erased.';
    end if;

    select coalesce(array_agg(r.run_id order by r.run_id), '{}') into v_runs
    from (
        select r.run_id
        from runlane.runs as r
        where r.agent_id = erase_thread.p_agent_id
          and r.thread_id = erase_thread.p_thread_id
          and r.org_id = v_org
          and r.state not in ('queued', 'running')  -- all of them now: runs_thread_history_idx
        order by r.run_id
        for update
    ) as r;
    v_erased := runlane._erase_runs(v_runs, v_org);

    -- (a message attached to a run went with it: what is left is held, messages_waiting_idx)
    delete from runlane.messages as m
    where m.agent_id = erase_thread.p_agent_id
      and m.thread_id = erase_thread.p_thread_id
      and m.org_id = v_org
      and m.run_id is null;

    if runlane._rows_name_their_org() then
        delete from runlane.threads as t
        where t.agent_id = erase_thread.p_agent_id
          and t.thread_id = erase_thread.p_thread_id
          and t.org_id = v_org;
    else  -- (before 0027: thread rows name no organization)
        delete from runlane.threads as t
        where t.agent_id = erase_thread.p_agent_id
          and t.thread_id = erase_thread.p_thread_id;
    end if;

    return v_erased;
end;
$$;

comment on function runlane.erase_thread(text, text) is
'Erases a chat thread: its runs with their outputs, journal, keys and messages, and its lock row; '
'charges stay as amounts. Returns the runs erased. 55006 while a run of it is unfinished, RL008 unknown agent.';

revoke all on function runlane.erase_thread(text, text) from public;
grant execute on function runlane.erase_thread(text, text) to runlane_api;
