-- _agent_gates: the gate checks shared by run_now, create_run (and, as a filter, tick).
--
-- Guarantees: returns the agent row when its gates are open, else raises, writing
-- nothing: RL008 unknown agent (or another organization's, for a login scoped to one),
-- RL002 switched off by its owner, RL003 locked by an admin, RL004 no model, and (only
-- when p_budget_raises) RL005 when the owner's weekly budget is exhausted. Callers that
-- record a budget skip instead check runlane._budget_exhausted themselves, after the
-- overlap check.
create or replace function runlane._agent_gates(p_agent_id text, p_budget_raises boolean)
returns runlane.agents
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
    v_agent runlane.agents;
    v_org text;
begin
    if p_agent_id is null then
        raise exception 'an agent id is required'
            using errcode = '22004';
    end if;
    perform runlane._check_id('agent id', p_agent_id);
    -- another organization's agent is unknown to a login scoped to one (no gate leaks it)
    -- (by the whole key, its organization first: on Citus, one node. A login held to one
    -- organization reads only there, so a foreign id costs what an unknown one does.)
    v_org := coalesce(v_scope, runlane._agent_org(p_agent_id));
    select a.* into v_agent from runlane.agents as a
    where a.agent_id = p_agent_id and a.org_id = v_org and (v_scope is null or a.org_id = v_scope);
    if not found then
        raise exception 'unknown agent %', runlane._quote_for_error(p_agent_id)
            using errcode = 'RL008';
    end if;
    if not v_agent.enabled then
        raise exception 'agent % is switched off by its owner', p_agent_id
            using errcode = 'RL002', hint = 'The owner can switch the agent on again.';
    end if;
    if v_agent.admin_locked then
        raise exception 'agent % is locked by an administrator', p_agent_id
            using errcode = 'RL003', hint = 'Only an administrator can unlock it.';
    end if;
    if coalesce(v_agent.model, '') = '' then
        raise exception 'agent % has no model', p_agent_id
            using errcode = 'RL004', hint = 'Choose a model for the agent first.';
    end if;
    if p_budget_raises and runlane._budget_exhausted(v_agent.owner_id, v_agent.org_id, now()) then
        raise exception 'the weekly agent budget of the owner of agent % is exhausted', p_agent_id
            using errcode = 'RL005',
                  hint = 'The budget renews on Monday 00:00 in the owner''s time zone; '
                      || 'an administrator can raise platform_settings.agent_weekly_budget.';
    end if;
    return v_agent;
end;
$$;

comment on function runlane._agent_gates(text, boolean) is
'The agent row when switched on, unlocked and with a model (and, optionally, within budget); '
'else RL008/RL002/RL003/RL004/RL005.';

revoke all on function runlane._agent_gates(text, boolean) from public;
