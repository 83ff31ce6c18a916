-- cancel_run on a queued run: canceled at once with its run.finished journal row, also
-- when parked months ahead, and the agent can run again; a second call changes nothing.
begin;
select plan(9);

do $$ begin perform runlane_test.agent('agent-c', 'org-c'); end $$;

create temp table parked on commit drop as
select runlane.create_run('agent-c', 'manual', null, now() + interval '300 days') as run_id;

select is(
    (runlane.run_now('agent-c')).reason, 'already_running',
    'before the Stop, the parked run blocks Run now'
);
select is(
    runlane.cancel_run((select run_id from parked)), 'canceled',
    'a queued run parked 300 days ahead is canceled at once'
);
select results_eq(
    $$select state, reason, finished_at is not null, lease_owner from runlane.runs
      where run_id = (select run_id from parked)$$,
    $$values ('canceled'::text, 'canceled'::text, true, null::text)$$,
    'the run is canceled, reason canceled, finished'
);
select results_eq(
    $$select event, detail ->> 'outcome', detail ->> 'reason' from runlane.run_events
      where run_id = (select run_id from parked) and event = 'run.finished'$$,
    $$values ('run.finished'::text, 'canceled'::text, 'canceled'::text)$$,
    'run.finished is journaled with outcome canceled'
);
select is(
    (runlane.run_now('agent-c')).state, 'queued',
    'the canceled run no longer holds the agent: Run now queues a new run'
);
select is(
    runlane.cancel_run((select run_id from parked)), 'canceled',
    'a second Stop answers canceled again'
);
select is(
    (
        select count(*)::int from runlane.run_events
        where run_id = (select run_id from parked) and event = 'run.finished'
    ),
    1,
    'a second Stop journals nothing more'
);

-- A chat run still queued: canceled too; its thread takes the next message in a new run.
create temp table chat on commit drop as
select * from runlane.submit_message('agent-c', 'thread-c', 'hello');
select is(runlane.cancel_run((select run_id from chat)), 'canceled', 'a queued chat run is canceled');
select is(
    (select disposition from runlane.submit_message('agent-c', 'thread-c', 'again')),
    'created',
    'the next message on the thread gets a new run'
);

select * from finish();
rollback;
