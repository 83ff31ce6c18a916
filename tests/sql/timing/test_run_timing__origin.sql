-- run_timing counts from the source message, or from the run's creation without one;
-- steering messages never move the origin, held ones make the follow-up's origin.
begin;
select plan(5);

do $$ begin perform runlane_test.agent('agent-a'); end $$;

-- No source message: the origin is the run's creation.
create temp table bg on commit drop as
select runlane_test.queued_run('agent-a', 'background', 'manual') as run_id;
update runlane.runs
set
    created_at = '2030-01-01 00:00:00+00', state = 'succeeded', attempts = 1,
    first_started_at = '2030-01-01 00:00:02+00', first_response_at = '2030-01-01 00:00:03+00',
    finished_at = '2030-01-01 00:00:05+00'
where run_id = (select run_id from bg);
select is(
    runlane.run_timing((select run_id from bg)) -> 'run.pre_run_wait_ms',
    '0'::jsonb,
    'without a source message the origin is the run''s creation (pre_run_wait 0)'
);
select is(
    runlane.run_timing((select run_id from bg)) -> 'run.total_ms',
    '5000'::jsonb,
    'without a source message total_ms counts from the run''s creation'
);

-- Steering messages share the run; the source message stays the origin.
create temp table s on commit drop as
select * from runlane.submit_message('agent-a', 'thread-1', 'first');
create temp table steer on commit drop as
select * from runlane.submit_message('agent-a', 'thread-1', 'steer');
update runlane.messages set created_at = '2030-01-01 00:00:00+00' where message_id = (select message_id from s);
update runlane.messages set created_at = '2030-01-01 00:00:30+00' where message_id = (select message_id from steer);
update runlane.runs set
    created_at = '2030-01-01 00:00:01+00', state = 'succeeded',
    finished_at = '2030-01-01 00:01:00+00'
where run_id = (select run_id from s);
select is(
    runlane.run_timing((select run_id from s)) -> 'run.total_ms',
    '60000'::jsonb,
    'a steering message does not move the origin: total counts from the source message'
);

-- Held messages: the follow-up's origin is the earliest held message, so pre_run_wait
-- includes the time it was held behind earlier work.
create temp table t on commit drop as
select * from runlane.submit_message('agent-a', 'thread-2', 'first');
do $$ begin perform runlane_test.claimed((select run_id from t)); end $$;
create temp table held on commit drop as
select * from runlane.submit_message('agent-a', 'thread-2', 'held');
update runlane.messages set created_at = now() - interval '7 seconds'
where message_id = (select message_id from held);
update runlane.runs set state = 'succeeded', finished_at = now()
where run_id = (select run_id from t);
create temp table follow on commit drop as
select runlane._dispatch_held_messages('agent-a', 'thread-2') as run_id;
select is(
    (select source_message_id from runlane.runs where run_id = (select run_id from follow)),
    (select message_id from held),
    'the follow-up run is sourced at the held message'
);
select is(
    runlane.run_timing((select run_id from follow)) -> 'run.pre_run_wait_ms',
    '7000'::jsonb,
    'the follow-up''s pre_run_wait counts the time its source message was held'
);

select * from finish();
rollback;
