-- A run claimed (fence 1), reaped back to the queue and claimed again (fence 2): the
-- fence-1 owner is refused on every worker write, and the new owner keeps the run.
begin;
select plan(14);

do $$
begin
    perform runlane_test.agent('agent-fence', 'org-fence', 'computer-fence');
    perform runlane_test.queued_run('agent-fence', 'interactive', 'interactive');
    update runlane.runs set thread_id = 'thread-1' where run_id = runlane_test.last_run('agent-fence');
    perform runlane_test.claimed_on_computer(runlane_test.last_run('agent-fence'), 'worker-old');
    perform runlane_test.lease_expired(runlane_test.last_run('agent-fence'));
    perform runlane.reap_stale();
end
$$;

select is(
    (select cl.fence from runlane.claim_runs('worker-new', array['interactive']) as cl),
    2::bigint,
    'the reaped run is claimed again with fence 2'
);
do $$
begin
    insert into runlane.messages (org_id, agent_id, thread_id, body)
    values ('org-fence', 'agent-fence', 'thread-1', 'held for the new owner');
end
$$;

select is(
    runlane.heartbeat(runlane_test.last_run('agent-fence'), 1),
    false,
    'the old owner''s heartbeat answers false'
);
select throws_ok(
    format('select runlane.append_output(%s, 1, ''text'', ''late words'')', runlane_test.last_run('agent-fence')),
    'RL001', null, 'the old owner cannot append output'
);
select throws_ok(
    format('select runlane.save_checkpoint(%s, 1, ''{"step": 9}'')', runlane_test.last_run('agent-fence')),
    'RL001', null, 'the old owner cannot save a checkpoint'
);
select throws_ok(
    format('select * from runlane.take_steering(%s, 1)', runlane_test.last_run('agent-fence')),
    'RL001', null, 'the old owner cannot take steering messages'
);
select throws_ok(
    format('select runlane.finish_run(%s, 1, ''succeeded'')', runlane_test.last_run('agent-fence')),
    'RL001', null, 'the old owner cannot finish the run'
);
select throws_ok(
    format('select runlane.release_run(%s, 1)', runlane_test.last_run('agent-fence')),
    'RL001', null, 'the old owner cannot release the run'
);
select throws_ok(
    format('select runlane.retry_run(%s, 1, ''boom'', interval ''0'')', runlane_test.last_run('agent-fence')),
    'RL001', null, 'the old owner cannot schedule a retry'
);

select results_eq(
    $$select r.state, r.fence, r.lease_owner, r.checkpoint from runlane.runs as r
      where r.run_id = runlane_test.last_run('agent-fence')$$,
    $$values ('running'::text, 2::bigint, 'worker-new'::text, null::jsonb)$$,
    'the run is still running for the new owner, with no checkpoint from the old one'
);
select is_empty(
    format('select 1 from runlane.run_outputs where run_id = %s', runlane_test.last_run('agent-fence')),
    'the old owner wrote no output'
);
select is(
    (select m.run_id from runlane.messages as m where m.body = 'held for the new owner'),
    null,
    'the held message is still waiting for the new owner'
);
select is(
    (
        select count(*) from runlane.run_events as e
        where e.run_id = runlane_test.last_run(
            'agent-fence') and e.event in (
            'run.finished', 'run.released',
            'run.retry_scheduled'
        )
    ),
    0::bigint,
    'the old owner journaled nothing'
);
select is(
    runlane.heartbeat(runlane_test.last_run('agent-fence'), 2),
    true,
    'the new owner''s heartbeat still answers true'
);
select is(
    runlane.finish_run(runlane_test.last_run('agent-fence'), 2, 'succeeded') ->> 'run.outcome',
    'succeeded',
    'the new owner finishes the run'
);

select * from finish();
rollback;
