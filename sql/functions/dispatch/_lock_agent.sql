-- _lock_agent: serializes everything that decides "does this agent already have an
-- unfinished background run?" (run_now, create_run, tick) for one agent, until the end
-- of the caller's transaction. Returns true when such a run exists, read after the lock
-- so a run committed by the previous holder is seen. (Since 0003 a partial unique index
-- also enforces one unfinished background run per agent.)
create or replace function runlane._lock_agent(p_agent_id text)
returns boolean
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    perform pg_advisory_xact_lock(hashtextextended('runlane.agent:' || p_agent_id, 0));
    return exists (
        select 1 from runlane.runs as r
        where r.agent_id = p_agent_id
          and r.lane = 'background'
          and r.state in ('queued', 'running')
    );
end;
$$;

comment on function runlane._lock_agent(text) is
'Takes the agent''s transaction advisory lock; true when it has an unfinished background run.';

revoke all on function runlane._lock_agent(text) from public;
