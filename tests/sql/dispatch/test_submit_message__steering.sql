-- submit_message on a thread with a queued interactive run joins that run (steering).
begin;
select plan(8);

do $$ begin perform runlane_test.agent('agent-a'); end $$;

create temp table first_msg on commit drop as
select * from runlane.submit_message('agent-a', 'thread-1', 'first');
create temp table second_msg on commit drop as
select * from runlane.submit_message('agent-a', 'thread-1', 'second');
create temp table third_msg on commit drop as
select * from runlane.submit_message('agent-a', 'thread-1', 'third');

select is((select disposition from second_msg), 'steering', 'a message to a thread with a queued run is steering');
select is((select run_id from second_msg), (select run_id from first_msg), 'the steering message returns the queued run id');
select is((select disposition from third_msg), 'steering', 'every further message while queued is steering');
select is(
    (select m.run_id from runlane.messages as m where m.message_id = (select message_id from third_msg)),
    (select run_id from first_msg),
    'the steering message row is attached to the queued run'
);
select is(
    (select r.source_message_id from runlane.runs as r where r.run_id = (select run_id from first_msg)),
    (select message_id from first_msg),
    'steering keeps the run''s original source message (the timing origin)'
);
select is(
    (select count(*)::int from runlane.runs where agent_id = 'agent-a' and thread_id = 'thread-1'),
    1,
    'steering creates no other run'
);
select is(
    (select count(*)::int from runlane.messages where run_id = (select run_id from first_msg)),
    3,
    'source and steering messages all share the one run'
);

-- A run re-queued after a failed attempt also collects steering.
do $$ begin perform runlane_test.claimed((select run_id from first_msg)); end $$;
update runlane.runs set state = 'queued', lease_owner = null, lease_expires_at = null
where run_id = (select run_id from first_msg);
select is(
    (select disposition from runlane.submit_message('agent-a', 'thread-1', 'after requeue')),
    'steering',
    'a run back in the queue after an attempt collects steering too'
);

select * from finish();
rollback;
