-- lane_status: queued, due, running and the oldest due wait per lane, both lanes always.
begin;
select plan(4);

do $$ begin perform runlane_test.agent('agent-l', 'org-l'); end $$;

select is(
    (select array_agg(row(lane, queued, due, running, oldest_due_wait_ms)::text) from runlane.lane_status()),
    array[row('interactive', 0, 0, 0, null)::text, row('background', 0, 0, 0, null)::text],
    'both lanes are listed with zeros and no wait when nothing is queued'
);

do $$ begin perform runlane_test.timed_run('agent-l', 'interactive', 'interactive', 'queued', '2026-03-02 11:59:50+00'); end $$;
do $$ begin perform runlane_test.timed_run('agent-l', 'interactive', 'interactive', 'queued', '2026-03-02 11:59:59+00'); end $$;
do $$ begin perform runlane_test.timed_run(
    'agent-l', 'interactive', 'retry', 'queued', '2026-03-02 11:00+00',
    p_wake_at => '2026-03-02 12:05+00'
); end $$;
do $$ begin perform runlane_test.timed_run('agent-l', 'interactive', 'interactive', 'running', '2026-03-02 11:58+00', 10); end $$;
do $$ begin perform runlane_test.timed_run(
    'agent-l', 'background', 'manual', 'queued', '2026-03-02 11:00+00',
    p_wake_at => '2026-03-02 11:59+00'
); end $$;
do $$ begin perform runlane_test.timed_run('agent-l', 'background', 'manual', 'succeeded', '2026-03-02 11:00+00', 10, 20, 30); end $$;

select is(
    (
        select row(queued, due, running, oldest_due_wait_ms)::text
        from runlane.lane_status('2026-03-02 12:00+00') where lane = 'interactive'
    ),
    row(3, 2, 1, 10000)::text,
    'interactive: a sleeping retry is queued but not due; the oldest due run waited 10 s'
);
select is(
    (
        select row(queued, due, running, oldest_due_wait_ms)::text
        from runlane.lane_status('2026-03-02 12:00+00') where lane = 'background'
    ),
    row(1, 1, 0, 60000)::text,
    'background: a woken run waits from its wake time, finished runs are not counted'
);
select is(
    (
        select array_agg(row(org_id, running_background, queued_background, agent_max_concurrency)::text)
        from runlane.org_status() where org_id = 'org-l'
    ),
    array[row('org-l', 0, 1, 4)::text],
    'org_status: background running and queued against agent_max_concurrency'
);

select * from finish();
rollback;
