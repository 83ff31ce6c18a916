-- 0003 — contract: the database itself holds "one unfinished background run per agent",
-- and the compatibility trigger for older workers goes away.
--
-- GUARD: refuse, listing every blocker, while an older worker is alive, a legacy run
-- delivery is pending, or an agent has more than one unfinished background run (the
-- unique index could not be built, and cancelling someone's run is not ours to do); the
-- redundant marked timer runs among those are listed too, as
-- runlane.cancel_redundant_timer_runs() can clear them. These are the checks of
-- runlane.upgrade_status() (sql/functions/upgrade/upgrade_status.sql), query for query:
-- a migration never calls HEAD functions, so keep the two in step.
do $guard$
declare
    v_blockers text[] := '{}';
    v_list text;
begin
    -- No worker registers and no delivery is enqueued between these checks and the end
    -- of the contract step.
    lock table runlane.workers, runlane.run_jobs in exclusive mode;

    select string_agg(format('%s (generation %s, last seen %s)', w.worker_id, w.generation,
                             to_char(w.heartbeat_at at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS"Z"')),
                      ', ' order by w.worker_id)
    into v_list
    from runlane.workers as w
    where (w.generation < 2 or w.deliveries = 'legacy')
      and w.stopped_at is null
      and w.heartbeat_at > now() - interval '2 minutes';
    if v_list is not null then
        v_blockers := v_blockers || ('live legacy workers: ' || v_list);
    end if;

    select string_agg(format('job %s for run %s', j.id, j.payload ->> 'run_id'), ', ' order by j.id)
    into v_list
    from runlane.run_jobs as j
    where j.task = 'run_agent' and j.attempts < j.max_attempts;
    if v_list is not null then
        v_blockers := v_blockers || ('pending legacy run deliveries: ' || v_list);
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
        v_blockers := v_blockers || ('agents with more than one unfinished background run: ' || v_list);
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
        v_blockers := v_blockers || ('redundant timer runs left: ' || v_list);
    end if;

    if cardinality(v_blockers) > 0 then
        raise exception 'contract step 0003 refused: %', array_to_string(v_blockers, '; ')
            using errcode = 'RL009',
                  hint = 'Stop older workers, let legacy deliveries drain '
                      || '(runlane.drain_legacy_deliveries()), run '
                      || 'runlane.cancel_redundant_timer_runs() (see runlane upgrade-status), '
                      || 'then migrate again.';
    end if;
end
$guard$;

create unique index runs_one_unfinished_background_run_per_agent
on runlane.runs (agent_id)
where lane = 'background' and state in ('queued', 'running');

drop trigger runs_legacy_compat on runlane.runs;
drop function runlane.tg_runs__legacy_compat();
