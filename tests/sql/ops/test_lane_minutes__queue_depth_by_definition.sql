-- lane_minutes counts the queue without judging each waiting run (a range count per
-- minute of creation) and judges only the runs that are not simply waiting in line: its
-- queued column must still be the definition, counted run by run: at each minute_end M,
-- the runs of the lane created at or before M that had not left the queue by M (first
-- start, else close). A queue with every kind of run: waiting since before the window,
-- created in it and after p_now, with wake times, retries started before or in the
-- window, running, finished in and before the window, canceled without a start.
begin;
select plan(3);

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

create temp table expected on commit drop as
select
    m.minute_end,
    l.lane,
    (
        select count(*)::int from runlane.runs as r
        where
            r.lane = l.lane
            and r.created_at <= m.minute_end
            and (
                coalesce(r.first_started_at, r.finished_at) is null
                or coalesce(r.first_started_at, r.finished_at) > m.minute_end
            )
    ) as queued
from
    generate_series(
        timestamptz '2026-03-02 11:01+00', '2026-03-02 12:00+00', interval '1 minute'
    ) as m (minute_end)
cross join (values ('interactive'), ('background')) as l (lane);

select is(
    (select count(*)::int from runlane.lane_minutes('1 hour', '2026-03-02 12:00+00')),
    120,
    'one row per lane and minute'
);

select set_eq(
    $$select minute_end, lane, queued from runlane.lane_minutes('1 hour', '2026-03-02 12:00+00')$$,
    $$select minute_end, lane, queued from expected$$,
    'every minute''s queued is the definition counted run by run'
);

select set_eq(
    $$select minute_end, lane, queued
      from runlane.lane_minutes('10 minutes', '2026-03-02 11:30:30+00')$$,
    $$select m.minute_end, l.lane, (
          select count(*)::int from runlane.runs as r
          where r.lane = l.lane and r.created_at <= m.minute_end
            and (coalesce(r.first_started_at, r.finished_at) is null
                 or coalesce(r.first_started_at, r.finished_at) > m.minute_end)
      )
      from generate_series(timestamptz '2026-03-02 11:21:30+00', '2026-03-02 11:30:30+00',
                           interval '1 minute') as m (minute_end)
      cross join (values ('interactive'), ('background')) as l (lane)$$,
    'also at an instant in the past (runs created after it are not counted)'
);

select * from finish();
rollback;
