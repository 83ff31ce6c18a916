-- _api_org: the organization the connected login is limited to, or NULL when unscoped.
--
-- Guarantees:
-- * Keyed by session_user, the login that authenticated: inside a security definer
--   function current_user is the function's owner, and a SET ROLE would let a scoped
--   login become runlane_api (or any role it belongs to) and shed its scope. A login that
--   reaches runlane_api through another role is scoped all the same: the scope names the
--   login, not the path of its grants.
-- * One primary-key lookup (runlane.api_scopes). Before migration 0007 (a rolling upgrade
--   still at 0002 or 0003) there is no scope table and every login is unscoped.
-- * Private: called by every function granted to runlane_api, executable by nobody else.
create or replace function runlane._api_org()
returns text
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_org text;
begin
    if to_regclass('runlane.api_scopes') is null then
        return null;  -- GUARD: schema older than 0007, no scopes can exist
    end if;
    select s.org_id into v_org
    from runlane.api_scopes as s
    where s.login = session_user;
    return v_org;
end;
$$;

comment on function runlane._api_org() is
'The organization session_user is limited to (runlane.api_scopes), NULL when unscoped.';

revoke all on function runlane._api_org() from public;
