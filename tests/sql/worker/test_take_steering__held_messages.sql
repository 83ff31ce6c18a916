-- take_steering attaches the thread's held messages to the running run, in order, once.
begin;
select plan(9);

do $$ begin perform runlane_test.agent('agent-a'); end $$;
create temp table s on commit drop as
select * from runlane.submit_message('agent-a', 'thread-1', 'first');
create temp table f on commit drop as
select runlane_test.claimed((select run_id from s)) as fence;

select is(
    (select count(*)::int from runlane.take_steering((select run_id from s), (select fence from f))),
    0,
    'with nothing held, take_steering returns no rows'
);

do $$ begin perform runlane.submit_message('agent-a', 'thread-1', 'held one'); end $$;
do $$ begin perform runlane.submit_message('agent-a', 'thread-1', 'held two'); end $$;
do $$ begin perform runlane.submit_message('agent-a', 'thread-2', 'other thread'); end $$;
do $$ begin perform runlane_test.agent('agent-b'); end $$;
do $$ begin perform runlane.submit_message('agent-b', 'thread-1', 'other agent'); end $$;

create temp table taken on commit drop as
select * from runlane.take_steering((select run_id from s), (select fence from f));

select results_eq(
    $$select body from taken order by message_id$$,
    $$values ('held one'::text), ('held two')$$,
    'the held messages of this thread are returned in order'
);
select ok(
    (select bool_and(created_at is not null) from taken),
    'each taken message carries its submission time'
);
select is(
    (
        select count(*)::int
        from runlane.messages as m inner join taken on m.message_id = taken.message_id
        where m.run_id = (select run_id from s)
    ),
    2,
    'the taken messages are attached to the running run'
);
select is(
    (select count(*)::int from runlane.messages where agent_id = 'agent-b' and run_id is null),
    0,
    'another agent''s thread of the same id is untouched (it got its own run)'
);
select is(
    (select count(*)::int from runlane.take_steering((select run_id from s), (select fence from f))),
    0,
    'messages are taken once: a second call returns nothing new'
);

-- A running background run takes no chat messages.
do $$ begin perform runlane_test.agent('agent-c'); end $$;
update runlane.agents set thread_id = 'thread-9' where agent_id = 'agent-c';
create temp table bg on commit drop as
select runlane_test.queued_run('agent-c', 'background', 'manual') as run_id;
insert into runlane.messages (org_id, agent_id, thread_id, body)
values ('org-a', 'agent-c', 'thread-9', 'waiting');
select is(
    (
        select count(*)::int
        from runlane.take_steering(
            (select run_id from bg), runlane_test.claimed((select run_id from bg))
        )
    ),
    0,
    'a background run on the thread id takes no chat messages'
);

-- Fenced: after a re-claim the old owner is refused.
do $$ begin perform runlane_test.claimed((select run_id from s)); end $$;
select throws_ok(
    format('select * from runlane.take_steering(%s, %s)', (select run_id from s), (select fence from f)),
    'RL001', null, 'a fenced-out owner cannot take steering (RL001)'
);
select throws_ok(
    $$select * from runlane.take_steering(-1, 1)$$,
    'RL008', null, 'take_steering on an unknown run is refused with RL008'
);

select * from finish();
rollback;
