-- submit_message on a thread with a running interactive run holds the message.
begin;
select plan(7);

do $$ begin perform runlane_test.agent('agent-a'); end $$;

create temp table first_msg on commit drop as
select * from runlane.submit_message('agent-a', 'thread-1', 'first');
do $$ begin perform runlane_test.claimed((select run_id from first_msg)); end $$;

create temp table held_msg on commit drop as
select * from runlane.submit_message('agent-a', 'thread-1', 'while running');

select is((select disposition from held_msg), 'held', 'a message to a thread with a running run is held');
select is((select run_id from held_msg), null, 'a held message returns no run id');
select isnt((select message_id from held_msg), null, 'a held message is stored and its id returned');
select is(
    (select m.run_id from runlane.messages as m where m.message_id = (select message_id from held_msg)),
    null,
    'the held message row waits with run_id null'
);
select is(
    (select count(*)::int from runlane.runs where agent_id = 'agent-a' and thread_id = 'thread-1'),
    1,
    'a held message creates no run while the thread''s run is running'
);
select is(
    (select disposition from runlane.submit_message('agent-a', 'thread-1', 'another')),
    'held',
    'every further message while running is held too'
);
select is(
    (select count(*)::int from runlane.messages where agent_id = 'agent-a' and thread_id = 'thread-1' and run_id is null),
    2,
    'both held messages wait'
);

select * from finish();
rollback;
