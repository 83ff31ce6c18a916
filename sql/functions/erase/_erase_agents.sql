-- _erase_agents: deletes agents of one organization with all they hold, or nothing while
-- one of their runs is unfinished.
--
-- Guarantees, for agents the caller has locked (runlane._lock_for_erasure):
-- * While any run of them is queued or running: 55006 naming p_what (the object being
--   erased) and that run, and nothing is deleted.
-- * Otherwise deletes their runs with everything that carries them
--   (runlane._erase_runs: charges stay as amounts without the run), their held
--   messages, their idempotency keys, their chat-thread rows and the agents themselves;
--   returns the number of runs deleted.
-- * Each statement names the organization (on Citus: its node alone); keys and thread
--   rows name none before 0027 and are read by agent there.
create or replace function runlane._erase_agents(p_what text, p_agents text[], p_org_id text)
returns int
language plpgsql
set search_path = pg_catalog, pg_temp
as $$
declare
    v_run_id bigint;
    v_state text;
    v_runs bigint[];
    v_erased int;
begin
    select r.run_id, r.state into v_run_id, v_state
    from runlane.runs as r
    where r.agent_id = any(p_agents)
      and r.org_id = p_org_id
      and r.state in ('queued', 'running')
    order by r.run_id
    limit 1;
    if found then
        raise exception '% has an unfinished run (run %, %)', p_what, v_run_id, v_state
            using errcode = '55006',
                  hint = 'Cancel it with runlane.cancel_run and erase again once it has finished; '
                      || 'nothing was erased.';
    end if;

    select coalesce(array_agg(r.run_id order by r.run_id), '{}') into v_runs
    from (
        select r.run_id
        from runlane.runs as r
        where r.agent_id = any(p_agents)
          and r.org_id = p_org_id
          and r.state not in ('queued', 'running')  -- all of them now: runs_agent_history_idx
        order by r.run_id
        for update
    ) as r;
    v_erased := runlane._erase_runs(v_runs, p_org_id);

    -- (a message attached to a run went with it: what is left is held, messages_waiting_idx)
    delete from runlane.messages as m
    where m.agent_id = any(p_agents)
      and m.org_id = p_org_id
      and m.run_id is null;

    if runlane._rows_name_their_org() then
        delete from runlane.idempotency_keys as k
        where k.agent_id = any(p_agents) and k.org_id = p_org_id;

        delete from runlane.threads as t
        where t.agent_id = any(p_agents) and t.org_id = p_org_id;
    else  -- (before 0027)
        delete from runlane.idempotency_keys as k
        where k.agent_id = any(p_agents);

        delete from runlane.threads as t
        where t.agent_id = any(p_agents);
    end if;

    delete from runlane.agents as a
    where a.agent_id = any(p_agents)
      and a.org_id = p_org_id;

    if to_regclass('runlane.agent_orgs') is not null then  -- (the ids are free again)
        delete from runlane.agent_orgs as o
        where o.agent_id = any(p_agents);
    end if;

    return v_erased;
end;
$$;

comment on function runlane._erase_agents(text, text[], text) is
'Deletes locked agents with their runs, messages, keys and thread rows (charges stay without the '
'run); 55006 naming p_what while one of their runs is unfinished.';

revoke all on function runlane._erase_agents(text, text[], text) from public;
