-- lane_minutes reads each queued run's index entry once however long the queue is: the
-- runs created before the window as one range count per lane, those in it as one range
-- per minute, on each lane's index of queued runs by creation (migration 0024). Counting
-- every unfinished run and then the window's runs again read the window's part of the
-- queue twice (bench/dashboard_queries.py, 100,000 queued runs). The counts stay exact.
begin;
select plan(4);

do $$
begin
    perform runlane_test.agent('agent-qo' || g, 'org-qo') from generate_series(1, 40) as g;
end
$$;

-- 3,000 chat runs queued over the last two hours (half of them before the window), and 40
-- background runs over the same two hours, one per agent
insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt, model, created_at)
select
    'org-qo' as org_id,
    'agent-qo1' as agent_id,
    'interactive' as lane,
    'interactive' as trigger,
    't-' || g as thread_id,
    'x' as prompt,
    'noop' as model,
    timestamptz '2026-03-02 12:00+00' - g * interval '2.4 seconds' as created_at
from generate_series(0, 2999) as g;
insert into runlane.runs (org_id, agent_id, lane, trigger, prompt, model, created_at)
select
    'org-qo' as org_id,
    'agent-qo' || g as agent_id,
    'background' as lane,
    'scheduled' as trigger,
    'x' as prompt,
    'noop' as model,
    timestamptz '2026-03-02 12:00+00' - g * interval '3 minutes' as created_at
from generate_series(1, 40) as g;

-- as in test_lane_status__queue_read_on_its_index.sql: indexes rebuilt without the dead
-- entries of earlier tests and the planner told what a vacuumed table shows (rolled back)
reindex table runlane.runs;
analyze runlane.runs;
update pg_catalog.pg_class
set relallvisible = relpages
where oid = 'runlane.runs'::regclass;

-- what lane_minutes reads of runs: the entries of its indexes and the rows of its
-- sequential scans (a small table may be read whole)
create temp view runs_read as
select
    pg_stat_get_xact_tuples_returned('runlane.runs'::regclass)
    + (
        select sum(pg_stat_get_xact_tuples_returned(i.indexrelid))
        from pg_catalog.pg_index as i
        where i.indrelid = 'runlane.runs'::regclass
    ) as entries;

create temp table entries_before on commit drop as
select r.entries from runs_read as r;

create temp table minutes on commit drop as
select
    m.minute_end,
    m.lane,
    m.queued
from runlane.lane_minutes('1 hour', '2026-03-02 12:00+00') as m;

select is(
    (select m.queued from minutes as m where m.lane = 'interactive' and m.minute_end = '2026-03-02 12:00+00'),
    3000,
    'lane_minutes: every chat run waits at the last minute''s end'
);

select is(
    (select m.queued from minutes as m where m.lane = 'interactive' and m.minute_end = '2026-03-02 11:01+00'),
    1525,
    'lane_minutes: the chat runs created at or before the first minute''s end'
);

select is(
    (select m.queued from minutes as m where m.lane = 'background' and m.minute_end = '2026-03-02 11:01+00'),
    21,
    'lane_minutes: the background runs created at or before the first minute''s end'
);

select cmp_ok(
    (select r.entries from runs_read as r) - (select b.entries from entries_before as b),
    '<=',
    3040::numeric,
    'lane_minutes reads each queued run once (3,040 queued runs)'
);

select * from finish();
rollback;
