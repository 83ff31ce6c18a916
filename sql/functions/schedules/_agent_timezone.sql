-- _agent_timezone: the zone an agent's calendar schedule resolves in: its owner's
-- users.timezone, else its organization's platform_settings.timezone, else UTC.
create or replace function runlane._agent_timezone(p_owner_id text, p_org_id text)
returns text
language sql
stable
set search_path = pg_catalog, pg_temp
as $$
    select coalesce(
        (select u.timezone from runlane.users as u where u.user_id = p_owner_id),
        (select s.timezone from runlane.platform_settings as s where s.org_id = p_org_id),
        'UTC'
    );
$$;

comment on function runlane._agent_timezone(text, text) is
'Schedule zone of an agent: owner''s timezone, else the organization''s, else UTC.';

revoke all on function runlane._agent_timezone(text, text) from public;
