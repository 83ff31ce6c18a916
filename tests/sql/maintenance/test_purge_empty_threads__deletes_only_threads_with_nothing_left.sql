-- Retention covers the lock rows of chat threads: purge_empty_threads deletes the row of a
-- thread with no run and no held message (what purge_finished leaves of an old thread),
-- keeps every thread that still has a run in any state or lane or a held message, looks
-- at most p_limit rows per call and returns the key to go on from (null at the end);
-- the thread's next message creates its row again.
begin;
select plan(14);

do $$
begin
    perform runlane_test.agent('agent-t', 'org-t');
    update runlane.agents set thread_id = 'thread-bg' where agent_id = 'agent-t';
    -- a thread whose only run is old and finished: purged, then its row is all that is left
    perform runlane_test.aged_run('agent-t', interval '40 days', 0, 'thread-gone');
    perform runlane._thread_lock('agent-t', 'thread-gone');
    perform runlane.purge_finished(interval '30 days');
    -- a thread with a finished run
    perform runlane_test.aged_run('agent-t', interval '1 day', 0, 'thread-done');
    perform runlane._thread_lock('agent-t', 'thread-done');
    -- a thread with a queued chat run and one with a running chat run
    perform runlane.submit_message('agent-t', 'thread-queued', 'hi');
    perform runlane.submit_message('agent-t', 'thread-running', 'hi');
    perform runlane_test.claimed(
        (select r.run_id from runlane.runs as r where r.thread_id = 'thread-running')
    );
    -- a thread whose only content is a held message (its run was purged)
    insert into runlane.messages (org_id, agent_id, thread_id, body)
    values ('org-t', 'agent-t', 'thread-held', 'waiting');
    perform runlane._thread_lock('agent-t', 'thread-held');
    -- a thread whose only run is the agent's unfinished background run
    perform runlane_test.queued_run('agent-t', 'background', 'manual');
    perform runlane._thread_lock('agent-t', 'thread-bg');
    -- three more empty threads, for the window
    perform runlane._thread_lock('agent-t', 'thread-x1');
    perform runlane._thread_lock('agent-t', 'thread-x2');
    perform runlane._thread_lock('agent-t', 'thread-x3');
end
$$;

select is(
    (select count(*)::int from runlane.threads where agent_id = 'agent-t'), 9,
    'nine thread rows: four empty, five with something in them'
);
select results_eq(
    $$select purged, last_agent_id, last_thread_id from runlane.purge_empty_threads(null, null, 3)$$,
    $$values (1, 'agent-t'::text, 'thread-gone'::text)$$,
    'the first three in key order: the emptied thread is purged, and the key to go on from'
);
select results_eq(
    $$select purged, last_agent_id, last_thread_id
      from runlane.purge_empty_threads('agent-t', 'thread-gone', 3)$$,
    $$values (0, 'agent-t'::text, 'thread-running'::text)$$,
    'the next three: held, queued and running threads are kept'
);
select results_eq(
    $$select purged, last_agent_id, last_thread_id
      from runlane.purge_empty_threads('agent-t', 'thread-running', 3)$$,
    $$values (3, 'agent-t'::text, 'thread-x3'::text)$$,
    'the next three are empty: purged'
);
select results_eq(
    $$select purged, last_agent_id, last_thread_id
      from runlane.purge_empty_threads('agent-t', 'thread-x3', 3)$$,
    $$values (0, null::text, null::text)$$,
    'a short window is the end: a null key says the sweep starts over'
);
select results_eq(
    $$select thread_id from runlane.threads where agent_id = 'agent-t' order by thread_id$$,
    $$values ('thread-bg'::text), ('thread-done'), ('thread-held'), ('thread-queued'),
             ('thread-running')$$,
    'every thread with a run (any state, any lane) or a held message keeps its row'
);
select results_eq(
    $$select purged from runlane.purge_empty_threads(null, null)$$,
    $$values (0)$$,
    'a second sweep finds nothing more'
);

-- The thread gets a message again: its row is created again, and it holds the lock.
select lives_ok(
    $$select runlane.submit_message('agent-t', 'thread-gone', 'back again')$$,
    'a purged thread takes a message'
);
select is(
    (select count(*)::int from runlane.threads where agent_id = 'agent-t' and thread_id = 'thread-gone'),
    1,
    'and has its lock row again'
);

select throws_ok(
    $$select * from runlane.purge_empty_threads(null, null, 0)$$, '22023', null,
    'a limit under 1 is refused'
);
select throws_ok(
    $$select * from runlane.purge_empty_threads(null, null, 10001)$$, '22023', null,
    'a limit over 10000 is refused'
);
select throws_ok(
    $$select * from runlane.purge_empty_threads(null, null, null)$$, '22004', null,
    'a null limit is refused'
);
select is(
    has_function_privilege('runlane_worker', 'runlane.purge_empty_threads(text, text, int)', 'execute'),
    true,
    'the worker role runs it (the retention pass)'
);
select is(
    has_function_privilege('runlane_api', 'runlane.purge_empty_threads(text, text, int)', 'execute'),
    false,
    'an application cannot'
);

select * from finish();
rollback;
