-- put_user: create or update a user of an organization.
--
-- Guarantees:
-- * Key timezone: a zone name (RL007 when unknown) or JSON null = the organization's
--   zone. An absent key keeps its value. Returns the row as stored; the users_timezone
--   trigger moves the next_run_at of the user's calendar agents to the new zone.
-- * RL008 for an unknown organization and, for a login scoped to one (runlane._api_org),
--   any other organization: the same message, and no organization is read. 23505 "user
--   id … is taken" for a user id that belongs to another organization than p_org_id (a
--   user never moves between organizations: their agents, runs and budget belong to it):
--   the same message whichever organization holds it and whoever asks, nothing else.
--   22023 for an unknown key or a value of the wrong type, naming the key and the
--   accepted ones; 22004/22023 for a null or blank id.
-- * The row is locked `for no key update`: a call left open in a slow request blocks only
--   other patches of the same row, never foreign-key checks of the organization's other writes.
create or replace function runlane.put_user(p_user_id text, p_org_id text, p_patch jsonb default '{}')
returns runlane.users
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
    v_row runlane.users;
    v_free boolean := true;  -- the id is this organization's or nobody's
begin
    perform runlane._check_id('user id', p_user_id);
    perform runlane._check_id('organization id', p_org_id);
    perform runlane._check_patch('user', p_patch, jsonb_build_object(
        'timezone', jsonb_build_array('string', 'null')
    ));
    if p_org_id <> coalesce(v_scope, p_org_id)
       or not exists (select 1 from runlane.platform_settings as s where s.org_id = p_org_id) then
        raise exception 'unknown organization %', runlane._quote_for_error(p_org_id)
            using errcode = 'RL008',
                  hint = 'Create it with runlane.put_org first; a login limited to one organization '
                      || 'manages only that organization.';
    end if;

    -- GUARD: the id's one organization (runlane.user_orgs, from 0029) is claimed first: a
    -- creator in a second organization waits here for the first, then finds it taken.
    if to_regclass('runlane.user_orgs') is not null then
        insert into runlane.user_orgs as o (user_id, org_id)
        values (p_user_id, p_org_id)
        on conflict (user_id) do nothing;
        -- (and no user of another organization has the id: one written by hand, without
        -- its namespace row)
        -- (select 1, not a bare select: Citus cannot plan one without columns)
        v_free := (
            found or exists (
                select 1 from runlane.user_orgs as o where o.user_id = p_user_id and o.org_id = p_org_id
            )
        ) and not exists (
            select 1 from runlane.users as u where u.user_id = p_user_id and u.org_id <> p_org_id
        );
    end if;

    if v_free then
        insert into runlane.users (user_id, org_id, timezone)
        values (p_user_id, p_org_id, p_patch ->> 'timezone')
        on conflict on constraint users_pkey do nothing
        returning * into v_row;
        if found then
            return v_row;
        end if;
    end if;

    -- only the named organization's user is read and locked: the taken answer reads nothing
    select * into v_row from runlane.users as u
    where u.user_id = p_user_id and u.org_id = p_org_id
    for no key update;
    if not found then
        raise exception 'user id % is taken', runlane._quote_for_error(p_user_id)
            using errcode = '23505',
                  hint = 'User ids are unique across the organizations of this database and a user never moves '
                      || 'to another one: choose another id (ids that carry the organization, or random ids, '
                      || 'never collide).';
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
