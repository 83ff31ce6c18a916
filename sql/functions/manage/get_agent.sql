-- get_agent: an agent as the application wrote it, read back.
--
-- Guarantees:
-- * One JSON object: every key put_agent accepts (runlane._agent_patch_types), each with
--   its stored value (schedule in its canonical text, prompt included: the application
--   wrote it), plus next_run_at (the next scheduled run, null when none). A patch made of
--   this object minus next_run_at, given back to put_agent, changes nothing.
-- * RL008 for an unknown agent and, for a login scoped to one organization
--   (runlane._api_org), for another organization's agent: the same message and the same
--   work, nothing leaks by existence. 22004 for a null id. Never writes or locks.
create or replace function runlane.get_agent(p_agent_id text)
returns jsonb
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
    v_agent jsonb;
begin
    if p_agent_id is null then
        raise exception 'agent id is required'
            using errcode = '22004';
    end if;

    select to_jsonb(a) into v_agent
    from runlane.agents as a
    where a.agent_id = get_agent.p_agent_id
      and (v_scope is null or a.org_id = v_scope);
    if not found then
        raise exception 'unknown agent %', runlane._quote_for_error(p_agent_id)
            using errcode = 'RL008';
    end if;

    return (
        select jsonb_object_agg(c.key, c.value)
        from jsonb_each(v_agent) as c
        where runlane._agent_patch_types() ? c.key or c.key = 'next_run_at'
    );
end;
$$;

comment on function runlane.get_agent(text) is
'An agent: every key put_agent accepts, with its value (prompt included), plus next_run_at. '
'RL008 unknown agent.';

revoke all on function runlane.get_agent(text) from public;
grant execute on function runlane.get_agent(text) to runlane_api;
