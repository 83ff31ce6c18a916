-- _lock_agent: serializes everything that decides "does this agent already have an
-- unfinished background run?" (run_now, create_run, tick) for one agent, until the end
-- of the caller's transaction. Returns true when such a run exists, read after the lock
-- so a run committed by the previous holder is seen. (Since 0003 a partial unique index
-- also enforces one unfinished background run per agent.)
--
-- Guarantees:
-- * The lock is the agent's own row in runlane.agents, `for no key update` (inserting a
--   run, whose foreign key takes a key-share lock, is not blocked by it). Only runlane's
--   functions can lock it: no advisory key anyone can squat. An unknown agent has no row:
--   nothing is locked and false is returned (callers have already refused it).
-- * It waits at most lock_timeout (5 s, set by every public function that calls it) for
--   another transaction holding the agent, then
--   raises 55P03 (lock_not_available) with a hint, instead of hanging.
-- * Reads and locks by the whole key, p_org_id the agent's organization: on Citus, one
--   node.
create or replace function runlane._lock_agent(p_agent_id text, p_org_id text)
returns boolean
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    perform 1 from runlane.agents as a
    where a.agent_id = _lock_agent.p_agent_id and a.org_id = _lock_agent.p_org_id
    for no key update skip locked;
    if not found then
        begin
            perform 1 from runlane.agents as a
            where a.agent_id = _lock_agent.p_agent_id and a.org_id = _lock_agent.p_org_id
            for no key update;
        exception when lock_not_available then
            raise exception 'an agent stayed locked by another transaction for longer than lock_timeout (%)',
                current_setting('lock_timeout')
                using errcode = 'lock_not_available',
                    hint = 'Another run_now, create_run, tick or settings change of this agent has not '
                    'committed. Nothing was written; retry.';
        end;
    end if;
    return exists (
        select 1 from runlane.runs as r
        where r.agent_id = _lock_agent.p_agent_id
          and r.org_id = _lock_agent.p_org_id
          and r.lane = 'background'
          and r.state in ('queued', 'running')
    );
end;
$$;

comment on function runlane._lock_agent(text, text) is
'Locks the agent''s row until the transaction ends (55P03 after 5 s of waiting); '
'true when it has an unfinished background run.';

revoke all on function runlane._lock_agent(text, text) from public;

-- _lock_agent (without the organization): the same, the organization looked up. Kept
-- for the functions of the generation before, which call it during a rolling upgrade.
create or replace function runlane._lock_agent(p_agent_id text)
returns boolean
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    return runlane._lock_agent(p_agent_id, runlane._agent_org(p_agent_id));
end;
$$;

comment on function runlane._lock_agent(text) is
'_lock_agent(agent, organization) with the agent''s organization looked up.';

revoke all on function runlane._lock_agent(text) from public;
