-- failure_minutes: per minute of a recent window, the runs that failed and the runs
-- reap_stale took from a silent worker, for the dashboard's chart beside first response.
--
-- Guarantees: exactly one row per minute of the window, oldest first, on lane_minutes'
-- grid: n = ceil(p_since / 1 minute) minutes, minute_end = p_now - (n - 1 - i) minutes
-- for i = 0 .. n - 1, also when nothing happened.
--   failed     runs that ended failed with finished_at in (minute_end - 1 minute,
--              minute_end], either lane;
--   reaped     runs reap_stale took in that minute: put back in the queue (a
--              run.lease_expired journal row) or closed failed / stale.
-- The window is at least 1 minute and at most 1 day (22023 otherwise, 22004 for a null).
-- Reads the runs finished in the window (runs_finished_idx) and the lease_expired journal
-- rows of the window (run_events_lease_expired_idx), never older history. Counts only.
-- A login scoped to an organization (runlane._api_org) counts that organization's runs.
create or replace function runlane.failure_minutes(
    p_since interval default '1 hour',
    p_now timestamptz default now()
) returns table (
    minute_end timestamptz,
    failed int,
    reaped int
)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
set jit = off
as $$
declare
    v_org text := runlane._api_org();  -- a scoped login counts its organization's runs only
    v_minutes int;
    v_first timestamptz;  -- minute_end of the first minute
    v_requeued_minutes int[];  -- the minutes with runs reap_stale requeued, and how many
    v_requeued int[];
begin
    if p_since is null or p_now is null then
        raise exception 'failure_minutes needs a window and an instant' using errcode = '22004';
    end if;
    perform runlane._check_instant('now', p_now);
    if p_since < interval '1 minute' or p_since > interval '1 day' then
        raise exception 'the window must be between 1 minute and 1 day, got %', p_since
            using errcode = '22023';
    end if;
    v_minutes := ceil(extract(epoch from p_since) / 60)::int;
    v_first := p_now - (v_minutes - 1) * interval '1 minute';

    -- STEP: per minute, the runs reap_stale requeued (their run.lease_expired rows), of the
    -- login's organization as the journal names it (on Citus: its node only).
    if runlane._rows_name_their_org() then
        select array_agg(q.m), array_agg(q.n) into v_requeued_minutes, v_requeued
        from (
            select ceil(date_part('epoch', e.created_at - v_first) / 60)::int as m, count(*)::int as n
            from runlane.run_events as e
            where e.event = 'run.lease_expired'
              and e.created_at > v_first - interval '1 minute'
              and e.created_at <= p_now
              and (v_org is null or e.org_id = v_org)
            group by 1
        ) as q;
    else  -- (before 0027 the journal names no organization: its run does)
        select array_agg(q.m), array_agg(q.n) into v_requeued_minutes, v_requeued
        from (
            select ceil(date_part('epoch', e.created_at - v_first) / 60)::int as m, count(*)::int as n
            from runlane.run_events as e
            where e.event = 'run.lease_expired'
              and e.created_at > v_first - interval '1 minute'
              and e.created_at <= p_now
              and (
                  v_org is null
                  or exists (
                      select 1 from runlane.runs as r
                      where r.run_id = e.run_id and r.org_id = v_org
                  )
              )
            group by 1
        ) as q;
    end if;

    return query
    with ended as (
        select
            ceil(date_part('epoch', r.finished_at - v_first) / 60)::int as m,
            count(*)::int as failed,
            count(*) filter (where r.reason = 'stale')::int as reaped
        from runlane.runs as r
        where r.finished_at > v_first - interval '1 minute'
          and r.finished_at <= p_now
          and r.state = 'failed'
          and (v_org is null or r.org_id = v_org)
        group by 1
    )
    select
        v_first + g.m * interval '1 minute',
        coalesce(d.failed, 0),
        coalesce(d.reaped, 0) + coalesce(q.n, 0)
    from generate_series(0, v_minutes - 1) as g (m)
    left join ended as d on d.m = g.m
    left join unnest(v_requeued_minutes, v_requeued) as q (m, n) on q.m = g.m
    order by g.m;
end;
$$;

comment on function runlane.failure_minutes(interval, timestamptz) is
'Per minute of the window ending at p_now: runs that failed, and runs reap_stale took back '
'from a silent worker (requeued or closed failed / stale).';

revoke all on function runlane.failure_minutes(interval, timestamptz) from public;
grant execute on function runlane.failure_minutes(interval, timestamptz) to runlane_worker, runlane_api;
