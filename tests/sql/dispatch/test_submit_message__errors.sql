-- submit_message refuses unknown agents and missing threads or bodies, by SQLSTATE.
begin;
select plan(6);

do $$ begin perform runlane_test.agent('agent-a'); end $$;

select throws_ok(
    $$select * from runlane.submit_message('no-such-agent', 'thread-1', 'hi')$$,
    'RL008', null, 'an unknown agent is refused with RL008'
);
select throws_ok(
    $$select * from runlane.submit_message(null, 'thread-1', 'hi')$$,
    'RL008', null, 'a null agent is an unknown agent (RL008)'
);
select throws_ok(
    $$select * from runlane.submit_message('agent-a', null, 'hi')$$,
    '22004', 'a message needs a thread id', 'a null thread is refused with 22004'
);
select throws_ok(
    $$select * from runlane.submit_message('agent-a', '  ', 'hi')$$,
    '22023', 'a message needs a thread id, got an empty one', 'a blank thread is refused with 22023'
);
select throws_ok(
    $$select * from runlane.submit_message('agent-a', 'thread-1', null)$$,
    '22004', 'a message needs a body', 'a null body is refused with 22004'
);
select is(
    (select count(*)::int from runlane.messages),
    0,
    'refused submissions store nothing'
);

select * from finish();
rollback;
