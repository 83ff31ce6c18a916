-- A take_steering whose reply was lost, resent with its sequence
-- number, attaches nothing more and returns every message attached to the run (the worker
-- drops those it knows: what is left is what the lost reply held); a new number takes
-- what arrived since.
begin;
select plan(4);

do $$
begin
    perform runlane_test.agent('agent-steer', 'org-steer');
    perform runlane_test.queued_run('agent-steer', 'interactive', 'interactive');
    update runlane.runs set thread_id = 'thread-1' where run_id = runlane_test.last_run('agent-steer');
    perform runlane_test.claimed(runlane_test.last_run('agent-steer'), 'worker-1');
    insert into runlane.messages (org_id, agent_id, thread_id, body, run_id)
    values ('org-steer', 'agent-steer', 'thread-1', 'source', runlane_test.last_run('agent-steer'));
    insert into runlane.messages (org_id, agent_id, thread_id, body)
    values ('org-steer', 'agent-steer', 'thread-1', 'steer one');
end
$$;

select results_eq(
    format('select body from runlane.take_steering(%s, 1, 1)', runlane_test.last_run('agent-steer')),
    $$values ('steer one'::text)$$,
    'take 1 attaches and returns the held message'
);
do $$
begin
    insert into runlane.messages (org_id, agent_id, thread_id, body)
    values ('org-steer', 'agent-steer', 'thread-1', 'steer two');
end
$$;
select results_eq(
    format('select body from runlane.take_steering(%s, 1, 1)', runlane_test.last_run('agent-steer')),
    $$values ('source'::text), ('steer one')$$,
    'its resend returns every attached message, in order'
);
select is(
    (select m.run_id from runlane.messages as m where m.body = 'steer two'),
    null,
    'and attaches nothing that arrived since'
);
select results_eq(
    format('select body from runlane.take_steering(%s, 1, 2)', runlane_test.last_run('agent-steer')),
    $$values ('steer two'::text)$$,
    'take 2 takes what arrived since'
);

select * from finish();
rollback;
