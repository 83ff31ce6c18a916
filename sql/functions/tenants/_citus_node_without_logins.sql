-- _citus_node_without_logins: whether this server is a Citus worker node for which no API
-- login has an entry (runlane.api_login_nodes): a node added to the cluster after the
-- logins were entered, until `runlane migrate --citus` enters them there.
--
-- Guarantees:
-- * false without Citus, on a coordinator, and on a schema before 0030.
-- * Asked only when a login holding runlane_api has no entry (runlane._api_org), so that
--   its refusal names the step that enters it; it lets nothing through.
create or replace function runlane._citus_node_without_logins()
returns boolean
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_group int := 0;
begin
    if to_regclass('pg_catalog.pg_dist_local_group') is null
       or to_regclass('runlane.api_login_nodes') is null then
        return false;
    end if;
    -- (Citus's catalog, named in dynamic SQL: the function installs without Citus)
    execute 'select groupid from pg_catalog.pg_dist_local_group' into v_group;
    return v_group <> 0
        and not exists (select 1 from runlane.api_login_nodes as n where n.node_group = v_group);
end;
$$;

comment on function runlane._citus_node_without_logins() is
'Whether this server is a Citus worker node no API login has an entry for (added since the '
'logins were entered): runlane._api_org''s refusal then names runlane migrate --citus.';

revoke all on function runlane._citus_node_without_logins() from public;
