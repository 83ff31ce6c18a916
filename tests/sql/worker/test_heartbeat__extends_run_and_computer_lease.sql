-- heartbeat extends the owner's run lease and the computer lease that run holds, and
-- no other computer lease.
begin;
select plan(8);

do $$
begin
    perform runlane_test.agent('agent-hb', 'org-hb', 'computer-hb');
    perform runlane_test.agent('agent-other', 'org-hb', 'computer-other');
    perform runlane_test.queued_run('agent-hb', 'interactive', 'interactive');
    perform runlane_test.queued_run('agent-other', 'background', 'manual');
    perform runlane_test.claimed_on_computer(runlane_test.last_run('agent-hb'), 'worker-1');
    perform runlane_test.claimed_on_computer(runlane_test.last_run('agent-other'), 'worker-2');
    update runlane.runs set heartbeat_at = now() - interval '30 seconds';
end
$$;

select is(
    runlane.heartbeat(runlane_test.last_run('agent-hb'), 1, interval '5 minutes'),
    true,
    'the owner (current fence, running) gets true'
);
select is(
    (select r.lease_expires_at from runlane.runs as r where r.run_id = runlane_test.last_run('agent-hb')),
    now() + interval '5 minutes',
    'the run lease now expires p_lease from now'
);
select is(
    (select r.heartbeat_at from runlane.runs as r where r.run_id = runlane_test.last_run('agent-hb')),
    now(),
    'heartbeat_at is stamped now'
);
select is(
    (select cl.expires_at from runlane.computer_leases as cl where cl.computer_id = 'computer-hb'),
    now() + interval '5 minutes',
    'the computer lease held by the run expires with the run lease'
);
select is(
    (select cl.expires_at from runlane.computer_leases as cl where cl.computer_id = 'computer-other'),
    now() + interval '60 seconds',
    'another run''s computer lease is untouched'
);
select is(
    (select r.lease_expires_at from runlane.runs as r where r.run_id = runlane_test.last_run('agent-other')),
    now() + interval '60 seconds',
    'another run''s lease is untouched'
);

select is(
    runlane.heartbeat(runlane_test.last_run('agent-hb'), 1),
    true,
    'the default lease is accepted'
);
select is(
    (select r.lease_expires_at from runlane.runs as r where r.run_id = runlane_test.last_run('agent-hb')),
    now() + interval '60 seconds',
    'the default lease is 60 seconds'
);

select * from finish();
rollback;
