-- reap_stale puts an interactive run whose lease expired back in the queue
-- (lease_expired, checkpoint kept) while attempts remain, and fails it / stale after.
begin;
select plan(14);

do $$
begin
    perform runlane_test.agent('agent-chat', 'org-reap', 'computer-chat');
    perform runlane_test.queued_run('agent-chat', 'interactive', 'interactive');
    update runlane.runs
    set thread_id = 'thread-1', max_attempts = 2, checkpoint = '{"step": 3}'
    where run_id = runlane_test.last_run('agent-chat');
    -- (a run written directly, not by submit_message: its thread's row is written too)
    insert into runlane.threads (org_id, agent_id, thread_id) values ('org-reap', 'agent-chat', 'thread-1');
    perform runlane_test.claimed_on_computer(runlane_test.last_run('agent-chat'), 'worker-dead');
    perform runlane_test.lease_expired(runlane_test.last_run('agent-chat'));
    insert into runlane.messages (org_id, agent_id, thread_id, body)
    values ('org-reap', 'agent-chat', 'thread-1', 'held while running');
end
$$;

select results_eq(
    'select * from runlane.reap_stale()',
    $$select runlane_test.last_run('agent-chat'), 'queued'::text, 'lease_expired'::text$$,
    'reap_stale reports the interactive run as queued / lease_expired'
);
select results_eq(
    $$select r.state, r.reason, r.lease_owner, r.lease_expires_at, r.attempts, r.checkpoint, r.finished_at
      from runlane.runs as r where r.run_id = runlane_test.last_run('agent-chat')$$,
    $$values ('queued'::text, 'lease_expired'::text, null::text, null::timestamptz, 1,
              '{"step": 3}'::jsonb, null::timestamptz)$$,
    'the run is queued again with its checkpoint, lease cleared, attempt kept'
);
select is(
    (select count(*) from runlane.computer_leases as cl where cl.computer_id = 'computer-chat'),
    0::bigint,
    'its computer lease is released'
);
select is(
    (
        select e.detail from runlane.run_events as e
        where e.run_id = runlane_test.last_run('agent-chat') and e.event = 'run.lease_expired'
    ),
    '{"attempt": 1}'::jsonb,
    'run.lease_expired is journaled with the attempt'
);
select is(
    (select m.run_id from runlane.messages as m where m.agent_id = 'agent-chat'),
    runlane_test.last_run('agent-chat'),
    'the message held while it ran joins the requeued run'
);
select throws_ok(
    format('select runlane.finish_run(%s, 1, ''succeeded'')', runlane_test.last_run('agent-chat')),
    'RL001', null, 'the dead owner cannot finish the requeued run'
);

select is(
    (select cl.checkpoint from runlane.claim_runs('worker-2', array['interactive']) as cl),
    '{"step": 3}'::jsonb,
    'the next claim resumes from the checkpoint'
);

-- The second and last attempt also stops heartbeating.
do $$
begin
    perform runlane_test.computer_leased(runlane_test.last_run('agent-chat'));
    perform runlane_test.lease_expired(runlane_test.last_run('agent-chat'));
end
$$;
select results_eq(
    'select * from runlane.reap_stale()',
    $$select runlane_test.last_run('agent-chat'), 'failed'::text, 'stale'::text$$,
    'with attempts spent, reap_stale reports failed / stale'
);
select results_eq(
    $$select r.state, r.reason, r.attempts from runlane.runs as r
      where r.run_id = runlane_test.last_run('agent-chat')$$,
    $$values ('failed'::text, 'stale'::text, 2)$$,
    'the interactive run is failed / stale after its last attempt'
);
select is(
    (
        select e.detail from runlane.run_events as e
        where e.run_id = runlane_test.last_run('agent-chat') and e.event = 'run.finished'
    ),
    '{"outcome": "failed", "reason": "stale"}'::jsonb,
    'run.finished is journaled with failed / stale'
);
select is(
    (select count(*) from runlane.computer_leases as cl where cl.computer_id = 'computer-chat'),
    0::bigint,
    'the failed run holds no computer lease'
);
select is(
    runlane.heartbeat(runlane_test.last_run('agent-chat'), 2),
    false,
    'the second owner''s heartbeat answers false'
);

-- A message held while the failed run ran gets a follow-up run.
do $$
begin
    perform runlane_test.queued_run('agent-chat', 'interactive', 'interactive');
    update runlane.runs set thread_id = 'thread-2' where run_id = runlane_test.last_run('agent-chat');
    perform runlane_test.claimed(runlane_test.last_run('agent-chat'), 'worker-dead');
    update runlane.runs set attempts = max_attempts where run_id = runlane_test.last_run('agent-chat');
    perform runlane_test.lease_expired(runlane_test.last_run('agent-chat'));
    insert into runlane.messages (org_id, agent_id, thread_id, body)
    values ('org-reap', 'agent-chat', 'thread-2', 'held on thread 2');
end
$$;
select results_eq(
    'select r.state, r.reason from runlane.reap_stale() as r',
    $$values ('failed'::text, 'stale'::text)$$,
    'an interactive run with attempts spent is failed / stale at once'
);
select results_eq(
    $$select r.state, r.thread_id from runlane.runs as r
      where r.run_id = runlane_test.last_run('agent-chat')$$,
    $$values ('queued'::text, 'thread-2'::text)$$,
    'the message held on its thread gets a queued follow-up run'
);

select * from finish();
rollback;
