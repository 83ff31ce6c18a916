-- _thread_lock locks a row of runlane.threads (created on first use, one per thread),
-- not an advisory key; locking a thread twice in one transaction is harmless.
begin;
select plan(4);

-- (a thread's row names its agent's organization: the agent exists)
do $$ begin perform runlane_test.agent('agent-a'); end $$;

select lives_ok($$select runlane._thread_lock('agent-a', 'thread-1')$$, 'first use creates and locks the row');
select lives_ok($$select runlane._thread_lock('agent-a', 'thread-1')$$, 'a second lock in the same transaction');
select is(
    (select count(*)::int from runlane.threads where agent_id = 'agent-a' and thread_id = 'thread-1'), 1,
    'one row per thread'
);
select is(
    (select count(*)::int from pg_locks where locktype = 'advisory' and pid = pg_backend_pid()), 0,
    'no advisory lock is taken'
);

select * from finish();
rollback;
