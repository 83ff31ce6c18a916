-- heartbeat answers false, never an error, once the caller does not own the run; it
-- validates its lease argument.
begin;
select plan(11);

do $$
begin
    perform runlane_test.agent('agent-hb', 'org-hb', 'computer-hb');
    perform runlane_test.queued_run('agent-hb', 'interactive', 'interactive');
    perform runlane_test.claimed_on_computer(runlane_test.last_run('agent-hb'), 'worker-1');
end
$$;

select is(
    runlane.heartbeat(runlane_test.last_run('agent-hb'), 7),
    false,
    'a caller holding another fence gets false'
);
select is(
    (select r.lease_expires_at from runlane.runs as r where r.run_id = runlane_test.last_run('agent-hb')),
    now() + interval '60 seconds',
    'a refused heartbeat does not extend the lease'
);
select is(
    runlane.heartbeat(-1, 1),
    false,
    'an unknown run gets false (documented choice: no RL008 on the hot path)'
);

select throws_ok(
    format('select runlane.heartbeat(%s, 1, interval ''0 seconds'')', runlane_test.last_run('agent-hb')),
    '22023', null, 'a zero lease is refused with 22023'
);
select throws_ok(
    format('select runlane.heartbeat(%s, 1, interval ''-5 seconds'')', runlane_test.last_run('agent-hb')),
    '22023', null, 'a negative lease is refused with 22023'
);
select throws_ok(
    format('select runlane.heartbeat(%s, 1, interval ''61 minutes'')', runlane_test.last_run('agent-hb')),
    '22023', null, 'a lease over one hour is refused with 22023'
);
select throws_ok(
    format('select runlane.heartbeat(%s, 1, null)', runlane_test.last_run('agent-hb')),
    '22004', null, 'a null lease is refused with 22004'
);
select is(
    runlane.heartbeat(runlane_test.last_run('agent-hb'), 1, interval '1 hour'),
    true,
    'a lease of exactly one hour is accepted'
);

do $$ begin perform runlane.finish_run(runlane_test.last_run('agent-hb'), 1, 'succeeded'); end $$;
select is(
    runlane.heartbeat(runlane_test.last_run('agent-hb'), 1),
    false,
    'the former owner of a finished run gets false'
);

do $$
begin
    perform runlane_test.queued_run('agent-hb', 'interactive', 'interactive');
    perform runlane_test.claimed(runlane_test.last_run('agent-hb'), 'worker-1');
    perform runlane.release_run(runlane_test.last_run('agent-hb'), 1);
end
$$;
select is(
    runlane.heartbeat(runlane_test.last_run('agent-hb'), 1),
    false,
    'the owner of a released (queued) run gets false'
);
select is(
    (select r.lease_expires_at from runlane.runs as r where r.run_id = runlane_test.last_run('agent-hb')),
    null,
    'a heartbeat on a queued run gives it no lease'
);

select * from finish();
rollback;
