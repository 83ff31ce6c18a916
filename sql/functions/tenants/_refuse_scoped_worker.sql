-- _refuse_scoped_worker: a worker function's check that its login is not held to one
-- organization.
--
-- Guarantees: raises 42501 when session_user has an organization in runlane.api_logins
-- (runlane.scope_api_login): worker functions act on every organization, so a login
-- limited to one that is also a member of runlane_worker, however the grant was made, is
-- refused rather than let act for all. One primary-key lookup; nothing on a schema before
-- 0020. Private: called by claim_runs, the one way a worker obtains runs (and their fences).
create or replace function runlane._refuse_scoped_worker()
returns void
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_org text;
begin
    if to_regclass('runlane.api_logins') is null then
        return;  -- GUARD: schema older than 0020
    end if;
    if to_regclass('pg_catalog.pg_dist_local_group') is null then
        -- (no Citus: the login's oid is this server's, the entry's own)
        select l.org_id into v_org
        from runlane.api_logins as l
        where l.role_oid = to_regrole(quote_ident(session_user));
    else
        select l.org_id into v_org
        from runlane._api_login() as l;
    end if;
    if v_org is not null then
        raise exception 'login % is limited to organization % and may not act as a worker',
            session_user, runlane._quote_for_error(v_org)
            using errcode = '42501',
                  hint = format('A worker acts on every organization: revoke runlane_worker from %s and '
                      || 'run workers under another login.', quote_ident(session_user));
    end if;
end;
$$;

comment on function runlane._refuse_scoped_worker() is
'42501 when session_user is limited to one organization (runlane.api_logins): it may not act as a worker.';

revoke all on function runlane._refuse_scoped_worker() from public;
