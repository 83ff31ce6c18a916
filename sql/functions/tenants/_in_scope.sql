-- _in_scope: may the connected login see an object of organization p_org_id?
--
-- Guarantees: true for a login acting for every organization (runlane._api_org() is NULL),
-- else true only for its own organization; false for a NULL organization when scoped.
-- Raises what runlane._api_org raises (42501). HEAD's functions do not call it: they call
-- runlane._api_org once before probing an object and filter by it, so an unknown and a
-- foreign id take the same path. It stays for the functions of earlier schemas, which
-- call it while a migration runs (between its commit and the functions' reinstall) and
-- in a rolling upgrade's older processes; a contract step may drop it.
create or replace function runlane._in_scope(p_org_id text)
returns boolean
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_org text := runlane._api_org();
begin
    return v_org is null or coalesce(v_org = p_org_id, false);  -- never NULL: callers negate it
end;
$$;

comment on function runlane._in_scope(text) is
'True when session_user acts for every organization or for p_org_id; 42501 as runlane._api_org.';

revoke all on function runlane._in_scope(text) from public;
