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
-- * 22004 when an array is null, 22023 when the arrays differ in length.
create or replace function runlane.run_messages_many(p_run_ids bigint[], p_fences bigint[])
returns table (run_id bigint, message_id bigint, body text, created_at timestamptz)
language plpgsql
security definer
set search_path = pg_catalog, pg_temp
set lock_timeout = '5s'
as $$
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
