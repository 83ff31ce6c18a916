-- _in_scope: may the connected login see an object of organization p_org_id?
--
-- Guarantees: true for an unscoped login (runlane._api_org() is NULL: the same lookup, by
-- session_user), else true only for its own organization; false for a NULL organization
-- when scoped. Callers fold a false into their "unknown agent/run" error, word for word,
-- so another tenant's objects are indistinguishable from missing ones (nothing leaks by
-- existence).
create or replace function runlane._in_scope(p_org_id text)
returns boolean
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_org text;
begin
    -- runlane._api_org() inlined: this runs on every API call, one lookup and no nesting
    if to_regclass('runlane.api_scopes') is null then
        return true;  -- GUARD: schema older than 0007, no scopes can exist
    end if;
    select s.org_id into v_org
    from runlane.api_scopes as s
    where s.login = session_user;
    return not found or coalesce(v_org = p_org_id, false);  -- never NULL: callers negate it
end;
$$;

comment on function runlane._in_scope(text) is
'True when session_user is unscoped or limited to p_org_id (callers raise their unknown-object error otherwise).';

revoke all on function runlane._in_scope(text) from public;
