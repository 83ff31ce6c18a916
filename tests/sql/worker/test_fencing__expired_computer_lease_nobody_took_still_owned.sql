-- A run whose computer lease expired but that no other run took over still holds its
-- computer: its writes are accepted and its heartbeat renews both leases (only a
-- take-over fences a paused run out, not the expiry itself).
begin;
select plan(4);

do $$
begin
    perform runlane_test.agent('agent-late', 'org-exp', 'computer-exp');
    perform runlane_test.queued_run('agent-late', 'background', 'manual');
    perform runlane_test.claimed_on_computer(runlane_test.last_run('agent-late'), 'worker-1');
    perform runlane_test.lease_expired(runlane_test.last_run('agent-late'));
end
$$;

select lives_ok(
    format('select runlane.append_output(%s, 1, ''text'', ''still mine'')', runlane_test.last_run('agent-late')),
    'append_output is accepted'
);
select is(
    runlane.heartbeat(runlane_test.last_run('agent-late'), 1),
    true,
    'the heartbeat answers true'
);
select cmp_ok(
    (select cl.expires_at from runlane.computer_leases as cl where cl.computer_id = 'computer-exp'),
    '>', now(),
    'the heartbeat renewed the computer lease'
);
select is(
    runlane.finish_run(runlane_test.last_run('agent-late'), 1, 'succeeded') ->> 'run.outcome',
    'succeeded',
    'the run finishes'
);

select * from finish();
rollback;
