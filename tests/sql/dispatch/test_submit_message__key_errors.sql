-- submit_message / run_now (keyed): bad keys and unknown agents are refused before any
-- key is stored.
begin;
select plan(8);

do $$ begin perform runlane_test.agent('agent-k'); end $$;

select throws_ok(
    $$select * from runlane.submit_message('agent-k', 't', 'hi', null)$$, '22004',
    'the keyed submit_message needs an idempotency key', 'a null key is 22004 (not the unkeyed form)'
);
select throws_ok($$select * from runlane.run_now('agent-k', null)$$, '22004', null, 'run_now: a null key is 22004');
select throws_ok($$select * from runlane.submit_message('agent-k', 't', 'hi', ' ')$$, '22023', null, 'a blank key is 22023');
select throws_ok(
    $$select * from runlane.submit_message('agent-k', 't', 'hi', repeat('k', 257))$$, '22023', null,
    'a key over 256 characters is 22023'
);
select lives_ok(
    $$select * from runlane.submit_message('agent-k', 't', 'hi', repeat('k', 256))$$, 'a 256-character key is fine'
);
select throws_ok(
    $$select * from runlane.submit_message('agent-nope', 't', 'hi', 'key-1')$$, 'RL008', 'unknown agent ''agent-nope''',
    'an unknown agent is RL008'
);
select throws_ok($$select * from runlane.run_now('agent-nope', 'key-1')$$, 'RL008', null, 'run_now: unknown agent RL008');
select is(
    (select count(*)::int from runlane.idempotency_keys), 1,
    'only the accepted call stored a key'
);

select * from finish();
rollback;
