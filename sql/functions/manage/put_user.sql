-- put_user: create or update a user of an organization.
--
-- Guarantees:
-- * Key timezone: a zone name (RL007 when unknown) or JSON null = the organization's
--   zone. An absent key keeps its value. Returns the row as stored; the users_timezone
--   trigger moves the next_run_at of the user's calendar agents to the new zone.
-- * RL008 for an unknown organization, for one outside a scoped login's organization
--   (runlane._in_scope, same message), and for a user id that exists in another
--   organization (a user never moves between organizations: their agents, runs and
--   budget belong to it). 22023 for an unknown key or a value of the wrong type, naming
--   the key and the accepted ones; 22004/22023 for a null or blank id.
create or replace function runlane.put_user(p_user_id text, p_org_id text, p_patch jsonb default '{}')
returns runlane.users
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_row runlane.users;
begin
    perform runlane._check_id('user id', p_user_id);
    perform runlane._check_id('organization id', p_org_id);
    perform runlane._check_patch('user', p_patch, jsonb_build_object(
        'timezone', jsonb_build_array('string', 'null')
    ));
    if not runlane._in_scope(p_org_id)
       or not exists (select 1 from runlane.platform_settings as s where s.org_id = p_org_id) then
        raise exception 'unknown organization %', runlane._quote_for_error(p_org_id)
            using errcode = 'RL008',
                  hint = 'Create it with runlane.put_org first; a login limited to one organization '
                      || 'manages only that organization.';
    end if;

    insert into runlane.users (user_id, org_id, timezone)
    values (p_user_id, p_org_id, p_patch ->> 'timezone')
    on conflict (user_id) do nothing
    returning * into v_row;
    if found then
        return v_row;
    end if;

    -- (FOR NO KEY UPDATE: user_id never changes; the agents' foreign-key checks need it)
    select * into strict v_row from runlane.users as u
    where u.user_id = p_user_id for no key update;
    if v_row.org_id <> p_org_id then
        raise exception 'unknown user % in organization %',
            runlane._quote_for_error(p_user_id), runlane._quote_for_error(p_org_id)
            using errcode = 'RL008',
                  hint = 'User ids are unique across organizations and a user never moves to another one.';
    end if;
    if p_patch ? 'timezone' then
        update runlane.users as u
        set timezone = p_patch ->> 'timezone'
        where u.user_id = p_user_id
        returning * into strict v_row;
    end if;
    return v_row;
end;
$$;

comment on function runlane.put_user(text, text, jsonb) is
'Create or patch a user of an organization (timezone, null = the organization''s); '
'22023 unknown key or wrong type, RL007 bad zone, RL008 unknown or foreign organization or user.';

revoke all on function runlane.put_user(text, text, jsonb) from public;
grant execute on function runlane.put_user(text, text, jsonb) to runlane_api;
