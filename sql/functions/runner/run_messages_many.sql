-- run_messages_many: the chat messages of many claimed runs in one call, for a worker
-- that just claimed a batch.
--
-- Guarantees:
-- * For each (p_run_ids[i], p_fences[i]) pair whose run is running under exactly that
--   fence and, when bound to a computer, still holds it (runlane._require_owner's rule:
--   the computer lease row names the run and fence), returns the run's attached
--   messages (its source message and every steering message that joined it), ordered
--   by run_id, then message_id (submission order): the same rows runlane.run_messages
--   returns for that run.
-- * Fenced per run: a pair the caller no longer owns (another fence, not running, an
--   unknown run, a null element) yields no rows, never another owner's messages, and
--   never fails the other runs. A run with no rows is therefore either fenced out or
--   without messages: ask runlane.run_messages for it to tell the two apart.
-- * A read: ownership is checked in the statement's snapshot; no row is locked.
-- * On a schema Citus distributes, each organization's runs are read on its node, every
--   statement naming it: the session's runlane.org_id when set (a run of another
--   organization then yields no rows), else each run's (runlane._run_orgs: this server's
--   shards first). A worker reading the runs it claimed on its node sends no command
--   elsewhere.
-- * 22004 when an array is null, 22023 when the arrays differ in length.
create or replace function runlane.run_messages_many(p_run_ids bigint[], p_fences bigint[])
returns table (run_id bigint, message_id bigint, body text, created_at timestamptz)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
#variable_conflict use_column
declare
    v_named text := nullif(current_setting('runlane.org_id', true), '');
    v_org text;
    v_ids bigint[];
    v_fences bigint[];
    v_run_ids bigint[] := '{}'::bigint[];
    v_message_ids bigint[] := '{}'::bigint[];
    v_bodies text[] := '{}'::text[];
    v_times timestamptz[] := '{}'::timestamptz[];
begin
    -- GUARD: arguments.
    if p_run_ids is null or p_fences is null then
        raise exception 'run ids and fences are required'
            using errcode = '22004';
    end if;
    if cardinality(p_run_ids) <> cardinality(p_fences) then
        raise exception '% run ids but % fences', cardinality(p_run_ids), cardinality(p_fences)
            using errcode = '22023',
                  hint = 'Pass one fence per run id, in the same order.';
    end if;

    -- STEP: on Citus, organization by organization, each statement naming it.
    if to_regclass('pg_catalog.pg_dist_partition') is not null
       and runlane._citus_distributed('runlane.runs') then
        for v_org, v_ids, v_fences in
            select o.org_id, array_agg(u.run_id), array_agg(u.fence)
            from unnest(p_run_ids, p_fences) as u (run_id, fence)
            inner join (
                select f.run_id, f.org_id from runlane._run_orgs(p_run_ids) as f
                where v_named is null
                union all
                select distinct u.run_id, v_named from unnest(p_run_ids) as u (run_id)
                where v_named is not null
            ) as o on o.run_id = u.run_id
            group by o.org_id
        loop
            select
                v_run_ids || coalesce(array_agg(r.run_id), '{}'),
                v_message_ids || coalesce(array_agg(m.message_id), '{}'),
                v_bodies || coalesce(array_agg(m.body), '{}'),
                v_times || coalesce(array_agg(m.created_at), '{}')
            into v_run_ids, v_message_ids, v_bodies, v_times
            from runlane.runs as r
            inner join runlane.messages as m on m.org_id = r.org_id and m.run_id = r.run_id
            inner join unnest(v_ids, v_fences) as owned (run_id, fence)
                on owned.run_id = r.run_id and owned.fence = r.fence
            where r.org_id = v_org
              and r.run_id = any(v_ids)
              and r.state = 'running'
              and (r.computer_id is null or exists (
                  select 1
                  from runlane.computer_leases as cl
                  where cl.computer_id = r.computer_id and cl.run_id = r.run_id and cl.fence = r.fence
              ));
        end loop;
        return query
        select x.run_id, x.message_id, x.body, x.created_at
        from unnest(v_run_ids, v_message_ids, v_bodies, v_times) as x (run_id, message_id, body, created_at)
        order by x.run_id, x.message_id;
        return;
    end if;

    -- GUARD: each run is looked up by its primary key, in a subquery the planner keeps as
    -- it is (offset 0), and checked outside it. With the state test inside, statistics
    -- gathered while every run was queued made the planner read every running run of
    -- every worker (runs_running_idx) on each call instead of the few it was given.
    return query
    select r.run_id, m.message_id, m.body, m.created_at
    from (select distinct u.run_id, u.fence from unnest(p_run_ids, p_fences) as u (run_id, fence))
        as owned
    cross join lateral (
        select k.run_id, k.fence, k.state, k.computer_id
        from runlane.runs as k
        where k.run_id = owned.run_id
        offset 0
    ) as r
    inner join runlane.messages as m on m.run_id = r.run_id
    where r.fence = owned.fence and r.state = 'running'
      and (r.computer_id is null or exists (
          select 1
          from runlane.computer_leases as cl
          where cl.computer_id = r.computer_id and cl.run_id = r.run_id and cl.fence = r.fence
      ))
    order by r.run_id, m.message_id;
end;
$$;

comment on function runlane.run_messages_many(bigint[], bigint[]) is
'The messages attached to each run the caller still owns (run id and fence pairs), by run '
'and submission order; a fenced-out or unknown run yields no rows. 22004/22023 bad arrays.';

revoke all on function runlane.run_messages_many(bigint[], bigint[]) from public;
grant execute on function runlane.run_messages_many(bigint[], bigint[]) to runlane_worker;
