-- lane_minutes: per lane and per minute of a recent window, the queue depth and the
-- first-response latency, for the dashboard's charts.
--
-- Guarantees: for each lane (interactive, background) exactly one row per minute of the
-- window, oldest first: n = ceil(p_since / 1 minute) minutes, the last ending at p_now,
-- minute_end = p_now - (n - 1 - i) minutes for i = 0 .. n - 1, also when nothing happened.
--   queued             runs waiting for their FIRST start at instant minute_end: created at
--                      or before it, and neither started nor closed (first_started_at, else
--                      finished_at) by then. A run put back in the queue for a retry is
--                      counted from its creation to its first start only: the series
--                      shows first waits, what a person waits for (lane_status counts
--                      every queued run now).
--   first_responses    runs whose first visible output (first_response_at) falls in the
--                      minute (minute_end - 1 minute, minute_end]; one sample per run;
--   p50_ms, p90_ms, p99_ms  percentile_disc of their run.first_response_ms (origin = the
--                      source message's creation, else the run's, as run_timing and
--                      timing_summary measure it); NULL when the minute has no sample.
-- The window is at least 1 minute and at most 1 day (22023 otherwise, 22004 for a null).
-- Reads only the runs that can matter (unfinished ones and those finished in the window,
-- both through partial indexes), never history before the window. Counts and
-- milliseconds only, no text. A login scoped to an organization (runlane._api_org) counts
-- that organization's runs only.
create or replace function runlane.lane_minutes(
    p_since interval default '1 hour',
    p_now timestamptz default now()
) returns table (
    minute_end timestamptz,
    lane text,
    queued int,
    first_responses int,
    p50_ms bigint,
    p90_ms bigint,
    p99_ms bigint
)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
-- a dashboard read of a few milliseconds: compiling it (JIT, once its estimated cost
-- passes jit_above_cost on a long queue) took 770 ms
set jit = off
-- planned for its instants every call (about a millisecond): the generic plan PL/pgSQL
-- switches to after five calls cannot tell how many runs the window holds, and sorted
-- 100,000 queued runs where a hash takes a few ms (lane_minutes 63 -> 93 ms)
set plan_cache_mode = force_custom_plan
as $$
declare
    v_org text := runlane._api_org();  -- a scoped login counts its organization's runs only
    v_minutes int;
    v_first timestamptz;  -- minute_end of the first minute
