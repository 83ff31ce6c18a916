-- _agent_timezone: the zone an agent's calendar schedule resolves in: its owner's
-- users.timezone, else its organization's platform_settings.timezone, else UTC.
create or replace function runlane._agent_timezone(p_owner_id text, p_org_id text)
returns text
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
begin
    -- (PL/pgSQL: a SQL function with a pinned search_path is planned again in every
    -- transaction, and Citus plans none that reads a distributed table. The owner is a
    -- user of the agent's organization: each read names it, one node on Citus.)
    return coalesce(
        (select u.timezone from runlane.users as u where u.user_id = p_owner_id and u.org_id = p_org_id),
        (select s.timezone from runlane.platform_settings as s where s.org_id = p_org_id),
        'UTC'
    );
end;
$$;

comment on function runlane._agent_timezone(text, text) is
'Schedule zone of an agent: owner''s timezone, else the organization''s, else UTC.';

revoke all on function runlane._agent_timezone(text, text) from public;
