-- _api_org: the organization the connected login acts for in this call, NULL for every
-- organization; raises 42501 when the login may not act through runlane_api here.
--
-- Guarantees:
-- * Keyed by session_user, the login that authenticated (inside a security definer
--   function current_user is the function's owner, and a SET ROLE would let a scoped login
--   become runlane_api and shed its scope), by its role oid: a renamed login keeps its
--   entry, a new login that takes an old name has none. On a Citus worker node, by the
--   oid the login has there (runlane._api_login).
-- * runlane.api_logins has a row for the login: its org_id (NULL = every organization, on
--   purpose). A scoped login that is a member of runlane_worker, however the grant was
--   made, is refused (42501): a worker acts on every organization.
-- * No row: NULL for superusers, members of the schema owner and logins outside
--   runlane_api (a worker reads the operator views for every organization); a login that
--   holds runlane_api, directly or through another role, is refused (42501, the hint
--   names runlane grant-login, or on a Citus worker node added since the logins were
--   entered, runlane migrate --citus): an API login acts only where this database says so.
-- * The setting runlane.org_id (SET, SET LOCAL or set_config; empty or unset: none)
--   narrows a login that acts for every organization to the one it names, for every call
--   of the session or transaction: another organization's ids then answer as unknown
--   ones, and on Citus each statement names that organization (one node). A login held
--   to one organization may name only its own (else 42501). Naming never widens.
-- * One primary-key lookup per call, two on a Citus worker node (role memberships are
--   answered from the backend's cache). On a schema before 0020 (a staged upgrade) the
--   scopes of 0007 apply, by name.
-- * Private: called once by every function granted to runlane_api, before it reads any
--   object, so an unknown and a foreign id cost the same.
create or replace function runlane._api_org()
returns text
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_org text;
    v_entered boolean;
    v_named text := nullif(current_setting('runlane.org_id', true), '');
begin
    if to_regclass('runlane.api_logins') is null then
        -- GUARD: schema older than 0020: 0007's scopes by name, none before 0007
        if to_regclass('runlane.api_scopes') is not null then
            select s.org_id into v_org
            from runlane.api_scopes as s
            where s.login = session_user;
        end if;
    else
        if to_regclass('pg_catalog.pg_dist_local_group') is null then
            -- (no Citus: the login's oid is this server's, the entry's own)
            select l.org_id into v_org
            from runlane.api_logins as l
            where l.role_oid = to_regrole(quote_ident(session_user));
            v_entered := found;
        else
            select l.entered, l.org_id into v_entered, v_org
            from runlane._api_login() as l;
        end if;
        if v_entered and v_org is not null and pg_has_role(session_user, 'runlane_worker', 'member') then
            raise exception 'login % is limited to one organization and is also a member of runlane_worker',
                session_user
                using errcode = '42501',
                      hint = format('A worker acts on every organization: revoke runlane_worker from %s '
                          || '(use separate logins for workers and for one organization''s application).',
                          quote_ident(session_user));
        end if;
        -- (nested: the check reads a catalog in a query, which an entered login skips)
        if not v_entered then
            if pg_has_role(session_user, 'runlane_api', 'member')
               and not pg_has_role(
                   session_user,
                   (select n.nspowner from pg_catalog.pg_namespace as n where n.nspname = 'runlane'),
                   'member'
               ) then
                if runlane._citus_node_without_logins() then
                    raise exception 'login % holds runlane_api, and this Citus worker node knows no login yet',
                        session_user
                        using errcode = '42501',
                              hint = 'A node added to the cluster learns the logins when runlane migrate '
                                  || '--citus runs again on the coordinator.';
                end if;
                raise exception 'login % holds runlane_api but may not act in this database', session_user
                    using errcode = '42501',
                          hint = format('Run runlane grant-login %s --api [--org X] here: --org limits it '
                              || 'to one organization, without it the login acts for every organization.',
                              quote_ident(session_user));
            end if;
        end if;
    end if;

    -- STEP: the organization the session names (runlane.org_id) narrows a login that acts
    -- for every one; a login held to one may name only its own.
    if v_named is null or v_named = v_org then
        return v_org;
    end if;
    if v_org is null then
        return v_named;
    end if;
    raise exception 'login % acts for organization % only; runlane.org_id names %',
        session_user, runlane._quote_for_error(v_org), runlane._quote_for_error(v_named)
        using errcode = '42501',
              hint = 'Reset runlane.org_id, or set it to the login''s own organization.';
end;
$$;

comment on function runlane._api_org() is
'The organization session_user acts for (runlane.api_logins), NULL for every one; 42501 for an '
'API login with no entry here or a scoped login that is also a worker.';

revoke all on function runlane._api_org() from public;
