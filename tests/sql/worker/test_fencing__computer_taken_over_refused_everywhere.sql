-- A run paused past its lease whose computer another run's claim took
-- over is refused (RL001) on every worker write, exactly as a reclaimed run is, although
-- its own run row still reads running under its fence; the new owner keeps the computer.
begin;
select plan(16);

do $$
begin
    perform runlane_test.agent('agent-slow', 'org-cto', 'computer-cto');
    perform runlane_test.agent('agent-next', 'org-cto', 'computer-cto');
    perform runlane_test.queued_run('agent-slow', 'interactive', 'interactive');
    update runlane.runs set thread_id = 'thread-1' where run_id = runlane_test.last_run('agent-slow');
    perform runlane_test.claimed_on_computer(runlane_test.last_run('agent-slow'), 'worker-old');
    insert into runlane.messages (org_id, agent_id, thread_id, body, run_id)
    values ('org-cto', 'agent-slow', 'thread-1', 'the question', runlane_test.last_run('agent-slow'));
    -- The owner is paused: its leases expire, nobody reaps it yet, another run takes the computer.
    perform runlane_test.lease_expired(runlane_test.last_run('agent-slow'));
    perform runlane_test.queued_run('agent-next', 'background', 'manual');
end
$$;

select is(
    (select cl.run_id from runlane.claim_runs('worker-new', array['background']) as cl),
    runlane_test.last_run('agent-next'),
    'the waiter claims the computer once the paused run''s lease expired'
);
do $$
begin
    insert into runlane.messages (org_id, agent_id, thread_id, body)
    values ('org-cto', 'agent-slow', 'thread-1', 'held while it was paused');
end
$$;

select is(
    (select r.state || '/' || r.fence from runlane.runs as r where r.run_id = runlane_test.last_run('agent-slow')),
    'running/1',
    'the paused run still reads running under its fence (not reaped yet)'
);
select is(
    runlane.heartbeat(runlane_test.last_run('agent-slow'), 1),
    false,
    'its heartbeat answers false'
);
select throws_ok(
    format('select runlane.append_output(%s, 1, ''text'', ''stale words'')', runlane_test.last_run('agent-slow')),
    'RL001', null, 'append_output is refused'
);
select throws_ok(
    format('select runlane.save_checkpoint(%s, 1, ''{"step": 9}'')', runlane_test.last_run('agent-slow')),
    'RL001', null, 'save_checkpoint is refused'
);
select throws_ok(
    format('select * from runlane.take_steering(%s, 1)', runlane_test.last_run('agent-slow')),
    'RL001', null, 'take_steering is refused'
);
select throws_ok(
    format('select * from runlane.run_messages(%s, 1)', runlane_test.last_run('agent-slow')),
    'RL001', null, 'run_messages is refused'
);
select is_empty(
    format(
        'select * from runlane.run_messages_many(array[%s]::bigint[], array[1]::bigint[])',
        runlane_test.last_run('agent-slow')
    ),
    'run_messages_many returns nothing for it'
);
select throws_ok(
    format('select runlane.finish_run(%s, 1, ''succeeded'')', runlane_test.last_run('agent-slow')),
    'RL001', null, 'finish_run as succeeded is refused'
);
select is(
    (
        select f.ok::text || '/' || f.sqlstate
        from runlane.finish_runs(
            array[runlane_test.last_run('agent-slow')], array[1]::bigint[], array['succeeded'],
            array[null]::text[], array[0]::numeric[], array[1], array['text'], array['stale end']
        ) as f
    ),
    'false/RL001',
    'finish_runs refuses it with RL001'
);
select throws_ok(
    format('select runlane.release_run(%s, 1)', runlane_test.last_run('agent-slow')),
    'RL001', null, 'release_run is refused'
);
select throws_ok(
    format('select runlane.retry_run(%s, 1, ''boom'', interval ''0'')', runlane_test.last_run('agent-slow')),
    'RL001', null, 'retry_run is refused'
);

select is_empty(
    format('select 1 from runlane.run_outputs where run_id = %s', runlane_test.last_run('agent-slow')),
    'the paused run wrote no output'
);
select results_eq(
    $$select r.state, r.checkpoint from runlane.runs as r where r.run_id = runlane_test.last_run('agent-slow')$$,
    $$values ('running'::text, null::jsonb)$$,
    'its row is unchanged: left to reap_stale'
);
select is(
    (select m.run_id from runlane.messages as m where m.body = 'held while it was paused'),
    null,
    'the held message was not taken'
);
select is(
    (select cl.run_id from runlane.computer_leases as cl where cl.computer_id = 'computer-cto'),
    runlane_test.last_run('agent-next'),
    'the computer lease stays with the new owner'
);

select * from finish();
rollback;
