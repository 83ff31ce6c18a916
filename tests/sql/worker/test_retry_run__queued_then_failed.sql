-- retry_run: a failed attempt goes back to the queue after the delay while attempts
-- remain, and closes the run as failed / attempts_exhausted once they are spent.
begin;
select plan(18);

do $$
begin
    perform runlane_test.agent('agent-retry', 'org-retry', 'computer-retry');
    perform runlane_test.queued_run('agent-retry', 'background', 'manual');
    update runlane.runs set max_attempts = 2 where run_id = runlane_test.last_run('agent-retry');
    perform runlane_test.claimed_on_computer(runlane_test.last_run('agent-retry'), 'worker-1');
end
$$;

select throws_ok(
    format('select runlane.retry_run(%s, 1, ''boom'', interval ''-1 second'')', runlane_test.last_run('agent-retry')),
    '22023', null, 'a negative delay is refused with 22023'
);
select throws_ok(
    format('select runlane.retry_run(%s, 1, ''boom'', interval ''8 days'')', runlane_test.last_run('agent-retry')),
    '22023', null, 'a delay over 7 days is refused with 22023'
);
select throws_ok(
    format('select runlane.retry_run(%s, 1, ''boom'', null)', runlane_test.last_run('agent-retry')),
    '22004', null, 'a null delay is refused with 22004'
);
select throws_ok(
    format('select runlane.retry_run(%s, 5, ''boom'', interval ''1 second'')', runlane_test.last_run('agent-retry')),
    'RL001', null, 'a caller holding another fence is refused with RL001'
);

select is(
    runlane.retry_run(runlane_test.last_run('agent-retry'), 1, 'Tool call timed out', interval '30 seconds'),
    'queued',
    'the first failed attempt of two is requeued'
);
select results_eq(
    $$select r.state, r.wake_at, r.reason, r.last_error, r.lease_owner, r.lease_expires_at, r.finished_at
      from runlane.runs as r where r.run_id = runlane_test.last_run('agent-retry')$$,
    $$values ('queued'::text, now() + interval '30 seconds', 'retry_scheduled'::text,
              'Tool call timed out'::text, null::text, null::timestamptz, null::timestamptz)$$,
    'requeued to wake after the delay, reason retry_scheduled, error kept, lease cleared'
);
select is(
    (select count(*) from runlane.computer_leases as cl where cl.computer_id = 'computer-retry'),
    0::bigint,
    'the computer lease is released during the delay'
);
select is(
    (
        select e.detail from runlane.run_events as e
        where e.run_id = runlane_test.last_run('agent-retry') and e.event = 'run.retry_scheduled'
    ),
    jsonb_build_object('attempt', 1, 'wake_at', now() + interval '30 seconds'),
    'run.retry_scheduled is journaled with the attempt and wake time, no error text'
);
select throws_ok(
    format('select runlane.retry_run(%s, 1, ''boom'', interval ''0'')', runlane_test.last_run('agent-retry')),
    'RL001', null, 'retrying a queued run is refused with RL001'
);
select is(
    (select count(*) from runlane.claim_runs('worker-2', array['background'])),
    0::bigint,
    'the retry is not claimed before its delay'
);

-- Second (last) attempt.
do $$
begin
    perform runlane_test.claimed_on_computer(runlane_test.last_run('agent-retry'), 'worker-2');
end
$$;
select throws_ok(
    format('select runlane.retry_run(%s, 1, ''boom'', interval ''0'')', runlane_test.last_run('agent-retry')),
    'RL001', null, 'the first owner is refused with RL001 after the re-claim'
);
select is(
    runlane.retry_run(runlane_test.last_run('agent-retry'), 2, 'Tool call timed out again', interval '30 seconds'),
    'failed',
    'once attempts are spent the run fails'
);
select results_eq(
    $$select r.state, r.reason, r.last_error, r.lease_owner, r.lease_expires_at
      from runlane.runs as r where r.run_id = runlane_test.last_run('agent-retry')$$,
    $$values ('failed'::text, 'attempts_exhausted'::text, 'Tool call timed out again'::text,
              null::text, null::timestamptz)$$,
    'the run is failed / attempts_exhausted with the last error'
);
select isnt(
    (select r.finished_at from runlane.runs as r where r.run_id = runlane_test.last_run('agent-retry')),
    null,
    'the failed run is finished'
);
select is(
    (
        select e.detail from runlane.run_events as e
        where e.run_id = runlane_test.last_run('agent-retry') and e.event = 'run.finished'
    ),
    '{"outcome": "failed", "reason": "attempts_exhausted"}'::jsonb,
    'run.finished is journaled with failed / attempts_exhausted'
);
select is(
    (select count(*) from runlane.computer_leases as cl where cl.computer_id = 'computer-retry'),
    0::bigint,
    'the exhausted run holds no computer lease'
);

-- A zero delay wakes at once.
do $$
begin
    perform runlane_test.queued_run('agent-retry', 'background', 'manual');
    perform runlane_test.claimed(runlane_test.last_run('agent-retry'), 'worker-1');
end
$$;
select is(
    runlane.retry_run(runlane_test.last_run('agent-retry'), 1, null, interval '0'),
    'queued',
    'a zero delay is accepted'
);
select is(
    (select cl.run_id from runlane.claim_runs('worker-2', array['background']) as cl),
    runlane_test.last_run('agent-retry'),
    'a retry without delay is claimed again at once'
);

select * from finish();
rollback;
