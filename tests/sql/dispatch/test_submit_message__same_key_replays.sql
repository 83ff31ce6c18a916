-- submit_message (keyed): a retry with the same key for the same agent returns the first
-- call's answer and creates nothing, whatever the thread became in between.
begin;
select plan(8);

do $$ begin perform runlane_test.agent('agent-k'); end $$;

create temp table first_call on commit drop as
select * from runlane.submit_message('agent-k', 'thread-1', 'hello', 'key-1');

select is((select disposition from first_call), 'created', 'the first keyed call creates a run');
select is(
    (select count(*)::int from runlane.idempotency_keys where agent_id = 'agent-k' and idempotency_key = 'key-1'),
    1,
    'the key is stored with the agent'
);

create temp table retried on commit drop as
select * from runlane.submit_message('agent-k', 'thread-1', 'hello', 'key-1');

select results_eq(
    $$select message_id, run_id, disposition from retried$$,
    $$select message_id, run_id, disposition from first_call$$,
    'the retry returns the first call''s message, run and disposition'
);
select is(
    (select count(*)::int from runlane.messages where agent_id = 'agent-k'), 1,
    'the retry stores no second message'
);
select is(
    (select count(*)::int from runlane.runs where agent_id = 'agent-k'), 1,
    'the retry creates no second run'
);

-- The answer is the first one even after the thread changed: its run is running now.
do $$ begin perform runlane_test.claimed((select run_id from first_call)); end $$;
select results_eq(
    $$select message_id, run_id, disposition from runlane.submit_message('agent-k', 'thread-1', 'hello', 'key-1')$$,
    $$select message_id, run_id, disposition from first_call$$,
    'a retry after the run started still returns the first answer (not held)'
);
select is(
    (select count(*)::int from runlane.messages where agent_id = 'agent-k'), 1,
    'still one message'
);

-- A new key is a new request: the same text is a new message.
select is(
    (select disposition from runlane.submit_message('agent-k', 'thread-1', 'hello', 'key-2')),
    'held',
    'another key with the same arguments is a new message (held: the run is running)'
);

select * from finish();
rollback;
