-- _in_scope: may the connected login see an object of organization p_org_id?
--
-- Guarantees: true for an unscoped login (runlane._api_org() is NULL), else true only for
-- its own organization; false for a NULL organization when scoped. Callers fold a false
-- into their "unknown agent/run" error, word for word, so another tenant's objects are
-- indistinguishable from missing ones (nothing leaks by existence).
create or replace function runlane._in_scope(p_org_id text)
returns boolean
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_org text := runlane._api_org();
begin
    return v_org is null or v_org = p_org_id;
end;
$$;

comment on function runlane._in_scope(text) is
'True when session_user is unscoped or limited to p_org_id (callers raise their unknown-object error otherwise).';

revoke all on function runlane._in_scope(text) from public;
