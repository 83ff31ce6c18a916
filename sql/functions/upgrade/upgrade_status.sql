-- upgrade_status: what still blocks the contract step (migration 0003) of the rolling
-- upgrade from queue delivery to direct dispatch.
--
-- Guarantees: one row per blocker that is present, none when the contract step may run,
-- in this order, with exactly the blocker names and details 0003's guard lists in its
-- RL009 message (its queries are these, query for query; tests compare the two):
--   * 'live legacy workers': workers of generation < 2 or with legacy deliveries, not
--     stopped, seen in the last 2 minutes;
--   * 'pending legacy run deliveries': run_jobs of task run_agent with attempts left;
--   * 'agents with more than one unfinished background run';
--   * 'redundant timer runs left': surplus pristine marked timer runs per routine, prompt,
--     thread and model (runlane.cancel_redundant_timer_runs() cancels them).
-- Reads only; safe to call at any time at schema 0002 or later.
create or replace function runlane.upgrade_status()
returns table (blocker text, detail text)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
as $$
declare
    v_list text;
begin
    select string_agg(format('%s (generation %s, last seen %s)', w.worker_id, w.generation,
                             to_char(w.heartbeat_at at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS"Z"')),
                      ', ' order by w.worker_id)
    into v_list
    from runlane.workers as w
    where (w.generation < 2 or w.deliveries = 'legacy')
      and w.stopped_at is null
      and w.heartbeat_at > now() - interval '2 minutes';
    if v_list is not null then
        blocker := 'live legacy workers';
        detail := v_list;
        return next;
    end if;

    select string_agg(format('job %s for run %s', j.id, j.payload ->> 'run_id'), ', ' order by j.id)
    into v_list
    from runlane.run_jobs as j
    where j.task = 'run_agent' and j.attempts < j.max_attempts;
    if v_list is not null then
        blocker := 'pending legacy run deliveries';
        detail := v_list;
        return next;
    end if;

    select string_agg(format('%s (%s unfinished)', d.agent_id, d.n), ', ' order by d.agent_id)
    into v_list
    from (
        select r.agent_id, count(*) as n
        from runlane.runs as r
        where r.lane = 'background' and r.state in ('queued', 'running')
        group by r.agent_id
        having count(*) > 1
    ) as d;
    if v_list is not null then
        blocker := 'agents with more than one unfinished background run';
        detail := v_list;
        return next;
    end if;

    select string_agg(format('%s (%s surplus)', t.timer_routine, t.n - 1), ', ' order by t.timer_routine)
    into v_list
    from (
        select r.timer_routine, count(*) as n
        from runlane.runs as r
        where r.state = 'queued' and r.trigger = 'scheduled' and r.timer_routine is not null
          and r.attempts = 0 and r.cost = 0 and r.checkpoint is null
          and not exists (select 1 from runlane.run_outputs as o where o.run_id = r.run_id)
          and not exists (select 1 from runlane.messages as m where m.run_id = r.run_id)
          and not exists (
              select 1 from runlane.computer_leases as cl
              where cl.run_id = r.run_id and cl.expires_at > now()
          )
        group by r.timer_routine, r.prompt, r.thread_id, r.model
        having count(*) > 1
    ) as t;
    if v_list is not null then
        blocker := 'redundant timer runs left';
        detail := v_list;
        return next;
    end if;
end;
$$;

comment on function runlane.upgrade_status() is
'What still blocks the contract step 0003: live legacy workers, pending legacy run deliveries, '
'agents with more than one unfinished background run, redundant timer runs left (no rows = ready).';

revoke all on function runlane.upgrade_status() from public;
grant execute on function runlane.upgrade_status() to runlane_worker;
