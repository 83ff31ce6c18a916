-- send_message stores and answers as submit_message and queues its notification for a
-- created run only (steering: the run was published when created; held: no run). The
-- notification is recorded here by replacing runlane._notify_run inside this transaction
-- (rolled back below).
begin;
select plan(16);

create table runlane_test.notified (run_id bigint, lane text);
create or replace function runlane._notify_run(p_run_id bigint, p_lane text)
returns void
language sql
set search_path = pg_catalog, pg_temp
as $$ insert into runlane_test.notified values (p_run_id, p_lane) $$;

do $$ begin perform runlane_test.agent('agent-a', p_computer_id => 'computer-1'); end $$;

create temp table sent on commit drop as
select * from runlane.send_message('agent-a', 'thread-1', 'hello there');

select is((select disposition from sent), 'created', 'a first message creates a run');
select results_eq(
    $$select r.lane, r.trigger, r.state, r.thread_id, r.source_message_id, r.computer_id
      from runlane.runs as r where r.run_id = (select run_id from sent)$$,
    $$select 'interactive'::text, 'interactive'::text, 'queued'::text, 'thread-1'::text,
             (select message_id from sent), 'computer-1'::text$$,
    'the created run is the queued interactive run submit_message makes, sourced by the message'
);
select results_eq(
    $$select m.run_id, m.body from runlane.messages as m where m.message_id = (select message_id from sent)$$,
    $$select (select run_id from sent), 'hello there'::text$$,
    'the message is stored attached to its run'
);
select results_eq(
    $$select run_id, lane from runlane_test.notified$$,
    $$select (select run_id from sent), 'interactive'::text$$,
    'the created run is notified once, with its lane'
);

create temp table steer on commit drop as
select * from runlane.send_message('agent-a', 'thread-1', 'and another thing');
select is((select disposition from steer), 'steering', 'a message to a queued run steers it');
select is((select run_id from steer), (select run_id from sent), 'the steering message joins the queued run');
select is((select count(*)::int from runlane_test.notified), 1, 'steering sends no notification');

do $$ begin perform runlane_test.claimed((select run_id from sent)); end $$;
create temp table held on commit drop as
select * from runlane.send_message('agent-a', 'thread-1', 'while running');
select is((select disposition from held), 'held', 'a message to a running run is held');
select is(
    (select m.run_id from runlane.messages as m where m.message_id = (select message_id from held)),
    null,
    'the held message waits with no run'
);
select is((select count(*)::int from runlane_test.notified), 1, 'a held message sends no notification');

-- The keyed form: the first call as submit_message's keyed form, a retry its answer.
create temp table keyed on commit drop as
select * from runlane.send_message('agent-a', 'thread-2', 'hello', 'key-1');
create temp table replayed on commit drop as
select * from runlane.send_message('agent-a', 'thread-2', 'hello', 'key-1');
select is((select disposition from keyed), 'created', 'a keyed first call creates a run');
select results_eq(
    $$select message_id, run_id, disposition from replayed$$,
    $$select message_id, run_id, disposition from keyed$$,
    'a retry with the key returns the first answer'
);
select is(
    (select count(*)::int from runlane.messages where thread_id = 'thread-2'), 1,
    'the retry stores no second message'
);
select is(
    (select count(*)::int from runlane_test.notified where run_id = (select run_id from keyed)), 2,
    'the retry notifies its run again (a harmless hint)'
);
select throws_ok(
    $$select * from runlane.send_message('agent-a', 'thread-9', 'other text', 'key-1')$$,
    'RL010', null, 'the key with other arguments is refused as by submit_message'
);

select throws_ok(
    $$select * from runlane.send_message('agent-a', 'thread-3', null)$$,
    '22004', 'a message needs a body', 'a null body is refused as by submit_message'
);

select * from finish();
rollback;
