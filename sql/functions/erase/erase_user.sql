-- erase_user: "delete my account".
--
-- Guarantees:
-- * Deletes the user (and their zone), every agent they own with all it holds
--   (runlane._erase_agents: runs, outputs, journal, messages, keys, thread rows), and
--   their charges and quarter-hour spend buckets; returns the number of runs deleted.
-- * Spend: a user's charges are keyed by the user's id, so they go with the user. The
--   weekly budget is per owner and the owner no longer exists; every other owner's
--   weekly_spend is unchanged. (erase_thread and erase_agent keep charges, as amounts.)
-- * While a run of one of their agents is queued or running: 55006, nothing deleted
--   (cancel it with runlane.cancel_run first).
-- * Locks the agents' thread rows, the agents' rows, then the user's row, and takes in
--   every agent given to the user while it waited for that row: nothing of the user can
--   be written between the check and the deletion.
-- * Afterwards every function answers for the user, their agents, runs and messages as
--   for ids that never existed (RL008; weekly_spend 22023 unknown owner).
-- * Every statement names the user's organization (runlane.user_orgs): on Citus the
--   erasure runs on that organization's node.
-- * Errors: RL008 unknown user (also another organization's for a login scoped to one:
--   the same message); 22004 a null id; 22023 a blank or over-long id; 55P03 after
--   lock_timeout (5 s) of waiting for a lock; 55000 on a schema before 0022.
create or replace function runlane.erase_user(p_user_id text)
returns int
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
declare
    v_scope text := runlane._api_org();  -- first: a foreign and an unknown id take one path
    v_org text;  -- the user's, named in every statement (on Citus, one node)
    v_agents text[];
    v_more text[];
    v_erased int;
begin
    perform runlane._check_id('user id', p_user_id);
    -- (held to one organization: only there, so a foreign id costs an unknown one's; else
    -- the user ids' namespace, from 0029: on Citus a copy on every node, read locally)
    v_org := v_scope;
    if v_org is null and to_regclass('runlane.user_orgs') is not null then
        select o.org_id into v_org from runlane.user_orgs as o where o.user_id = erase_user.p_user_id;
    end if;
    if v_org is null then
        select u.org_id into v_org from runlane.users as u where u.user_id = erase_user.p_user_id;
    end if;
    if not exists (
        select 1 from runlane.users as u
        where u.user_id = erase_user.p_user_id
          and u.org_id = v_org
          and (v_scope is null or u.org_id = v_scope)
    ) then
        raise exception 'unknown user %', runlane._quote_for_error(p_user_id)
            using errcode = 'RL008';
    end if;
    perform runlane._require_erasure_schema();

    select coalesce(array_agg(a.agent_id order by a.agent_id), '{}') into v_agents
    from runlane.agents as a
    where a.owner_id = erase_user.p_user_id and a.org_id = v_org;
    perform runlane._lock_for_erasure(v_agents, v_org);

    perform 1 from runlane.users as u
    where u.user_id = erase_user.p_user_id and u.org_id = v_org
    for update;
    if not found then  -- GUARD: erased by a concurrent call while this one waited
        raise exception 'unknown user %', runlane._quote_for_error(p_user_id)
            using errcode = 'RL008';
    end if;
    -- Agents given to the user while this call waited (committed now: their writers
    -- held the user's row).
    select coalesce(array_agg(a.agent_id order by a.agent_id), '{}') into v_more
    from runlane.agents as a
    where a.owner_id = erase_user.p_user_id
      and a.org_id = v_org
      and a.agent_id <> all(v_agents);
    if cardinality(v_more) > 0 then
        perform runlane._lock_for_erasure(v_more, v_org);
        v_agents := v_agents || v_more;
    end if;

    v_erased := runlane._erase_agents(format('user %s', runlane._quote_for_error(p_user_id)), v_agents, v_org);

    delete from runlane.charges as ch
    where ch.owner_id = erase_user.p_user_id and ch.org_id = v_org;

    if runlane._rows_name_their_org() then
        delete from runlane.charge_buckets as b
        where b.owner_id = erase_user.p_user_id and b.org_id = v_org;
    else  -- (before 0027: buckets name no organization)
        delete from runlane.charge_buckets as b
        where b.owner_id = erase_user.p_user_id;
    end if;

    delete from runlane.users as u
    where u.user_id = erase_user.p_user_id and u.org_id = v_org;

    if to_regclass('runlane.user_orgs') is not null then  -- (the id is free again)
        delete from runlane.user_orgs as o
        where o.user_id = erase_user.p_user_id;
    end if;

    return v_erased;
end;
$$;

comment on function runlane.erase_user(text) is
'Erases a user with every agent they own (runs, outputs, journal, messages, keys, threads) and their '
'charges. Returns the runs erased. 55006 while a run of theirs is unfinished, RL008 unknown user.';

revoke all on function runlane.erase_user(text) from public;
grant execute on function runlane.erase_user(text) to runlane_api;
