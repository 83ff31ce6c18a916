-- _dispatch_held_messages makes the follow-up run from held messages once the thread's
-- run stopped running, with the earliest held message as its source.
begin;
select plan(13);

do $$ begin perform runlane_test.agent('agent-a', p_computer_id => 'computer-1'); end $$;
create temp table s on commit drop as
select * from runlane.submit_message('agent-a', 'thread-1', 'first');
do $$ begin perform runlane_test.claimed((select run_id from s)); end $$;

-- Nothing held: nothing happens.
select is(
    runlane._dispatch_held_messages('agent-a', 'thread-1'),
    null,
    'with nothing held it returns null'
);

create temp table h1 on commit drop as
select * from runlane.submit_message('agent-a', 'thread-1', 'held one');
create temp table h2 on commit drop as
select * from runlane.submit_message('agent-a', 'thread-1', 'held two');
-- A held message of another thread is not this thread's.
do $$ begin perform runlane.submit_message('agent-a', 'thread-2', 'other thread'); end $$;

-- Still running: messages stay held.
select is(
    runlane._dispatch_held_messages('agent-a', 'thread-1'),
    null,
    'while the thread still has a running run, held messages stay held'
);

update runlane.runs set
    state = 'succeeded', finished_at = now(),
    lease_owner = null, lease_expires_at = null
where run_id = (select run_id from s);

create temp table follow on commit drop as
select runlane._dispatch_held_messages('agent-a', 'thread-1') as run_id;

select isnt((select run_id from follow), null, 'after the run finished, a follow-up run is created');
select isnt((select run_id from follow), (select run_id from s), 'the follow-up is a new run');
select is(
    (select source_message_id from runlane.runs where run_id = (select run_id from follow)),
    (select message_id from h1),
    'the follow-up run''s source is the earliest held message'
);
select results_eq(
    $$select message_id from runlane.messages where run_id = (select run_id from follow) order by 1$$,
    $$select message_id from h1 union all select message_id from h2$$,
    'every held message of the thread is attached to the follow-up run'
);
select results_eq(
    $$select lane, trigger, state, thread_id, computer_id, model
      from runlane.runs where run_id = (select run_id from follow)$$,
    $$values ('interactive'::text, 'interactive'::text, 'queued'::text, 'thread-1'::text,
              'computer-1'::text, 'test-model'::text)$$,
    'the follow-up is a queued interactive run of the thread with the agent''s computer and model'
);
select is(
    (select count(*)::int from runlane.messages where thread_id = 'thread-2' and run_id is not null and body = 'other thread'),
    1,
    'messages of other threads are untouched (that one had its own run)'
);
select is(
    runlane._dispatch_held_messages('agent-a', 'thread-1'),
    null,
    'dispatching again with nothing held returns null'
);

-- Queued run present: held messages join it.
do $$ begin perform runlane_test.claimed((select run_id from follow)); end $$;
create temp table h3 on commit drop as
select * from runlane.submit_message('agent-a', 'thread-1', 'held three');
select is((select disposition from h3), 'held', 'a message to the running follow-up is held');
update runlane.runs set state = 'queued', lease_owner = null, lease_expires_at = null
where run_id = (select run_id from follow);
select is(
    runlane._dispatch_held_messages('agent-a', 'thread-1'),
    (select run_id from follow),
    'when the thread''s run went back to the queue, held messages join it'
);
select is(
    (select run_id from runlane.messages where message_id = (select message_id from h3)),
    (select run_id from follow),
    'the held message is attached to the re-queued run'
);
select is(
    (
        select count(*)::int
        from runlane.runs where
            agent_id = 'agent-a' and thread_id = 'thread-1'
            and state in ('queued', 'running')
    ),
    1,
    'the thread still has exactly one unfinished interactive run'
);

select * from finish();
rollback;
