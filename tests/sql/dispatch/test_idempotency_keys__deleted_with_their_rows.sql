-- idempotency keys live as long as what they name: deleting the run (run_now) or the
-- message (submit_message), as a purge does, deletes the key; nothing else does.
begin;
select plan(4);

do $$ begin perform runlane_test.agent('agent-k'); end $$;
update runlane.agents set thread_id = 'thread-bg' where agent_id = 'agent-k';

create temp table chat on commit drop as
select * from runlane.submit_message('agent-k', 'thread-1', 'hello', 'key-chat');
create temp table manual on commit drop as
select * from runlane.run_now('agent-k', 'key-manual');

update runlane.runs set state = 'succeeded', finished_at = now() where agent_id = 'agent-k';
select is(
    (select count(*)::int from runlane.idempotency_keys where agent_id = 'agent-k'), 2,
    'finishing the runs keeps their keys'
);

delete from runlane.runs where run_id = (select run_id from manual);
select is(
    (select array_agg(idempotency_key)::text from runlane.idempotency_keys where agent_id = 'agent-k'),
    '{key-chat}',
    'deleting the manual run deletes its key'
);

update runlane.runs set source_message_id = null where run_id = (select run_id from chat);
delete from runlane.messages where message_id = (select message_id from chat);
select is(
    (select count(*)::int from runlane.idempotency_keys where agent_id = 'agent-k'), 0,
    'deleting the message deletes its key'
);
delete from runlane.runs where run_id = (select run_id from chat);
select is(
    (select disposition from runlane.submit_message('agent-k', 'thread-1', 'other text', 'key-chat')),
    'created',
    'once purged, the key can name a new request'
);

select * from finish();
rollback;
