-- lane_minutes given lane_overview's queued counts (p_queued, read in the same snapshot)
-- works minute 0 out from them instead of counting the queue before the window: the
-- overview counts the queue once, not twice. Every row is the same as without them, on
-- a queue with every kind of run (waiting since before the window, created in it and
-- after p_now, wake times, retries, running, finished, canceled), and the entries before
-- the window are not read.
begin;
select plan(8);

do $$
declare
    t timestamptz := '2026-03-02 12:00+00';
begin
    perform runlane_test.agent('agent-lm' || g, 'org-lm') from generate_series(1, 8) as g;
    perform runlane_test.timed_run('agent-lm1', 'interactive', 'interactive', 'queued',
                                   t - g * interval '97 seconds')
    from generate_series(1, 60) as g;  -- before and across the window
    perform runlane_test.timed_run('agent-lm1', 'interactive', 'interactive', 'queued', t + interval '1 minute');
    perform runlane_test.timed_run('agent-lm1', 'interactive', 'interactive', 'queued', t - interval '30 minutes',
                                   p_wake_at => t + interval '1 hour');
    perform runlane_test.timed_run('agent-lm1', 'interactive', 'retry', 'queued', t - interval '8 minutes',
                                   60000, 61000, p_wake_at => t - interval '2 minutes');
    perform runlane_test.timed_run('agent-lm1', 'interactive', 'retry', 'queued', t - interval '3 hours', 5000);
    perform runlane_test.timed_run('agent-lm1', 'interactive', 'scheduled', 'queued', t - interval '3 minutes');
    perform runlane_test.timed_run('agent-lm1', 'interactive', 'interactive', 'running', t - interval '12 minutes', 300000, 300500);
    perform runlane_test.timed_run('agent-lm1', 'interactive', 'interactive', 'running', t - interval '2 hours', 1000);
    perform runlane_test.timed_run('agent-lm1', 'interactive', 'interactive', 'succeeded',
                                   t - g * interval '71 seconds', 20000 + g * 1000, 21000 + g * 1000, 40000 + g * 1000)
    from generate_series(1, 40) as g;
    perform runlane_test.timed_run('agent-lm1', 'interactive', 'interactive', 'canceled', t - interval '9 minutes',
                                   null, null, 240000);
    perform runlane_test.timed_run('agent-lm2', 'background', 'manual', 'queued', t - interval '7 minutes');
    perform runlane_test.timed_run('agent-lm3', 'background', 'scheduled', 'queued', t - interval '90 minutes');
    perform runlane_test.timed_run('agent-lm4', 'background', 'scheduled', 'running', t - interval '20 minutes', 600000);
    perform runlane_test.timed_run('agent-lm5', 'background', 'manual', 'queued', t - interval '40 seconds',
                                   p_wake_at => t - interval '10 seconds');
    perform runlane_test.timed_run('agent-lm6', 'background', 'scheduled', 'failed', t - interval '25 minutes',
                                   120000, 130000, 900000);
end
$$;

create temp table queued_now on commit drop as
select array_agg(o.queued order by o.lane = 'background') as q
from runlane.lane_overview('30 seconds', '2026-03-02 12:00+00') as o;

select set_eq(
    $$select * from runlane.lane_minutes('1 hour', '2026-03-02 12:00+00',
                                         (select q.q from queued_now as q))$$,
    $$select * from runlane.lane_minutes('1 hour', '2026-03-02 12:00+00')$$,
    'every row is the same given the lanes'' queued counts'
);

select set_eq(
    $$select * from runlane.lane_minutes('10 minutes', '2026-03-02 11:30:30+00',
                                         (select q.q from queued_now as q))$$,
    $$select * from runlane.lane_minutes('10 minutes', '2026-03-02 11:30:30+00')$$,
    'also at an instant in the past (runs created after it are not counted)'
);

select set_eq(
    $$select * from runlane.lane_minutes('1 minute', '2026-03-02 12:00+00',
                                         (select q.q from queued_now as q))$$,
    $$select * from runlane.lane_minutes('1 minute', '2026-03-02 12:00+00')$$,
    'and for a window of one minute (minute 0 only)'
);

-- what it reads of runs (entries of its indexes, rows of its scans), with 3,000 more chat
-- runs queued before the window; indexes rebuilt and the planner told what a vacuumed
-- table shows, as in test_lane_minutes__queue_read_once.sql (rolled back)
insert into runlane.runs (org_id, agent_id, lane, trigger, thread_id, prompt, model, created_at)
select
    'org-lm' as org_id,
    'agent-lm1' as agent_id,
    'interactive' as lane,
    'interactive' as trigger,
    't-' || g as thread_id,
    'x' as prompt,
    'noop' as model,
    timestamptz '2026-03-02 11:00+00' - g * interval '1 second' as created_at
from generate_series(1, 3000) as g;
reindex table runlane.runs;
analyze runlane.runs;
update pg_catalog.pg_class
set relallvisible = relpages
where oid = 'runlane.runs'::regclass;

create temp view runs_read as
select
    pg_stat_get_xact_tuples_returned('runlane.runs'::regclass)
    + (
        select sum(pg_stat_get_xact_tuples_returned(i.indexrelid))
        from pg_catalog.pg_index as i
        where i.indrelid = 'runlane.runs'::regclass
    ) as entries;

create temp table queued_now2 on commit drop as
select array_agg(o.queued order by o.lane = 'background') as q
from runlane.lane_overview('30 seconds', '2026-03-02 12:00+00') as o;

create temp table marks (step int, entries numeric) on commit drop;
insert into marks
select
    0 as step,
    r.entries
from runs_read as r;
create temp table minutes_counted on commit drop as
select * from runlane.lane_minutes('10 minutes', '2026-03-02 12:00+00');
insert into marks
select
    1 as step,
    r.entries
from runs_read as r;
create temp table minutes_given on commit drop as
select * from runlane.lane_minutes(
    '10 minutes', '2026-03-02 12:00+00', (select q.q from queued_now2 as q)
);
insert into marks
select
    2 as step,
    r.entries
from runs_read as r;

select cmp_ok(
    (select sum(case m.step when 2 then m.entries when 1 then -m.entries end) from marks as m)
    + (
        select count(*) from runlane.runs as r
        where r.state = 'queued' and r.wake_at is null and r.created_at <= '2026-03-02 11:51+00'
    ),
    '<=',
    (select sum(case m.step when 1 then m.entries when 0 then -m.entries end) from marks as m) + 2,
    'the queued runs created before the window are not read (3,000 and more fewer entries)'
);

select set_eq(
    'select * from minutes_given', 'select * from minutes_counted',
    'and the rows are the same'
);

select throws_ok(
    $$select * from runlane.lane_minutes('1 hour', now(), array[1])$$,
    '22023', null, 'one count is refused'
);

select throws_ok(
    $$select * from runlane.lane_minutes('1 hour', now(), array[1, null])$$,
    '22023', null, 'a null count is refused'
);

select throws_ok(
    $$select * from runlane.lane_minutes('1 hour', now(), array[-1, 0])$$,
    '22023', null, 'a negative count is refused'
);

select * from finish();
rollback;
