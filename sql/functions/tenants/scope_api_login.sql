-- scope_api_login: allow a login to act through runlane_api in this database, for one
-- organization or, on purpose, for every organization.
--
-- Guarantees:
-- * p_org_id given: the login acts for that organization only in every function granted
--   to runlane_api (another organization's agents, runs and owners answer as unknown
--   ones). NULL: the login acts for every organization, on purpose. Either way the entry
--   is this database's (runlane.api_logins) and names the role, not its name: a rename
--   keeps it, a new role with an old name gets none. Returns the organization the login
--   is now limited to (NULL for every organization).
-- * On a Citus cluster (after runlane migrate --citus), run on the coordinator: the entry
--   also records the oid the login has on each worker node (runlane.api_login_nodes), so
--   it holds for calls sent to any node. A node where the login is missing, or added
--   later, gets no row: the login is refused there until entered again.
-- * Refuses (22023) a role that cannot log in (an entry names the login that connects,
--   session_user: an entry for a group role would not cover its members) and, with an
--   organization, a login that is a member of runlane_worker (a worker acts on every
--   organization, so such a login could not be held to one); RL008 for an unknown
--   organization; 22004 for a NULL login. Entries of dropped roles are removed.
-- * Executable by the schema owner (and superusers) only: neither runlane_api nor
--   runlane_worker may change an entry, their own least of all.
create or replace function runlane.scope_api_login(p_login name, p_org_id text)
returns text
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_oid oid;
    v_now timestamptz := now();  -- (a value: Citus calls no function in an upsert's SET)
    v_group int;
    v_node_oid oid;
begin
    if p_login is null then
        raise exception 'scope_api_login needs a login name'
            using errcode = '22004';
    end if;
    select r.oid into v_oid
    from pg_catalog.pg_roles as r
    where r.rolname = p_login and r.rolcanlogin;
    if not found then
        raise exception 'no login named % (an entry names a role that can log in)', p_login
            using errcode = '22023',
                  hint = 'Create the login first (CREATE ROLE … LOGIN); an entry for a group role would '
                      || 'not cover its members.';
    end if;

    if p_org_id is not null and pg_has_role(v_oid, 'runlane_worker', 'member') then
        raise exception 'login % is a member of runlane_worker, which acts on every organization', p_login
            using errcode = '22023',
                  hint = 'Use separate logins for workers and for one organization''s application.';
    end if;
    if p_org_id is not null and not exists (
        select 1 from runlane.platform_settings as o where o.org_id = scope_api_login.p_org_id
    ) then
        raise exception 'unknown organization %', left(p_org_id, 200)
            using errcode = 'RL008';
    end if;

    delete from runlane.api_logins as l
    where not exists (select 1 from pg_catalog.pg_roles as r where r.oid = l.role_oid);
    insert into runlane.api_logins as l (role_oid, org_id)
    values (v_oid, p_org_id)
    on conflict (role_oid) do update
    set org_id = excluded.org_id, entered_at = v_now;

    -- STEP: on a Citus cluster, the login's oid on each worker node, by which a call sent
    -- straight to a node finds the entry (runlane._api_login). Citus's catalogs and
    -- functions are named only in dynamic SQL: this function installs without Citus.
    if runlane._citus_distributed('runlane.api_login_nodes') then
        delete from runlane.api_login_nodes as n
        where n.login_oid = v_oid
           or not exists (select 1 from runlane.api_logins as l where l.role_oid = n.login_oid);
        for v_group, v_node_oid in execute $sql$
            select n.groupid, r.result::oid
            from pg_catalog.run_command_on_all_nodes(
                format('select oid from pg_catalog.pg_roles where rolname = %L and rolcanlogin', $1)
            ) as r
            inner join pg_catalog.pg_dist_node as n on n.nodeid = r.nodeid
            where n.groupid <> 0 and r.success and r.result ~ '^[0-9]+$'
        $sql$ using p_login
        loop
            insert into runlane.api_login_nodes (node_group, role_oid, login_oid)
            values (v_group, v_node_oid, v_oid);
        end loop;
    end if;
    return p_org_id;
end;
$$;

comment on function runlane.scope_api_login(name, text) is
'Allows a login to act through runlane_api here: for one organization, or (NULL) for every one '
'on purpose. Schema owner and superusers only.';

revoke all on function runlane.scope_api_login(name, text) from public;
