-- lane_minutes: per lane and minute, the runs waiting for their first start at the minute's
-- end and the first responses within the minute, every minute listed, history ignored.
begin;
select plan(8);

do $$ begin perform runlane_test.agent('agent-m', 'org-m'); end $$;

-- The window: 5 minutes ending 2026-03-02 12:00, minute ends 11:56, 11:57, 11:58, 11:59, 12:00.
-- interactive, never started: waiting from 11:56:30.
do $$ begin perform runlane_test.timed_run('agent-m', 'interactive', 'interactive', 'queued', '2026-03-02 11:56:30+00'); end $$;
-- interactive, created 11:50, started 11:58:10, first response 11:58:10.5 (490500 ms).
do $$ begin perform runlane_test.timed_run(
    'agent-m', 'interactive', 'interactive', 'succeeded', '2026-03-02 11:50+00', 490000, 490500, 500000
); end $$;
-- interactive, created 11:59:00 (a message 3 s before), started 11:59:01, answered 11:59:02 (5000 ms).
do $$ begin perform runlane_test.timed_run(
    'agent-m', 'interactive', 'interactive', 'running', '2026-03-02 11:59+00', 1000, 2000,
    p_message_ms_before => 3000
); end $$;
-- interactive, created and answered between two minute ends (200 ms): never counted as waiting.
do $$ begin perform runlane_test.timed_run(
    'agent-m', 'interactive', 'interactive', 'succeeded', '2026-03-02 11:59:30+00', 100, 200, 300
); end $$;
-- history: finished long before the window.
do $$ begin perform runlane_test.timed_run(
    'agent-m', 'interactive', 'interactive', 'succeeded', '2026-03-02 10:00+00', 100, 200, 300000
); end $$;
-- background: parked until 13:00 (waits all along), and one started 11:58:30, answered 11:58:31.
do $$ begin perform runlane_test.timed_run(
    'agent-m', 'background', 'manual', 'queued', '2026-03-02 11:00+00', p_wake_at => '2026-03-02 13:00+00'
); end $$;
do $$ begin perform runlane_test.timed_run(
    'agent-m', 'background', 'scheduled', 'failed', '2026-03-02 11:57:30+00', 60000, 61000, 62000
); end $$;

select is(
    (
        select array_agg(row(lane, minute_end)::text order by ord)
        from (
            select
                lane,
                minute_end,
                row_number() over () as ord
            from runlane.lane_minutes('5 minutes', '2026-03-02 12:00+00')
        ) as x
    ),
    array[
        row('interactive', '2026-03-02 11:56+00'::timestamptz)::text,
        row('interactive', '2026-03-02 11:57+00'::timestamptz)::text,
        row('interactive', '2026-03-02 11:58+00'::timestamptz)::text,
        row('interactive', '2026-03-02 11:59+00'::timestamptz)::text,
        row('interactive', '2026-03-02 12:00+00'::timestamptz)::text,
        row('background', '2026-03-02 11:56+00'::timestamptz)::text,
        row('background', '2026-03-02 11:57+00'::timestamptz)::text,
        row('background', '2026-03-02 11:58+00'::timestamptz)::text,
        row('background', '2026-03-02 11:59+00'::timestamptz)::text,
        row('background', '2026-03-02 12:00+00'::timestamptz)::text
    ],
    'every minute of the window for each lane, interactive first, oldest first, ending at p_now'
);

select is(
    (
        select array_agg(queued order by minute_end)
        from runlane.lane_minutes('5 minutes', '2026-03-02 12:00+00') where lane = 'interactive'
    ),
    array[1, 2, 2, 2, 1],
    'interactive: a run waits from its creation to its first start, sampled at each minute end'
);

select is(
    (
        select array_agg(queued order by minute_end)
        from runlane.lane_minutes('5 minutes', '2026-03-02 12:00+00') where lane = 'background'
    ),
    array[1, 1, 2, 1, 1],
    'background: a parked run waits all along; a run counts in its lane only'
);

select is(
    (
        select array_agg(row(minute_end, first_responses, p50_ms, p90_ms, p99_ms)::text order by minute_end)
        from runlane.lane_minutes('5 minutes', '2026-03-02 12:00+00') where lane = 'interactive'
    ),
    array[
        row('2026-03-02 11:56+00'::timestamptz, 0, null::bigint, null::bigint, null::bigint)::text,
        row('2026-03-02 11:57+00'::timestamptz, 0, null::bigint, null::bigint, null::bigint)::text,
        row('2026-03-02 11:58+00'::timestamptz, 0, null::bigint, null::bigint, null::bigint)::text,
        row('2026-03-02 11:59+00'::timestamptz, 1, 490500, 490500, 490500)::text,
        row('2026-03-02 12:00+00'::timestamptz, 2, 200, 5000, 5000)::text
    ],
    'interactive first responses by the minute they happened in, from the source message when there is one'
);

select is(
    (
        select array_agg(first_responses order by minute_end)
        from runlane.lane_minutes('5 minutes', '2026-03-02 12:00+00') where lane = 'background'
    ),
    array[0, 0, 0, 1, 0],
    'background first responses are counted apart from interactive ones'
);

select throws_ok(
    $$select * from runlane.lane_minutes('30 seconds', '2026-03-02 12:00+00')$$,
    '22023', null, 'a window under a minute is refused'
);
select throws_ok(
    $$select * from runlane.lane_minutes('25 hours', '2026-03-02 12:00+00')$$,
    '22023', null, 'a window over a day is refused'
);
select throws_ok(
    $$select * from runlane.lane_minutes(null, '2026-03-02 12:00+00')$$,
    '22004', null, 'a null window is refused'
);

select * from finish();
rollback;
