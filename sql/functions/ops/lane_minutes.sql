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
-- p_queued, when given, is each lane's queued runs, every one (interactive, background:
-- lane_overview's queued), read in the same snapshot: minute 0 is then worked out from
-- it instead of counting the queue before the window (the overview counts it once, not
-- twice); 22023 unless two non-negative counts.
-- The window is at least 1 minute and at most 1 day (22023 otherwise, 22004 for a null).
-- Reads only the runs that can matter (unfinished ones and those finished in the window,
-- both through partial indexes), never history before the window; each queued run's
-- index entry at most once (range counts by creation, migration 0024). Counts and
-- milliseconds only, no text. A login scoped to an organization (runlane._api_org) counts
-- that organization's runs only. On a schema Citus distributes it serves one organization
-- (the login's, or runlane.org_id's), whose node it runs on alone; for every organization
-- it refuses (0A000): Citus plans this statement over one node's rows only, and minutes'
-- percentiles of several nodes do not add up.
create or replace function runlane.lane_minutes(
    p_since interval default '1 hour',
    p_now timestamptz default now(),
    p_queued int[] default null
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
    if p_queued is not null and (
        coalesce(array_length(p_queued, 1), 0) <> 2 or array_ndims(p_queued) <> 1
        or array_lower(p_queued, 1) <> 1
        or array_position(p_queued, null) is not null or 0 > any (p_queued)
    ) then
        raise exception 'p_queued must hold two counts (interactive, background), got %', p_queued
            using errcode = '22023',
                  hint = 'Pass lane_overview''s queued column, read in the same snapshot, or NULL.';
    end if;
    if v_org is null and runlane._citus_distributed('runlane.runs') then
        raise exception 'lane_minutes serves one organization on a schema Citus distributes'
            using errcode = '0A000',
                  hint = 'Name it (set runlane.org_id), or call it as a login held to one.';
    end if;
    v_minutes := ceil(extract(epoch from p_since) / 60)::int;
    v_first := p_now - (v_minutes - 1) * interval '1 minute';

    return query
    with lanes (ord, lane) as (
        values (1, 'interactive'), (2, 'background')
    ),
    counted as (
        -- the queued runs created in each later minute of the window. Range counts on an
        -- index of each lane's queued runs by creation (runs_queued_interactive_idx and
        -- runs_queued_background_idx, migration 0024: one key, no other column), so the
        -- queue is read once, by range; the lanes are written out so that the index's
        -- predicate matches. A scoped login's counts read runs_unfinished_lane_idx, which
        -- holds org_id; its claim classes are named so that creation is a range there
        -- (lane, state, claim_class, created_at) and not a filter of the lane's queue.
        select 1 as ord, g.m, (
            select count(*) from runlane.runs as r
            where r.lane = 'interactive' and r.state = 'queued'
              and r.created_at > v_first + (g.m - 1) * interval '1 minute'
              and r.created_at <= v_first + g.m * interval '1 minute'
              and (v_org is null or (r.org_id = v_org and r.claim_class in (0, 1)))
        ) as n
        from generate_series(1, v_minutes - 1) as g (m)
        union all
        select 2, g.m, (
            select count(*) from runlane.runs as r
            where r.lane = 'background' and r.state = 'queued'
              and r.created_at > v_first + (g.m - 1) * interval '1 minute'
              and r.created_at <= v_first + g.m * interval '1 minute'
              and (v_org is null or (r.org_id = v_org and r.claim_class in (0, 1)))
        )
        from generate_series(1, v_minutes - 1) as g (m)
    ),
    queue as (
        -- every queued run, counted, never judged: in each later minute those created in
        -- it, in minute 0 those created at or before its end. Given the lane's queued
        -- runs (p_queued), minute 0 is that total less the later minutes' counts and the
        -- runs created after p_now (a short range), and the queue before the window is
        -- not read again; else it is one more range count.
        select c.ord, c.m, c.n from counted as c
        union all
        select 1, 0, case
            when p_queued is null then (
                select count(*) from runlane.runs as r
                where r.lane = 'interactive' and r.state = 'queued' and r.created_at <= v_first
                  and (v_org is null or (r.org_id = v_org and r.claim_class in (0, 1)))
            )
            else p_queued[1] - (
                select coalesce(sum(c.n), 0) from counted as c where c.ord = 1
            ) - (
                select count(*) from runlane.runs as r
                where r.lane = 'interactive' and r.state = 'queued' and r.created_at > p_now
                  and (v_org is null or (r.org_id = v_org and r.claim_class in (0, 1)))
            )
        end
        union all
        select 2, 0, case
            when p_queued is null then (
                select count(*) from runlane.runs as r
                where r.lane = 'background' and r.state = 'queued' and r.created_at <= v_first
                  and (v_org is null or (r.org_id = v_org and r.claim_class in (0, 1)))
            )
            else p_queued[2] - (
                select coalesce(sum(c.n), 0) from counted as c where c.ord = 2
            ) - (
                select count(*) from runlane.runs as r
                where r.lane = 'background' and r.state = 'queued' and r.created_at > p_now
                  and (v_org is null or (r.org_id = v_org and r.claim_class in (0, 1)))
            )
        end
    ),
    judged as (
        -- the unfinished runs judged one by one, few however long the queue is: the
        -- running ones and the queued ones that are not simply waiting in line (a wake
        -- time, or started before: runs_queued_exceptions_idx, migration 0013).
        -- queued_too marks those the count above holds as waiting since their creation:
        -- taken back out of it, then counted as what they are. A lane is its ordinal from
        -- here on: sorting and grouping by an integer costs a third of what the lane's
        -- text does.
        select case r.lane when 'interactive' then 1 else 2 end as ord,
               r.created_at, coalesce(r.first_started_at, r.finished_at) as left_at,
               r.first_response_at, r.source_message_id, false as queued_too
        from runlane.runs as r
        where r.state = 'running'
          and (v_org is null or r.org_id = v_org)
        union all
        select case r.lane when 'interactive' then 1 else 2 end,
               r.created_at, coalesce(r.first_started_at, r.finished_at),
               r.first_response_at, r.source_message_id, true
        from runlane.runs as r
        where r.state = 'queued'
          and (r.wake_at is not null or r.first_started_at is not null or r.finished_at is not null)
          and (v_org is null or r.org_id = v_org)
    ),
    done as (
        -- the runs finished after the window opened (runs_finished_idx), the bulk of what
        -- is judged: each read once and reduced at once to integers. Its wait (m_in up to
        -- m_out) only when it was counted and spans a minute's end (a grid instant in
        -- [created_at, left_at): date_bin, cheaper than the minutes it compares): one
        -- counted and gone within a minute adds and takes away in the same minute. Its
        -- first response (m_resp; us, the exact microseconds from its origin, the source
        -- message's creation if it has one) only when in the window.
        select d.ord,
               case
                   when d.created_at <= p_now and d.left_at > v_first
                    and date_bin('1 minute', d.left_at - interval '1 microsecond', v_first)
                        >= d.created_at
                   then case
                       when d.created_at <= v_first then 0
                       else ceil(date_part('epoch', d.created_at - v_first) / 60)::int
                   end
               end as m_in,
               case
                   when d.created_at <= p_now and d.left_at > v_first
                    and date_bin('1 minute', d.left_at - interval '1 microsecond', v_first)
                        >= d.created_at
                   then ceil(date_part('epoch', d.left_at - v_first) / 60)::int
               end as m_out,
               case
                   when d.first_response_at > v_first - interval '1 minute'
                    and d.first_response_at <= p_now
                   then date_bin(
                       '1 minute', d.first_response_at - interval '1 microsecond', v_first
                   ) + interval '1 minute'
               end as e_resp,
               case
                   when d.first_response_at > v_first - interval '1 minute'
                    and d.first_response_at <= p_now
                   -- runlane._ms_between's difference as float8 seconds: rounded to
                   -- the microsecond it is exact for any response within 40 years of its
                   -- origin; the numeric extract() cost 2 ms more for 6,000 samples
                   then round(
                       date_part('epoch', d.first_response_at - case
                           when d.source_message_id is null then d.created_at
                           else coalesce(
                               (
                                   select msg.created_at from runlane.messages as msg
                                   where msg.message_id = d.source_message_id
                                     and (v_org is null or msg.org_id = v_org)
                               ),
                               d.created_at
                           )
                       end) * 1000000
                   )::bigint
               end as us
        from (
            select case r.lane when 'interactive' then 1 else 2 end as ord,
                   r.created_at, coalesce(r.first_started_at, r.finished_at) as left_at,
                   r.first_response_at, r.source_message_id
            from runlane.runs as r
            where r.finished_at > v_first - interval '1 minute'
              and r.state not in ('queued', 'running')
              and (v_org is null or r.org_id = v_org)
        ) as d
    ),
    waits as (
        -- the judged runs as (lane, first, end) groups: the minutes a run was counted in
        -- run from the first minute_end at or after its creation up to (not including)
        -- the first at or after it left the queue
        select
            j.ord,
            case
                when j.created_at <= v_first then 0
                else ceil(date_part('epoch', j.created_at - v_first) / 60)::int
            end as m_in,
            ceil(date_part('epoch', j.left_at - v_first) / 60)::int as m_out,
            j.queued_too,
            (j.left_at is null or j.left_at > v_first) as counted,
            count(*)::int as n
        from judged as j
        where j.created_at <= p_now
        group by 1, 2, 3, 4, 5
        union all
        select o.ord, o.m_in, o.m_out, false, true, count(*)::int
        from done as o
        where o.m_in is not null
        group by 1, 2, 3
    ),
    deltas as (
        select s.ord, s.m, sum(s.delta)::int as delta
        from (
            select q.ord, q.m, q.n as delta from queue as q
            union all
            -- a queued one the count holds as waiting since its creation: taken out
            select w.ord, w.m_in, -w.n from waits as w where w.queued_too
            union all
            -- and counted as what it is: from its creation until it left the queue
            select w.ord, w.m_in, w.n from waits as w where w.counted
            union all
            select w.ord, w.m_out, -w.n from waits as w
            where w.counted and w.m_out < v_minutes
        ) as s
        group by s.ord, s.m
    ),
    samples as (
        -- first responses: of finished runs as reduced above, of the judged unfinished
        -- ones (a running run, or a queued one that started before) as read
        select o.ord, o.e_resp as e,
               -- milliseconds rounded half away from zero, as round() of a numeric
               case when o.us >= 0 then (o.us + 500) / 1000 else (o.us - 500) / 1000 end as ms
        from done as o
        where o.e_resp is not null
        union all
        select j.ord,
               date_bin('1 minute', j.first_response_at - interval '1 microsecond', v_first)
               + interval '1 minute',
               round(
                   extract(epoch from (j.first_response_at - case
                       when j.source_message_id is null then j.created_at
                       else coalesce(
                           (
                               select msg.created_at from runlane.messages as msg
                               where msg.message_id = j.source_message_id
                                 and (v_org is null or msg.org_id = v_org)
                           ),
                           j.created_at
                       )
                   end))
                   * 1000
               )::bigint
        from judged as j
        where j.first_response_at > v_first - interval '1 minute'
          and j.first_response_at <= p_now
    ),
    grid as (
        select l.ord, l.lane, g.m, v_first + g.m * interval '1 minute' as e
        from lanes as l
        cross join generate_series(0, v_minutes - 1) as g (m)
    )
    select
        g.e,
        g.lane,
        (sum(coalesce(d.delta, 0)) over (partition by g.ord order by g.m))::int,
        coalesce(p.n, 0),
        p.p50,
        p.p90,
        p.p99
    from grid as g
    left join (
        -- the three percentiles as one aggregate: each sample's milliseconds are worked
        -- out once, not once per percentile (5 of 35 ms with 6,000 samples)
        select a.ord, a.e, a.n, a.ps[1] as p50, a.ps[2] as p90, a.ps[3] as p99
        from (
            select
                s.ord, s.e, count(*)::int as n,
                percentile_disc(array[0.5, 0.9, 0.99]) within group (order by s.ms) as ps
            from samples as s
            group by s.ord, s.e
        ) as a
    ) as p on p.ord = g.ord and p.e = g.e
    left join deltas as d on d.ord = g.ord and d.m = g.m
    order by g.ord, g.m;
end;
$$;

comment on function runlane.lane_minutes(interval, timestamptz, int[]) is
'Per lane and minute of the window ending at p_now: runs waiting for their first start at the '
'minute''s end, and first responses in the minute (count, p50, p90, p99 ms).';

revoke all on function runlane.lane_minutes(interval, timestamptz, int[]) from public;
grant execute on function runlane.lane_minutes(interval, timestamptz, int[]) to runlane_worker, runlane_api;
