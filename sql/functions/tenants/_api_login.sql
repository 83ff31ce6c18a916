-- _api_login: session_user's entry in runlane.api_logins as this server knows the login.
--
-- Guarantees:
-- * entered: whether the login has an entry; org_id: its organization (NULL for every
--   organization, or no entry).
-- * A login is known by its role oid, and an oid is one server's. On plain PostgreSQL and
--   a Citus coordinator that is the entry's own; on a Citus worker node it is the oid the
--   login has there (runlane.api_login_nodes), so a call sent straight to the node that
--   holds an organization knows its login as the coordinator does, and a login with no
--   row for that node is unknown there.
-- * Two primary-key probes at most. Private: runlane._api_org and
--   runlane._refuse_scoped_worker ask it where Citus is installed (without Citus they read
--   the entry by the oid themselves, one call fewer), on a schema from 0020 on.
create or replace function runlane._api_login(out entered boolean, out org_id text)
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_group int := 0;  -- this server's Citus node group: 0 without Citus and on a coordinator
    -- (a value, not an expression in the statements: on a node without its own copy of the
    -- reference tables Citus sends them to another server, where session_user is the
    -- connection's user, not the login's)
    v_role oid := to_regrole(quote_ident(session_user));
begin
    if to_regclass('pg_catalog.pg_dist_local_group') is not null then
        -- (Citus's catalog, named in dynamic SQL: the function installs without Citus)
        execute 'select groupid from pg_catalog.pg_dist_local_group' into v_group;
    end if;
    if v_group = 0 or to_regclass('runlane.api_login_nodes') is null then
        select l.org_id into org_id
        from runlane.api_logins as l
        where l.role_oid = v_role;
    else
        select l.org_id into org_id
        from runlane.api_login_nodes as n
        inner join runlane.api_logins as l on l.role_oid = n.login_oid
        where n.node_group = v_group
          and n.role_oid = v_role;
    end if;
    entered := found;
end;
$$;

comment on function runlane._api_login() is
'session_user''s entry in runlane.api_logins, by its oid on this server (on a Citus worker node '
'through runlane.api_login_nodes).';

revoke all on function runlane._api_login() from public;