begin
    if p_since is null or p_now is null then
        raise exception 'lane_minutes needs a window and an instant' using errcode = '22004';
    end if;
    perform runlane._check_instant('now', p_now);
    if p_since < interval '1 minute' or p_since > interval '1 day' then
        raise exception 'the window must be between 1 minute and 1 day, got %', p_since
            using errcode = '22023';
    end if;
    v_minutes := ceil(extract(epoch from p_since) / 60)::int;
    v_first := p_now - (v_minutes - 1) * interval '1 minute';

    return query
    with unfinished as not materialized (
        -- GUARD: the runs that can matter are unfinished ones (runs_unfinished_lane_idx,
        -- which covers these columns: an index-only scan) and those finished after the
        -- window opened (runs_finished_idx); no other run waited or answered in it. Each
        -- part is read once per use, never materialized.
        select r.lane, r.created_at, coalesce(r.first_started_at, r.finished_at) as left_at
        from runlane.runs as r
        where r.state in ('queued', 'running')
          and (v_org is null or r.org_id = v_org)
    ),
    answered as not materialized (
        -- the unfinished runs that may have answered: only a run that has started can
        -- have a first response (a running run, or a queued retry), found on the covering
        -- index and only those read from the table, one primary-key probe each, not the
        -- whole queue (LIMIT 1 keeps the probe a nested loop: the planner, judging
        -- first_started_at by the finished history, expects most of the queue to match
        -- and would hash the whole table).
        select u.lane, r.created_at, r.first_response_at, r.source_message_id
        from runlane.runs as u
        cross join lateral (
            select x.created_at, x.first_response_at, x.source_message_id
            from runlane.runs as x
            where x.run_id = u.run_id
            limit 1
        ) as r
        where u.state in ('queued', 'running')
          and u.first_started_at is not null
          and (v_org is null or u.org_id = v_org)
    ),
    finished as not materialized (
        select r.lane, r.created_at, r.first_response_at, r.source_message_id,
               coalesce(r.first_started_at, r.finished_at) as left_at
        from runlane.runs as r
        where r.finished_at > v_first - interval '1 minute'
          and r.state not in ('queued', 'running')
          and (v_org is null or r.org_id = v_org)
    ),
    waits as (
        -- the minutes a run was counted in: from the first minute_end at or after its
        -- creation up to (not including) the first at or after it left the queue, as
        -- (lane, first, end) groups: a few hundred rows however long the queue is
        -- (float8 seconds: numeric arithmetic on 100,000 rows cost 150 ms).
        select
            x.lane,
            -- a run created before the window (most of a long queue) is in from minute 0:
            -- a comparison, no arithmetic
            case
                when x.created_at <= v_first then 0
                else ceil(date_part('epoch', x.created_at - v_first) / 60)::int
            end as m_in,
            ceil(date_part('epoch', x.left_at - v_first) / 60)::int as m_out,
            count(*)::int as n
        from (
            select u.lane, u.created_at, u.left_at from unfinished as u
            union all
            select f.lane, f.created_at, f.left_at from finished as f
        ) as x
        where x.created_at <= p_now
          and (x.left_at is null or x.left_at > v_first)
        group by 1, 2, 3
    ),
    deltas as (
        select s.lane, s.m, sum(s.delta)::int as delta
        from (
            select w.lane, w.m_in as m, w.n as delta from waits as w
            union all
            select w.lane, w.m_out, -w.n from waits as w
            where w.m_out is not null and w.m_out < v_minutes
        ) as s
        group by s.lane, s.m
    ),
    samples as (
        select x.lane,
               ceil(date_part('epoch', x.first_response_at - v_first) / 60)::int as m,
               runlane._ms_between(coalesce(msg.created_at, x.created_at), x.first_response_at) as ms
        from (
            select a.lane, a.created_at, a.first_response_at, a.source_message_id
            from answered as a
            union all
            select f.lane, f.created_at, f.first_response_at, f.source_message_id
            from finished as f
        ) as x
        left join runlane.messages as msg on msg.message_id = x.source_message_id
        where x.first_response_at > v_first - interval '1 minute'
          and x.first_response_at <= p_now
    ),
    grid as (
        select l.ord, l.lane, g.m
        from (values (1, 'interactive'), (2, 'background')) as l (ord, lane)
        cross join generate_series(0, v_minutes - 1) as g (m)
    )
    select
        v_first + g.m * interval '1 minute',
        g.lane,
        (sum(coalesce(d.delta, 0)) over (partition by g.lane order by g.m))::int,
        coalesce(p.n, 0),
        p.p50,
        p.p90,
        p.p99
    from grid as g
    left join (
        select
            s.lane, s.m, count(*)::int as n,
            percentile_disc(0.5) within group (order by s.ms) as p50,
            percentile_disc(0.9) within group (order by s.ms) as p90,
            percentile_disc(0.99) within group (order by s.ms) as p99
        from samples as s
        group by s.lane, s.m
    ) as p on p.lane = g.lane and p.m = g.m
    left join deltas as d on d.lane = g.lane and d.m = g.m
    order by g.ord, g.m;
end;
$$;

comment on function runlane.lane_minutes(interval, timestamptz) is
'Per lane and minute of the window ending at p_now: runs waiting for their first start at the '
'minute''s end, and first responses in the minute (count, p50, p90, p99 ms).';

revoke all on function runlane.lane_minutes(interval, timestamptz) from public;
grant execute on function runlane.lane_minutes(interval, timestamptz) to runlane_worker, runlane_api;
