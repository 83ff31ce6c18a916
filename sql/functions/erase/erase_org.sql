-- erase_org: "delete our organization".
--
-- Guarantees:
-- * Deletes the organization (its settings and budget), every user of it with their
--   charges and spend buckets, every agent of it with all it holds (runlane._erase_agents:
--   runs, outputs, journal, messages, keys, thread rows), the logins' entries limited to
--   it (runlane.api_logins with their node entries, and api_scopes of old: such a login
--   can no longer act here until runlane grant-login gives it an entry again) and its
--   claim-lock row; returns the number of runs deleted.
-- * Spend: charges are keyed by owner, and every owner of the organization goes, so their
--   charges go too; no other owner's weekly_spend changes.
-- * While a run of the organization is queued or running: 55006, nothing deleted
--   (cancel it with runlane.cancel_run first).
-- * Locks the agents' thread rows, the agents' rows, the users' rows, then the
--   organization's row, and takes in every agent and user created while it waited for
--   that row: nothing of the organization can be written between the check and the
--   deletion.
-- * Afterwards every function answers for the organization and everything in it as for
--   ids that never existed (RL008); the ids may be used again.
-- * Every statement names the organization: on Citus the erasure runs on its node (the
--   global tables it writes, such as the id namespaces, are copied on every node).
-- * Errors: RL008 unknown organization (for a login scoped to one, any other
--   organization: the same message); 22004 a null id; 22023 a blank or over-long id;
--   55P03 after lock_timeout (5 s) of waiting for a lock; 55000 on a schema before 0022.
create or replace function runlane.erase_org(p_org_id text)
returns int
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
    v_agents text[];
    v_users text[];
    v_more text[];
    v_logins oid[];
    v_erased int;
begin
    perform runlane._check_id('organization id', p_org_id);
    if p_org_id <> coalesce(v_scope, p_org_id)
       or not exists (select 1 from runlane.platform_settings as s where s.org_id = erase_org.p_org_id) then
        raise exception 'unknown organization %', runlane._quote_for_error(p_org_id)
            using errcode = 'RL008';
    end if;
    perform runlane._require_erasure_schema();

    select coalesce(array_agg(a.agent_id order by a.agent_id), '{}') into v_agents
    from runlane.agents as a
    where a.org_id = erase_org.p_org_id;
    perform runlane._lock_for_erasure(v_agents, p_org_id);

    select coalesce(array_agg(u.user_id order by u.user_id), '{}') into v_users
    from (
        select u.user_id
        from runlane.users as u
        where u.org_id = erase_org.p_org_id
        order by u.user_id
        for update
    ) as u;

    perform 1 from runlane.platform_settings as s
    where s.org_id = erase_org.p_org_id
    for update;
    if not found then  -- GUARD: erased by a concurrent call while this one waited
        raise exception 'unknown organization %', runlane._quote_for_error(p_org_id)
            using errcode = 'RL008';
    end if;
    -- Agents and users created while this call waited (committed now: their writers held
    -- the organization's row).
    select coalesce(array_agg(a.agent_id order by a.agent_id), '{}') into v_more
    from runlane.agents as a
    where a.org_id = erase_org.p_org_id
      and a.agent_id <> all(v_agents);
    if cardinality(v_more) > 0 then
        perform runlane._lock_for_erasure(v_more, p_org_id);
        v_agents := v_agents || v_more;
    end if;
    select coalesce(array_agg(u.user_id order by u.user_id), '{}') into v_more
    from (
        select u.user_id
        from runlane.users as u
        where u.org_id = erase_org.p_org_id
          and u.user_id <> all(v_users)
        order by u.user_id
        for update
    ) as u;
    v_users := v_users || v_more;

    v_erased := runlane._erase_agents(
        format('organization %s', runlane._quote_for_error(p_org_id)), v_agents, p_org_id
    );

    delete from runlane.charges as ch
    where ch.owner_id = any(v_users) and ch.org_id = erase_org.p_org_id;

    if runlane._rows_name_their_org() then
        delete from runlane.charge_buckets as b
        where b.owner_id = any(v_users) and b.org_id = erase_org.p_org_id;
    else  -- (before 0027: buckets name no organization)
        delete from runlane.charge_buckets as b
        where b.owner_id = any(v_users);
    end if;

    delete from runlane.users as u
    where u.user_id = any(v_users) and u.org_id = erase_org.p_org_id;

    if to_regclass('runlane.user_orgs') is not null then  -- (the ids are free again)
        delete from runlane.user_orgs as o
        where o.user_id = any(v_users);
    end if;

    if to_regclass('runlane.api_login_nodes') is not null then  -- (their oids on Citus nodes)
        select coalesce(array_agg(l.role_oid), '{}') into v_logins
        from runlane.api_logins as l
        where l.org_id = erase_org.p_org_id;
        delete from runlane.api_login_nodes as n
        where n.login_oid = any(v_logins);
    end if;
    delete from runlane.api_logins as l
    where l.org_id = erase_org.p_org_id;

    delete from runlane.api_scopes as s
    where s.org_id = erase_org.p_org_id;

    delete from runlane.org_claim_locks as cl
    where cl.org_id = erase_org.p_org_id;

    delete from runlane.platform_settings as s
    where s.org_id = erase_org.p_org_id;

    return v_erased;
end;
$$;

comment on function runlane.erase_org(text) is
'Erases an organization with its users, agents, runs, outputs, journal, messages, keys, threads, '
'charges and scoped logins'' entries. Returns the runs erased. 55006 while a run of it is '
'unfinished, RL008 unknown organization.';

revoke all on function runlane.erase_org(text) from public;
grant execute on function runlane.erase_org(text) to runlane_api;
