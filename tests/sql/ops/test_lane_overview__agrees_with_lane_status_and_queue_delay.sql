-- lane_overview: lane_status's counts and queue_delay_status's warning in one read, by
-- the same rules: for a queue holding every kind of queued run (a wake time in the past,
-- in the future, before the creation; a retry put back; created after the instant;
-- class 1 work; running runs) its rows equal lane_status's and its delayed runs, summed
-- over the lanes, equal queue_delay_status's, at several instants and thresholds.
begin;
select plan(6);

do $$
declare
    t timestamptz := '2026-03-02 12:00+00';
begin
    perform runlane_test.agent('agent-lo' || g, 'org-lo') from generate_series(1, 6) as g;
    -- interactive lane
    perform runlane_test.timed_run('agent-lo1', 'interactive', 'interactive', 'queued', t - interval '10 minutes');
    perform runlane_test.timed_run('agent-lo1', 'interactive', 'interactive', 'queued', t - interval '20 seconds');
    perform runlane_test.timed_run('agent-lo1', 'interactive', 'interactive', 'queued', t + interval '1 minute');
    perform runlane_test.timed_run('agent-lo1', 'interactive', 'retry', 'queued', t - interval '5 minutes',
                                   1000, 1500, p_wake_at => t + interval '1 hour');
    perform runlane_test.timed_run('agent-lo1', 'interactive', 'retry', 'queued', t - interval '8 minutes',
                                   1000, null, p_wake_at => t - interval '2 minutes');
    perform runlane_test.timed_run('agent-lo1', 'interactive', 'retry', 'queued', t - interval '6 minutes', 500);
    perform runlane_test.timed_run('agent-lo1', 'interactive', 'scheduled', 'queued', t - interval '3 minutes');
    perform runlane_test.timed_run('agent-lo1', 'interactive', 'interactive', 'queued', t - interval '4 minutes',
                                   p_wake_at => t - interval '6 minutes');
    perform runlane_test.timed_run('agent-lo1', 'interactive', 'interactive', 'running', t - interval '2 minutes', 100);
    -- background lane, one unfinished run per agent
    perform runlane_test.timed_run('agent-lo2', 'background', 'manual', 'queued', t - interval '7 minutes');
    perform runlane_test.timed_run('agent-lo3', 'background', 'scheduled', 'queued', t - interval '9 minutes');
    perform runlane_test.timed_run('agent-lo4', 'background', 'scheduled', 'queued', t - interval '1 minute',
                                   p_wake_at => t + interval '10 minutes');
    perform runlane_test.timed_run('agent-lo5', 'background', 'manual', 'running', t - interval '1 minute', 10);
    perform runlane_test.timed_run('agent-lo6', 'background', 'manual', 'queued', t - interval '40 seconds',
                                   p_wake_at => t - interval '10 seconds');
    -- finished history counts nowhere
    perform runlane_test.timed_run('agent-lo2', 'background', 'manual', 'succeeded', t - interval '1 hour', 10, 20, 30);
end
$$;

select results_eq(
    $$select lane, queued, due, running, oldest_due_wait_ms, delayed_runs, oldest_delayed_wait_ms
      from runlane.lane_overview('30 seconds', '2026-03-02 12:00+00')$$,
    $$values ('interactive', 8, 6, 1, 600000::bigint, 4, 600000::bigint),
             ('background', 4, 3, 1, 540000::bigint, 1, 420000::bigint)$$,
    'per lane: queued, due (no future wake time, not created later), running, the oldest '
    'due wait, and the class 0 runs due for 30 s or more with the longest such wait'
);

create temp table instants on commit drop as
select
    i.at,
    th.threshold
from
    unnest(array[
        timestamptz '2026-03-02 12:00+00', '2026-03-02 11:57+00', '2026-03-02 12:05+00',
        '2026-03-02 14:00+00'
    ]) as i (at)
cross join unnest(array[interval '0', '5 seconds', '30 seconds', '5 minutes']) as th (threshold);

select is_empty(
    $$select i.at, i.threshold, o.lane
      from instants as i
      cross join lateral runlane.lane_overview(i.threshold, i.at) as o
      left join lateral runlane.lane_status(i.at) as s on s.lane = o.lane
      where row(o.queued, o.due, o.running, o.oldest_due_wait_ms)
            is distinct from row(s.queued, s.due, s.running, s.oldest_due_wait_ms)$$,
    'at every instant and threshold each lane''s counts are lane_status''s'
);

select is_empty(
    $$select i.at, i.threshold
      from instants as i
      cross join lateral (
          select sum(o.delayed_runs)::int as delayed, max(o.oldest_delayed_wait_ms) as oldest
          from runlane.lane_overview(i.threshold, i.at) as o
      ) as o
      cross join lateral runlane.queue_delay_status(i.threshold, i.at) as d
      where row(o.delayed, o.oldest) is distinct from row(d.delayed_runs, d.oldest_wait_ms)$$,
    'at every instant and threshold the lanes'' delayed runs add up to queue_delay_status''s'
);

select throws_ok(
    $$select * from runlane.lane_overview(null)$$,
    '22004', null, 'a null threshold is refused'
);
select throws_ok(
    $$select * from runlane.lane_overview('-1 second')$$,
    '22023', null, 'a negative threshold is refused'
);
select throws_ok(
    $$select * from runlane.lane_overview('30 seconds', 'infinity')$$,
    '22023', null, 'an infinite instant is refused'
);

select * from finish();
rollback;
