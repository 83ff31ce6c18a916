-- _agent_org: the organization an agent id belongs to, found without knowing it.
--
-- A call that names an agent learns its organization here first, so that every later
-- statement names the whole key: on Citus that is what routes a statement to the one node
-- holding the organization (a statement without it fans out to every node, and a locking
-- read without it is refused).
--
-- Guarantees:
-- * Reads runlane.agent_orgs (from 0029: the agent ids' one namespace, a reference table
--   on Citus, so the read is local on every node); an id it does not hold (an agent row
--   written by hand, without its namespace row, or a schema before 0029) is looked up
--   in runlane.agents instead.
-- * NULL for an unknown agent: the caller's own read of the agent then finds nothing and
--   raises its RL008, as before. An agent's organization never changes (put_agent refuses
--   to move one), so the answer needs no lock.
create or replace function runlane._agent_org(p_agent_id text)
returns text
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_org text;
begin
    if to_regclass('runlane.agent_orgs') is not null then
        select o.org_id into v_org from runlane.agent_orgs as o where o.agent_id = p_agent_id;
    end if;
    if v_org is null then
        select a.org_id into v_org from runlane.agents as a where a.agent_id = p_agent_id;
    end if;
    return v_org;
end;
$$;

comment on function runlane._agent_org(text) is
'The organization of an agent id (runlane.agent_orgs, else runlane.agents); NULL when unknown.';

revoke all on function runlane._agent_org(text) from public;
