-- message_status: a created message shows its run's state; a held one is 'held' with no
-- run until its thread's run ends, then shows the follow-up run from that commit on, and
-- follows it to its end; RL008 for an unknown message, 22004 for a null id.
begin;
select plan(9);

do $$ begin perform runlane_test.agent('agent-m', 'org-m'); end $$;
create temp table first_msg on commit drop as
select * from runlane.submit_message('agent-m', 'thread-1', 'first');

select results_eq(
    $$select * from runlane.message_status((select message_id from first_msg))$$,
    $$select message_id, 'queued'::text, run_id from first_msg$$,
    'a message that created a run: that run, queued'
);

create temp table f on commit drop as
select runlane_test.claimed((select run_id from first_msg)) as fence;
select results_eq(
    $$select state, run_id from runlane.message_status((select message_id from first_msg))$$,
    $$select 'running'::text, run_id from first_msg$$,
    'its run running'
);

create temp table held on commit drop as
select * from runlane.submit_message('agent-m', 'thread-1', 'while it runs');
select is((select disposition from held), 'held', 'a message to the running thread is held');
select results_eq(
    $$select * from runlane.message_status((select message_id from held))$$,
    $$select message_id, 'held'::text, null::bigint from held$$,
    'a held message: state held, no run yet'
);

do $$ begin perform runlane.finish_run((select run_id from first_msg), (select fence from f), 'succeeded'); end $$;
create temp table follow_up on commit drop as
select s.run_id from runlane.message_status((select message_id from held)) as s;
select isnt((select run_id from follow_up), null, 'once the thread''s run ended the held message has its run');
select results_eq(
    $$select state, run_id from runlane.message_status((select message_id from held))$$,
    $$select 'queued'::text, r.run_id from runlane.runs as r
      where r.source_message_id = (select message_id from held)$$,
    'the follow-up run made from it, queued'
);
select results_eq(
    $$select state from runlane.message_status((select message_id from first_msg))$$,
    $$values ('succeeded'::text)$$,
    'a message whose run finished: the final state'
);
select throws_ok(
    $$select * from runlane.message_status(-7)$$, 'RL008', 'unknown message -7',
    'an unknown message is RL008'
);
select throws_ok($$select * from runlane.message_status(null)$$, '22004', null, 'a null id is 22004');

select * from finish();
rollback;
