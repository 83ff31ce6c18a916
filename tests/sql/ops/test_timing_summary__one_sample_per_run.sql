-- timing_summary: one sample per run per measure from its own record, percentiles over
-- the window, trigger filter, and refusals of bad arguments.
begin;
select plan(10);

do $$ begin perform runlane_test.agent('agent-o', 'org-o'); end $$;
do $$ begin perform runlane_test.timed_runs('2026-03-02 12:00+00'); end $$;

create temp table s on commit drop as
select * from runlane.timing_summary(interval '1 hour', null, '2026-03-02 12:00+00');

select is(
    (select array_agg(measure) from s),
    array['queue_wait', 'first_response', 'total'],
    'the three measures come back in a fixed order'
);
select is(
    (select row(samples, p50_ms, p90_ms, p99_ms, max_ms)::text from s where measure = 'first_response'),
    row(4, 500, 1500, 1500, 1500)::text,
    'first response: one sample per responded run in the window (running included), from its source message'
);
select is(
    (select row(samples, p50_ms, p90_ms, max_ms)::text from s where measure = 'total'),
    row(3, 2000, 4000, 4000)::text,
    'total: one sample per run that ended (succeeded or failed), skipped and unfinished runs are no samples'
);
select is(
    (select row(samples, p50_ms, max_ms)::text from s where measure = 'queue_wait'),
    row(4, 50, 1000)::text,
    'queue wait: one sample per run that started in the window'
);
select is(
    (
        select row(samples, max_ms)::text
        from runlane.timing_summary(interval '3 hours', null, '2026-03-02 12:00+00')
        where measure = 'total'
    ),
    row(4, 9000)::text,
    'a wider window takes the older run in'
);
select is(
    (
        select row(samples, p50_ms)::text
        from runlane.timing_summary(interval '1 hour', 'scheduled', '2026-03-02 12:00+00')
        where measure = 'first_response'
    ),
    row(1, 1500)::text,
    'the trigger filter keeps only that trigger''s runs'
);
select is(
    (
        select row(samples, p50_ms, max_ms)::text
        from runlane.timing_summary(interval '1 hour', 'reaction', '2026-03-02 12:00+00')
        where measure = 'total'
    ),
    row(0, null, null)::text,
    'no samples: a zero count and no percentiles, never zeros'
);
select throws_ok(
    $$select * from runlane.timing_summary(interval '1 hour', 'bogus')$$,
    '22023', null, 'an unknown trigger is refused'
);
select throws_ok(
    $$select * from runlane.timing_summary(interval '-1 hour')$$,
    '22023', null, 'a negative window is refused'
);
select function_privs_are(
    'runlane', 'timing_summary', array['interval', 'text', 'timestamp with time zone'],
    'runlane_api', array['EXECUTE'], 'an application reads the timing view too (scoped to its organization)'
);

select * from finish();
rollback;
