-- A thread's first lock writes its row of runlane.threads once: the inserted row is the
-- lock (no other transaction sees it before this one ends), so no row lock is written
-- on top of it (xmax stays empty). A row that already exists is locked for no key update.
begin;
select plan(3);

-- (a thread's row names its agent's organization: the agent exists)
do $$ begin perform runlane_test.agent('agent-a'); end $$;

select runlane._thread_lock('agent-a', 'thread-new');

select is(
    (
        select t.xmax::text from runlane.threads as t
        where t.agent_id = 'agent-a' and t.thread_id = 'thread-new'
    ),
    '0',
    'a created thread row carries no row lock: written once'
);

insert into runlane.threads (org_id, agent_id, thread_id) values ('org-a', 'agent-a', 'thread-old');
select runlane._thread_lock('agent-a', 'thread-old');

select isnt(
    (
        select t.xmax::text from runlane.threads as t
        where t.agent_id = 'agent-a' and t.thread_id = 'thread-old'
    ),
    '0',
    'an existing thread row is locked'
);

select is(
    (select count(*)::int from runlane.threads as t where t.agent_id = 'agent-a'),
    2,
    'one row per thread'
);

select * from finish();
rollback;
