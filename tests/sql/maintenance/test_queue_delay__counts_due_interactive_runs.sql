-- queue_delay counts interactive runs due and queued for the threshold or more, measured
-- from the later of creation and wake time; retries, future work and background runs do not count.
begin;
select plan(8);

select runlane_test.agent(a) from unnest(array['agent-qd1', 'agent-qd2', 'agent-qd3', 'agent-qd4', 'agent-qd-bg']) as a;

select results_eq(
    $$select delayed_runs, oldest_wait_ms from runlane.queue_delay('30 seconds', now())$$,
    $$values (0, null::bigint)$$,
    'an empty queue reports no delayed runs and no oldest wait'
);

-- An interactive run created 40 s ago and never woken later: delayed by 40 s.
do $$ begin perform runlane_test.queued_run('agent-qd1', 'interactive', 'interactive'); end $$;
update runlane.runs set created_at = now() - interval '40 seconds'
where agent_id = 'agent-qd1';

select results_eq(
    $$select delayed_runs, oldest_wait_ms from runlane.queue_delay('30 seconds', now())$$,
    $$values (1, 40000::bigint)$$,
    'an interactive run queued 40 s ago counts, with its wait in milliseconds'
);

select results_eq(
    $$select delayed_runs from runlane.queue_delay('45 seconds', now())$$,
    $$values (0)$$,
    'a run that has waited less than the threshold does not count'
);

-- A retry created 10 minutes ago that woke 5 s ago: its wait starts at the wake time.
do $$ begin perform runlane_test.queued_run('agent-qd2', 'interactive', 'retry', now() - interval '5 seconds'); end $$;
update runlane.runs set created_at = now() - interval '10 minutes'
where agent_id = 'agent-qd2';

select results_eq(
    $$select delayed_runs, oldest_wait_ms from runlane.queue_delay('30 seconds', now())$$,
    $$values (1, 40000::bigint)$$,
    'normal retry backoff does not count: the wait is measured from the wake time'
);

-- A future retry and an old background run never count.
do $$ begin perform runlane_test.queued_run('agent-qd3', 'interactive', 'retry', now() + interval '1 minute'); end $$;
update runlane.runs set created_at = now() - interval '10 minutes'
where agent_id = 'agent-qd3';
do $$ begin perform runlane_test.queued_run('agent-qd-bg', 'background', 'scheduled'); end $$;
update runlane.runs set created_at = now() - interval '10 minutes'
where agent_id = 'agent-qd-bg';

select results_eq(
    $$select delayed_runs, oldest_wait_ms from runlane.queue_delay('30 seconds', now())$$,
    $$values (1, 40000::bigint)$$,
    'future retries and background work do not count toward the delay'
);

-- A retry woken 2 minutes ago is the oldest wait now.
do $$ begin perform runlane_test.queued_run('agent-qd4', 'interactive', 'retry', now() - interval '2 minutes'); end $$;
update runlane.runs set created_at = now() - interval '10 minutes'
where agent_id = 'agent-qd4';

select results_eq(
    $$select delayed_runs, oldest_wait_ms from runlane.queue_delay('30 seconds', now())$$,
    $$values (2, 120000::bigint)$$,
    'every due interactive run counts and the oldest wait is the longest one'
);

select throws_ok(
    $$select * from runlane.queue_delay(null)$$,
    '22004', null,
    'a null threshold is refused with null_value_not_allowed'
);

select throws_ok(
    $$select * from runlane.queue_delay('-1 second')$$,
    '22023', null,
    'a negative threshold is refused with invalid_parameter_value'
);

select * from finish();
rollback;
