-- release_run gives an owned run back to the queue without failing it: the wake time is
-- exactly the one given (null included), the lease and computer lease are released, the
-- attempt stays counted, run.released is journaled.
begin;
select plan(16);

do $$
begin
    perform runlane_test.agent('agent-rel', 'org-rel', 'computer-rel');
    perform runlane_test.queued_run('agent-rel', 'background', 'manual', now() - interval '1 hour');
    perform runlane_test.claimed_on_computer(runlane_test.last_run('agent-rel'), 'worker-1');
end
$$;

select is(
    runlane.release_run(runlane_test.last_run('agent-rel'), 1, now() + interval '10 minutes', 'shutdown'),
    true,
    'release_run answers true to the owner'
);
select results_eq(
    $$select r.state, r.wake_at, r.reason, r.lease_owner, r.lease_expires_at, r.attempts, r.fence
      from runlane.runs as r where r.run_id = runlane_test.last_run('agent-rel')$$,
    $$values ('queued'::text, now() + interval '10 minutes', 'shutdown'::text, null::text,
              null::timestamptz, 1, 1::bigint)$$,
    'the run is queued with the explicit wake time and reason, lease cleared, attempt and fence kept'
);
select is(
    (select r.finished_at from runlane.runs as r where r.run_id = runlane_test.last_run('agent-rel')),
    null,
    'a released run is not finished'
);
select is(
    (select count(*) from runlane.computer_leases as cl where cl.computer_id = 'computer-rel'),
    0::bigint,
    'the computer lease is released'
);
select is(
    (
        select e.detail from runlane.run_events as e
        where e.run_id = runlane_test.last_run('agent-rel') and e.event = 'run.released'
    ),
    jsonb_build_object('reason', 'shutdown', 'attempt', 1, 'wake_at', now() + interval '10 minutes'),
    'run.released is journaled with reason, attempt and wake time'
);
select throws_ok(
    format('select runlane.release_run(%s, 1)', runlane_test.last_run('agent-rel')),
    'RL001', null, 'releasing again (the run is queued) is refused with RL001'
);
select is(
    (select count(*) from runlane.claim_runs('worker-2', array['background'])),
    0::bigint,
    'a run released with a future wake time is not claimed before it'
);

-- Null wake time: explicit, so an old wake time is cleared and the run is claimable at once.
do $$
begin
    update runlane.runs set wake_at = now() - interval '5 minutes'
    where run_id = runlane_test.last_run('agent-rel');
    perform runlane_test.claimed_on_computer(runlane_test.last_run('agent-rel'), 'worker-2');
    update runlane.runs set wake_at = now() + interval '3 hours'
    where run_id = runlane_test.last_run('agent-rel');
end
$$;
select is(
    runlane.release_run(runlane_test.last_run('agent-rel'), 2),
    true,
    'the second owner releases without a wake time'
);
select results_eq(
    $$select r.state, r.wake_at, r.reason from runlane.runs as r
      where r.run_id = runlane_test.last_run('agent-rel')$$,
    $$values ('queued'::text, null::timestamptz, 'released'::text)$$,
    'a null wake time is applied as given and the reason defaults to released'
);
select is(
    (select cl.run_id from runlane.claim_runs('worker-3', array['background']) as cl),
    runlane_test.last_run('agent-rel'),
    'a run released without a wake time is claimed again at once'
);

-- An explicit wake time equal to the old one is kept as given.
do $$
begin
    update runlane.runs set wake_at = now() + interval '300 days'
    where run_id = runlane_test.last_run('agent-rel');
end
$$;
select is(
    runlane.release_run(runlane_test.last_run('agent-rel'), 3, now() + interval '300 days', 'computer_busy'),
    true,
    'the third owner releases with a wake time equal to the old one'
);
select is(
    (select r.wake_at from runlane.runs as r where r.run_id = runlane_test.last_run('agent-rel')),
    now() + interval '300 days',
    'the explicit wake time wins even when it equals the old value'
);

select throws_ok(
    format('select runlane.release_run(%s, 3, null, ''Shutting down!'')', runlane_test.last_run('agent-rel')),
    '22023', null, 'a reason that is not a reason code is refused with 22023'
);
select throws_ok(
    'select runlane.release_run(-1, 1)',
    'RL008', null, 'releasing an unknown run is refused with RL008'
);

-- Held messages of an interactive run's thread join it when it is released.
do $$
begin
    perform runlane_test.agent('agent-chat', 'org-rel', null);
    perform runlane_test.queued_run('agent-chat', 'interactive', 'interactive');
    update runlane.runs set thread_id = 'thread-1' where run_id = runlane_test.last_run('agent-chat');
    perform runlane_test.claimed(runlane_test.last_run('agent-chat'), 'worker-1');
    insert into runlane.messages (org_id, agent_id, thread_id, body)
    values ('org-rel', 'agent-chat', 'thread-1', 'held while running');
end
$$;
select is(
    runlane.release_run(runlane_test.last_run('agent-chat'), 1, null, 'shutdown'),
    true,
    'the interactive run is released'
);
select is(
    (select m.run_id from runlane.messages as m where m.agent_id = 'agent-chat'),
    runlane_test.last_run('agent-chat'),
    'the message held while it ran joins the released run'
);

select * from finish();
rollback;
