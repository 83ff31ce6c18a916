-- thread_history returns the earlier runs of the run's thread (same agent) as user
-- messages followed by each run's joined visible reply, to the owner only.
begin;
select plan(9);

do $$ begin perform runlane_test.agent('agent-a'); perform runlane_test.agent('agent-b'); end $$;

-- Turn 1: two messages answered in two visible chunks (and an invisible progress row).
create temp table r1 on commit drop as
select * from runlane.submit_message('agent-a', 'thread-1', 'first');
do $$ begin perform runlane.submit_message('agent-a', 'thread-1', 'also first'); end $$;
do $$
declare
    v_run bigint := (select run_id from r1);
    v_fence bigint := runlane_test.claimed((select run_id from r1));
begin
    perform runlane.append_output(v_run, v_fence, 'progress', 'thinking');
    perform runlane.append_output(v_run, v_fence, 'text', 'Hel');
    perform runlane.append_output(v_run, v_fence, 'final', 'lo');
    perform runlane.finish_run(v_run, v_fence, 'succeeded');
end $$;

-- Other threads and agents are not this thread's history.
do $$
declare
    v_run bigint := (select run_id from runlane.submit_message('agent-a', 'thread-2', 'elsewhere'));
    v_fence bigint := runlane_test.claimed(v_run);
begin
    perform runlane.append_output(v_run, v_fence, 'text', 'not this thread');
    perform runlane.finish_run(v_run, v_fence, 'succeeded');
end $$;
do $$ begin perform runlane.submit_message('agent-b', 'thread-1', 'other agent'); end $$;

-- Turn 2: failed without a visible reply.
do $$
declare
    v_run bigint := (select run_id from runlane.submit_message('agent-a', 'thread-1', 'between'));
    v_fence bigint := runlane_test.claimed(v_run);
begin
    perform runlane.finish_run(v_run, v_fence, 'failed', 'boom');
end $$;

-- Turn 3: the run asking for its history.
create temp table r2 on commit drop as
select * from runlane.submit_message('agent-a', 'thread-1', 'second');
create temp table f on commit drop as
select runlane_test.claimed((select run_id from r2)) as fence;
-- Held while turn 2 runs: a later turn's message, not history.
do $$ begin perform runlane.submit_message('agent-a', 'thread-1', 'held'); end $$;

select results_eq(
    $$select role, body from runlane.thread_history((select run_id from r2), (select fence from f))$$,
    $$values ('user'::text, 'first'::text), ('user', 'also first'), ('assistant', 'Hello'),
             ('user', 'between')$$,
    'earlier turns: messages, then the visible reply joined (none for a run without one); '
    || 'not the run''s own, held or other threads'' messages'
);
select is(
    (select min(run_id) from runlane.thread_history((select run_id from r2), (select fence from f))),
    (select run_id from r1),
    'rows name the earlier run they belong to'
);
select results_eq(
    $$select body from runlane.thread_history((select run_id from r2), (select fence from f), 1)$$,
    $$values ('between'::text)$$,
    'p_limit keeps the latest earlier runs'
);
-- A run without a thread has no history.
create temp table bg on commit drop as
select runlane_test.queued_run('agent-a') as run_id;
select is_empty(
    format(
        'select * from runlane.thread_history(%s, %s)',
        (select run_id from bg), runlane_test.claimed((select run_id from bg))
    ),
    'a run without a thread has no history'
);

select throws_ok(
    format('select * from runlane.thread_history(%s, %s)', (select run_id from r2), (select fence + 1 from f)),
    'RL001', null, 'another fence is refused (RL001)'
);
select throws_ok(
    format('select * from runlane.thread_history(%s, 1)', (select run_id from r1)),
    'RL001', null, 'a finished run''s history is refused (RL001)'
);
select throws_ok(
    $$select * from runlane.thread_history(-1, 1)$$,
    'RL008', null, 'an unknown run is refused (RL008)'
);
select throws_ok(
    format('select * from runlane.thread_history(%s, %s, null)', (select run_id from r2), (select fence from f)),
    '22004', null, 'a null limit is refused (22004)'
);
select throws_ok(
    format('select * from runlane.thread_history(%s, %s, 0)', (select run_id from r2), (select fence from f)),
    '22023', null, 'a limit outside 1..1000 is refused (22023)'
);

select * from finish();
rollback;
