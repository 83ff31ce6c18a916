-- _run_org: the organization a run-keyed call names in its statements.
--
-- Guarantees:
-- * p_scope given (a login held to one organization): p_scope itself, read from nothing.
--   A statement keyed by (p_run_id, p_scope) finds no run of another organization, so a
--   foreign and an unknown run still answer alike, and on Citus every statement of the
--   call goes to the one node that holds p_scope.
-- * p_scope null (a login for every organization, a worker): the run's own organization,
--   one read by run id (on Citus, of every node); null for an unknown run.
-- * Private: the run-keyed calls of runlane_api (run_status, outputs_since, publish_run,
--   cancel_run) ask it once, after runlane._api_org.
create or replace function runlane._run_org(p_run_id bigint, p_scope text)
returns text
language plpgsql
stable
set search_path = pg_catalog, pg_temp
as $$
declare
    v_org text;
begin
    if p_scope is not null then
        return p_scope;
    end if;
    select r.org_id into v_org
    from runlane.runs as r
    where r.run_id = p_run_id;
    return v_org;
end;
$$;

comment on function runlane._run_org(bigint, text) is
'The organization a run-keyed call names: the login''s own when it is held to one, else the run''s.';

revoke all on function runlane._run_org(bigint, text) from public;
