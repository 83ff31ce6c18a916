-- erase_agent: "delete this agent and everything it holds".
--
-- Guarantees:
-- * Deletes the agent (its prompt and settings), every run of it with its outputs,
--   journal, computer lease, idempotency keys and messages (runlane._erase_runs), its
--   held messages, its keys and its chat-thread rows; returns the number of runs deleted.
-- * Its charges stay as amounts without content (owner, organization, amount, time; no
--   run, no agent): the owner's weekly_spend, and so the weekly budget, is unchanged.
--   Retention deletes them with the runs of their age.
-- * While a run of the agent is queued or running: 55006, nothing deleted (cancel it with
--   runlane.cancel_run first).
-- * Locks the agent's thread rows, then its row (runlane._lock_for_erasure): the check
--   and the deletion see the same agent, and a message or run written meanwhile waits
--   and then fails, writing nothing.
-- * Afterwards every function answers for the agent, and for its runs and messages, as
--   for ids that never existed (RL008); the id may be used for a new agent.
-- * Every statement names the agent's organization (runlane._agent_org): on Citus the
--   erasure runs on that organization's node.
-- * Errors: RL008 unknown agent (also another organization's for a login scoped to one:
--   the same message); 22004 a null id; 22023 a blank or over-long id; 55P03 after
--   lock_timeout (5 s) of waiting for a lock; 55000 on a schema before 0022.
create or replace function runlane.erase_agent(p_agent_id text)
returns int
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
    v_org text;  -- the agent's, named in every statement (on Citus, one node)
begin
    perform runlane._check_id('agent id', p_agent_id);
    -- (held to one organization: only there, so a foreign id costs an unknown one's)
    v_org := coalesce(v_scope, runlane._agent_org(p_agent_id));
    if not exists (
        select 1 from runlane.agents as a
        where a.agent_id = erase_agent.p_agent_id
          and a.org_id = v_org
          and (v_scope is null or a.org_id = v_scope)
    ) then
        raise exception 'unknown agent %', runlane._quote_for_error(p_agent_id)
            using errcode = 'RL008';
    end if;
    perform runlane._require_erasure_schema();

    perform runlane._lock_for_erasure(array[p_agent_id], v_org);
    -- GUARD: erased by a concurrent call while this one waited.
    if not exists (
        select 1 from runlane.agents as a
        where a.agent_id = erase_agent.p_agent_id and a.org_id = v_org
    ) then
        raise exception 'unknown agent %', runlane._quote_for_error(p_agent_id)
            using errcode = 'RL008';
    end if;
    return runlane._erase_agents(
        format('agent %s', runlane._quote_for_error(p_agent_id)), array[p_agent_id], v_org
    );
end;
$$;

comment on function runlane.erase_agent(text) is
'Erases an agent with its runs, outputs, journal, messages, keys and threads; charges stay as '
'amounts. Returns the runs erased. 55006 while a run of it is unfinished, RL008 unknown agent.';

revoke all on function runlane.erase_agent(text) from public;
grant execute on function runlane.erase_agent(text) to runlane_api;
