-- queue_delay_status: the queue-delay warning by queue_delay's rule, with its threshold.
begin;
select plan(5);

do $$ begin perform runlane_test.agent('agent-qs', 'org-qs'); end $$;

select results_eq(
    $$select delayed_runs, oldest_wait_ms, threshold_ms from runlane.queue_delay_status()$$,
    $$values (0, null::bigint, 30000::bigint)$$,
    'no delayed run: the warning is off, the default threshold is 30 s'
);

do $$ begin perform runlane_test.timed_run('agent-qs', 'interactive', 'interactive', 'queued', now() - interval '40 seconds'); end $$;
do $$ begin perform runlane_test.timed_run('agent-qs', 'background', 'scheduled', 'queued', now() - interval '10 minutes'); end $$;

select results_eq(
    $$select delayed_runs, oldest_wait_ms, threshold_ms from runlane.queue_delay_status('30 seconds', now())$$,
    $$values (1, 40000::bigint, 30000::bigint)$$,
    'a chat run due for 40 s is delayed; scheduled work never counts'
);
select results_eq(
    $$select row(delayed_runs, oldest_wait_ms) from runlane.queue_delay_status('30 seconds', now())$$,
    $$select row(delayed_runs, oldest_wait_ms) from runlane.queue_delay('30 seconds', now())$$,
    'the same count and wait as the maintenance leader''s queue_delay (one rule)'
);
select throws_ok(
    $$select * from runlane.queue_delay_status('-1 second')$$,
    '22023', null, 'a negative threshold is refused'
);
select throws_ok(
    $$select * from runlane.queue_delay_status(null)$$,
    '22004', null, 'a null threshold is refused'
);

select * from finish();
rollback;
