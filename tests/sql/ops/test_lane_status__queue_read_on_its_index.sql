-- The overview's reads of the queue (lane_status, lane_minutes; queue_delay_status on an
-- index of queued runs) go through runs_unfinished_lane_idx, the partial index on unfinished runs that holds
-- every column they read, not through the table: with 100,000 queued runs each visited
-- every queued run's table page (bench/dashboard_queries.py: the overview took 164 ms).
-- lane_minutes reads from the table, of the unfinished runs, only those it judges one by
-- one (running, or queued after a start: the only ones that can have answered), never
-- by a primary-key probe per run. The counts stay exact.
begin;
select plan(8);

do $$
begin
    perform runlane_test.agent('agent-q', 'org-q');
end
$$;

-- 2,000 chat runs queued over the last hour, 30,000 finished a day ago (the queue a small
-- part of the table, as it is), one running run
-- that answered at 11:59:50 and one queued retry (started, answered at 11:58:40, put back).
insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt, model, created_at)
select
    'org-q' as org_id,
    'agent-q' as agent_id,
    'interactive' as lane,
    'interactive' as trigger,
    't-' || g as thread_id,
    'x' as prompt,
    'noop' as model,
    timestamptz '2026-03-02 12:00+00' - g * interval '1.5 seconds' as created_at
from generate_series(1, 2000) as g;
insert into runlane.runs (
    org_id, agent_id, lane, trigger, state, prompt, model, created_at, first_started_at,
    first_response_at, finished_at
)
select
    'org-q' as org_id,
    'agent-q' as agent_id,
    'interactive' as lane,
    'interactive' as trigger,
    'succeeded' as state,
    'x' as prompt,
    'noop' as model,
    timestamptz '2026-03-01 12:00+00' - g * interval '1 second' as created_at,
    timestamptz '2026-03-01 12:00+00' - g * interval '1 second' as first_started_at,
    timestamptz '2026-03-01 12:00+00' - g * interval '1 second' as first_response_at,
    timestamptz '2026-03-01 12:00+00' - g * interval '1 second' as finished_at
from generate_series(1, 30000) as g;
do $$
begin
    perform runlane_test.timed_run('agent-q', 'interactive', 'interactive', 'running',
                                   '2026-03-02 11:59:40+00', 5000, 10000);
    perform runlane_test.timed_run('agent-q', 'interactive', 'retry', 'queued',
                                   '2026-03-02 11:58:30+00', 5000, 10000);
end
$$;

-- Earlier tests in this database inserted queued runs and rolled back: their dead entries
-- stay in the partial indexes of unfinished runs until a vacuum, and the wider the index
-- (this one carries the dashboard's columns) the more pages they cost it; once they
-- tipped the planner to runs_unfinished_agent_idx. Rebuilt here (rolled back with the
-- test), the indexes hold what a vacuumed table's would.
reindex table runlane.runs;
analyze runlane.runs;
-- Inside a test's transaction no page is all-visible (VACUUM cannot run in one), so the
-- planner would price an index-only scan as visiting every page, as it does on a table
-- vacuum has not reached. The planner reads that fraction from pg_class: here it is told
-- what a vacuumed table shows (rolled back with the test), and the question is which
-- index serves the queue (runs_unfinished_agent_idx, with the same predicate but not the
-- columns, was the one before).
update pg_catalog.pg_class
set relallvisible = relpages
where oid = 'runlane.runs'::regclass;

create temp table before_read on commit drop as
select pg_stat_get_xact_numscans('runlane.runs_unfinished_lane_idx'::regclass) as scans;

select is(
    (
        select row(s.queued, s.due, s.running)::text from runlane.lane_status('2026-03-02 12:00+00') as s
        where s.lane = 'interactive'
    ),
    row(2001, 2001, 1)::text,
    'lane_status counts every queued and running run'
);

select cmp_ok(
    pg_stat_get_xact_numscans('runlane.runs_unfinished_lane_idx'::regclass)
    - (select b.scans from before_read as b),
    '>',
    0::bigint,
    'lane_status reads the queue on runs_unfinished_lane_idx'
);

-- queue_delay_status (the maintenance pass's warning; the dashboard reads lane_overview
-- since migration 0013) may take either index of queued runs, runs_unfinished_lane_idx or
-- runs_handler_claim_order_idx, as the table's statistics tip it (dead rows that earlier tests in
-- the same database left behind did, once): what it must never do is read the table.
update before_read
set scans = pg_stat_get_xact_numscans('runlane.runs'::regclass);

select is(
    (select d.delayed_runs from runlane.queue_delay_status('30 seconds', '2026-03-02 12:00+00') as d),
    1982,
    'queue_delay_status counts the runs due for 30 s or more (the retry among them)'
);

select is(
    pg_stat_get_xact_numscans('runlane.runs'::regclass) - (select b.scans from before_read as b),
    0::bigint,
    'queue_delay_status reads the queue on an index, never a sequential scan of runs'
);

update before_read
set scans = pg_stat_get_xact_numscans('runlane.runs_unfinished_lane_idx'::regclass);

create temp table before_minutes on commit drop as
select pg_stat_get_xact_tuples_returned('runlane.runs_pkey'::regclass) as pkey_entries;

create temp table minutes on commit drop as
select
    m.minute_end,
    m.queued,
    m.first_responses
from runlane.lane_minutes('5 minutes', '2026-03-02 12:00+00') as m
where m.lane = 'interactive';

select is(
    (select m.queued from minutes as m where m.minute_end = '2026-03-02 12:00+00'),
    2000,
    'lane_minutes: the runs still waiting for their first start at the last minute''s end'
);

select is(
    (select m.first_responses from minutes as m where m.minute_end = '2026-03-02 12:00+00'),
    1,
    'lane_minutes: the running run''s first response is in its minute'
);

select is(
    (select m.first_responses from minutes as m where m.minute_end = '2026-03-02 11:59+00'),
    1,
    'lane_minutes: the queued retry''s first response is in its minute'
);

select cmp_ok(
    pg_stat_get_xact_tuples_returned('runlane.runs_pkey'::regclass)
    - (select b.pkey_entries from before_minutes as b),
    '<=',
    2::bigint,
    'lane_minutes reads from the table only the two unfinished runs that have started'
);

select * from finish();
rollback;
