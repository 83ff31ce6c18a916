-- lane_overview: lane_status and the queue-delay warning in one read, for the dashboard's
-- overview and its one-second live round.
--
-- Guarantees: exactly one row per lane (interactive, background), also when empty, with
-- the columns of lane_status (queued, due, running, oldest_due_wait_ms: the same rule)
-- and the lane's part of queue_delay_status's warning:
--   delayed_runs            interactive-class runs (claim_class 0) of the lane that are
--                           queued and have been due for at least p_threshold, measured
--                           from the later of creation and wake time (runlane._queue_delay's
--                           rule); summed over the lanes it is queue_delay_status's count;
--   oldest_delayed_wait_ms  the longest such wait in the lane, or NULL (the largest over
--                           the lanes is queue_delay_status's oldest_wait_ms).
-- 22004 for a null argument, 22023 for a threshold outside 0 .. 1 year or an infinite
-- instant. Read-only; counts only, no text. A login scoped to an organization
-- (runlane._api_org) counts that organization's runs only.
--
-- Cost: the queue is counted, never grouped or judged run by run: each lane's queued runs
-- on an index of them by creation (migration 0024), then short ranges of runs_unfinished_lane_idx
-- (lane, state, claim_class, created_at): the running runs, the class 1 runs (scheduled,
-- reaction), those created after the instant or the bound, and the first entry of each
-- class. Only the queued runs with a wake time (a retry's backoff, a delayed start: few)
-- are judged one by one, read on runs_queued_exceptions_idx (migration 0013). With
-- 100,000 queued runs lane_status and queue_delay_status each judged every run (22 +
-- 17 ms, bench/dashboard_queries.py).
create or replace function runlane.lane_overview(
    p_threshold interval default '30 seconds',
    p_now timestamptz default now()
) returns table (
    lane text,
    queued int,
    due int,
    running int,
    oldest_due_wait_ms bigint,
    delayed_runs int,
    oldest_delayed_wait_ms bigint
)
language plpgsql
stable
security definer
set search_path = pg_catalog, pg_temp
-- a read of milliseconds, asked every second while someone watches: never JIT-compiled
set jit = off
-- planned for its arguments every call: with the scope known (NULL for an unscoped login)
-- its test folds away instead of being judged for every counted entry
set plan_cache_mode = force_custom_plan
as $$
declare
    v_org text := runlane._api_org();  -- a scoped login counts its organization's runs only
    v_bound timestamptz;  -- a run due at or before this instant has waited p_threshold
    v_lane text;
    v_interactive bigint;  -- queued runs of each lane
    v_background bigint;
    v_class0 bigint;  -- queued runs of claim class 0 / 1
    v_class1 bigint;
    v_running bigint;
    v_late bigint;  -- queued runs created after p_now (an instant in the past)
    v_recent0 bigint;  -- queued runs of class 0 created after v_bound
    v_first timestamptz;  -- the oldest creation of a queued run without a wake time
    v_first0 timestamptz;  -- the same among class 0
    w record;  -- what the runs with a wake time add
begin
    if p_threshold is null or p_now is null then
        raise exception 'lane_overview needs a threshold and an instant' using errcode = '22004';
    end if;
    if p_threshold < interval '0' or p_threshold > interval '1 year' then
        raise exception 'the threshold must be between 0 and 1 year, got %', p_threshold
            using errcode = '22023';
    end if;
    perform runlane._check_instant('now', p_now);
    v_bound := p_now - p_threshold;

    -- every queued run, counted per lane on an index that holds the lane's queued runs
    -- only, by creation and nothing else (runs_queued_interactive_idx and
    -- runs_queued_background_idx, migration 0024), without a sort or a group: the
    -- cheapest read of a long queue
    select
        (
            select count(*) from runlane.runs as r
            where r.lane = 'interactive' and r.state = 'queued'
              and (v_org is null or r.org_id = v_org)
        ),
        (
            select count(*) from runlane.runs as r
            where r.lane = 'background' and r.state = 'queued'
              and (v_org is null or r.org_id = v_org)
        )
    into v_interactive, v_background;

    -- the rest are short ranges and first entries, planned once per session: planning
    -- them for every call, four statements with a dozen subqueries, took a fifth of the
    -- call (3 of 14 ms with 100,000 queued runs). Their scope test stays a filter on
    -- entries of ranges that are short however long the queue is. The setting lasts
    -- until this call returns (the SET clause above restores it). Not on a schema Citus
    -- distributes: there only a plan for the call's organization reaches its node alone,
    -- and a generic plan of these subqueries is no plan Citus can make.
    if not runlane._citus_distributed('runlane.runs') then
        perform pg_catalog.set_config('plan_cache_mode', 'force_generic_plan', true);
    end if;

    foreach v_lane in array array['interactive', 'background'] loop
        -- the rest, ranges of runs_unfinished_lane_idx that are short however long the
        -- queue is (the running runs, class 1: scheduled and reaction runs, those created
        -- after the instant or the bound), or first entries
        select
            (
                select count(*) from runlane.runs as r
                where r.lane = v_lane and r.state = 'queued' and r.claim_class = 1
                  and (v_org is null or r.org_id = v_org)
            ),
            (
                select count(*) from runlane.runs as r
                where r.lane = v_lane and r.state = 'running'
                  and (v_org is null or r.org_id = v_org)
            ),
            -- the ends of the ranges: runs created after the instant or the bound (few)
            (
                select count(*) from runlane.runs as r
                where r.lane = v_lane and r.state = 'queued' and r.claim_class in (0, 1)
                  and r.created_at > p_now
                  and r.wake_at is null
                  and (v_org is null or r.org_id = v_org)
            ),
            (
                select count(*) from runlane.runs as r
                where r.lane = v_lane and r.state = 'queued' and r.claim_class = 0
                  and r.created_at > v_bound
                  and r.wake_at is null
                  and (v_org is null or r.org_id = v_org)
            ),
            -- the oldest run without a wake time of each class (the first entry of each)
            (
                select r.created_at from runlane.runs as r
                where r.lane = v_lane and r.state = 'queued' and r.claim_class = 1
                  and r.wake_at is null
                  and (v_org is null or r.org_id = v_org)
                order by r.created_at
                limit 1
            ),
            (
                select r.created_at from runlane.runs as r
                where r.lane = v_lane and r.state = 'queued' and r.claim_class = 0
                  and r.wake_at is null
                  and (v_org is null or r.org_id = v_org)
                order by r.created_at
                limit 1
            )
        into v_class1, v_running, v_late, v_recent0, v_first, v_first0;
        v_first := least(v_first0, v_first);  -- least() skips a null: either class may be empty
        v_class0 := case v_lane when 'interactive' then v_interactive else v_background end
                    - v_class1;

        -- judged one by one: the queued runs with a wake time (greatest() and coalesce()
        -- as lane_status and _queue_delay define due and waited)
        select
            count(*) filter (where coalesce(r.wake_at, r.created_at) <= p_now) as due,
            min(greatest(r.created_at, r.wake_at)) filter (
                where coalesce(r.wake_at, r.created_at) <= p_now
            ) as oldest_due,
            count(*) filter (
                where r.claim_class = 0 and greatest(r.created_at, r.wake_at) <= v_bound
            ) as delayed,
            min(greatest(r.created_at, r.wake_at)) filter (
                where r.claim_class = 0 and greatest(r.created_at, r.wake_at) <= v_bound
            ) as oldest_delayed,
            count(*) filter (where r.claim_class = 0) as class0,
            count(*) as waking
        into w
        from runlane.runs as r
        where r.lane = v_lane and r.state = 'queued'
          and r.wake_at is not null
          and (v_org is null or r.org_id = v_org);

        -- without a wake time a run is due from its creation: every queued one but those
        -- created after p_now (v_late); delayed when created at or before v_bound
        lane := v_lane;
        queued := (v_class0 + v_class1)::int;
        running := v_running::int;
        due := (v_class0 + v_class1 - w.waking - v_late + w.due)::int;
        oldest_due_wait_ms := runlane._ms_between(
            least(case when v_first <= p_now then v_first end, w.oldest_due), p_now
        );
        delayed_runs := (v_class0 - w.class0 - v_recent0 + w.delayed)::int;
        oldest_delayed_wait_ms := runlane._ms_between(
            least(case when v_first0 <= v_bound then v_first0 end, w.oldest_delayed), p_now
        );
        return next;
    end loop;
end;
$$;

comment on function runlane.lane_overview(interval, timestamptz) is
'Per lane: lane_status''s counts and oldest due wait, and the lane''s part of the '
'queue-delay warning (interactive-class runs due for at least p_threshold, oldest wait).';

revoke all on function runlane.lane_overview(interval, timestamptz) from public;
grant execute on function runlane.lane_overview(interval, timestamptz) to runlane_worker, runlane_api;
