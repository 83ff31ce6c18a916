-- scope_api_login: limit an API login to one organization, or lift its limit.
--
-- Guarantees:
-- * p_org_id given: the login acts for that organization only in every function granted
--   to runlane_api (another organization's agents, runs and owners answer as unknown
--   ones). NULL: the scope is removed and the login acts for every organization again.
--   Returns the organization the login is now limited to (NULL when unscoped).
-- * Refuses (22023) a role that cannot log in (a scope names the login that connects,
--   session_user: a scope on a group role would not limit its members) and a login
--   that is a member of runlane_worker (worker functions act on every organization, so
--   such a login could not be held to one); RL008 for an unknown organization; 22004
--   for a NULL login.
-- * Executable by the schema owner (and superusers) only: neither runlane_api nor
--   runlane_worker may change a scope, their own least of all.
create or replace function runlane.scope_api_login(p_login name, p_org_id text)
returns text
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
begin
    if p_login is null then
        raise exception 'scope_api_login needs a login name'
            using errcode = '22004';
    end if;
    if not exists (select 1 from pg_catalog.pg_roles as r where r.rolname = p_login and r.rolcanlogin) then
        raise exception 'no login named % (a scope names a role that can log in)', p_login
            using errcode = '22023',
                  hint = 'Create the login first (CREATE ROLE … LOGIN); scoping a group role would not '
                      || 'limit its members.';
    end if;

    if p_org_id is null then
        delete from runlane.api_scopes as s where s.login = scope_api_login.p_login;
        return null;
    end if;

    if pg_has_role(p_login, 'runlane_worker', 'member') then
        raise exception 'login % is a member of runlane_worker, which acts on every organization', p_login
            using errcode = '22023',
                  hint = 'Use separate logins for workers and for one organization''s application.';
    end if;
    if not exists (
        select 1 from runlane.platform_settings as o where o.org_id = scope_api_login.p_org_id
    ) then
        raise exception 'unknown organization %', left(p_org_id, 200)
            using errcode = 'RL008';
    end if;

    insert into runlane.api_scopes as s (login, org_id)
    values (p_login, p_org_id)
    on conflict (login) do update
    set org_id = excluded.org_id, scoped_at = now();
    return p_org_id;
end;
$$;

comment on function runlane.scope_api_login(name, text) is
'Limits a login to one organization in every runlane_api function (NULL lifts the limit). '
'Schema owner and superusers only.';

revoke all on function runlane.scope_api_login(name, text) from public;
