-- publish_run records an optional wake time on a queued run and refuses unknown runs.
-- (The notification itself is asserted in tests/runner/test_dispatch_notifications.py:
-- a NOTIFY is only delivered at commit.)
begin;
select plan(7);

do $$ begin perform runlane_test.agent('agent-a'); end $$;
create temp table r on commit drop as
select runlane_test.queued_run('agent-a', 'interactive', 'interactive') as run_id;

select lives_ok(
    $$select runlane.publish_run((select run_id from r))$$,
    'publishing a queued run without a wake time works'
);
select is(
    (select wake_at from runlane.runs where run_id = (select run_id from r)),
    null,
    'publishing without a wake time leaves the wake time unset'
);

do $$ begin perform runlane.publish_run((select run_id from r), now() + interval '300 days'); end $$;
select is(
    (select wake_at from runlane.runs where run_id = (select run_id from r)),
    now() + interval '300 days',
    'publishing with a wake time records it on the queued run'
);

do $$ begin perform runlane.publish_run((select run_id from r), null); end $$;
select is(
    (select wake_at from runlane.runs where run_id = (select run_id from r)),
    now() + interval '300 days',
    'publishing again without a wake time keeps the recorded one'
);

do $$ begin perform runlane_test.claimed((select run_id from r)); end $$;
do $$ begin perform runlane.publish_run((select run_id from r), now() + interval '301 days'); end $$;
select is(
    (select wake_at from runlane.runs where run_id = (select run_id from r)),
    now() + interval '300 days',
    'a wake time is not recorded on a run that already started'
);

select throws_ok(
    $$select runlane.publish_run(-1)$$,
    'RL008', null, 'publishing an unknown run is refused with RL008'
);
select throws_ok(
    $$select runlane.publish_run(null)$$,
    '22004', null, 'publishing a null run id (a held message) is refused with 22004'
);

select * from finish();
rollback;
