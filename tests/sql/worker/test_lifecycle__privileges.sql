-- The lifecycle functions are security definer, executable by runlane_worker only; the
-- private helpers are executable by nobody but their owner; a worker role drives a run
-- through its whole lifecycle with the functions alone.
begin;
select plan(20);

select is_definer('runlane', 'heartbeat', array['bigint', 'bigint', 'interval'], 'heartbeat is security definer');
select is_definer(
    'runlane', 'finish_run', array['bigint', 'bigint', 'text', 'text', 'numeric'], 'finish_run is security definer'
);
select is_definer(
    'runlane', 'release_run', array['bigint', 'bigint', 'timestamp with time zone', 'text'],
    'release_run is security definer'
);
select is_definer(
    'runlane', 'retry_run', array['bigint', 'bigint', 'text', 'interval'], 'retry_run is security definer'
);
select is_definer(
    'runlane', 'reap_stale', array['timestamp with time zone', 'integer'], 'reap_stale is security definer'
);

select function_privs_are(
    'runlane', 'heartbeat', array['bigint', 'bigint', 'interval'], 'runlane_worker', array['EXECUTE'],
    'the worker role may heartbeat'
);
select function_privs_are(
    'runlane', 'finish_run', array['bigint', 'bigint', 'text', 'text', 'numeric'], 'runlane_worker', array['EXECUTE'],
    'the worker role may finish runs'
);
select function_privs_are(
    'runlane', 'release_run', array['bigint', 'bigint', 'timestamp with time zone', 'text'], 'runlane_worker',
    array['EXECUTE'], 'the worker role may release runs'
);
select function_privs_are(
    'runlane', 'retry_run', array['bigint', 'bigint', 'text', 'interval'], 'runlane_worker', array['EXECUTE'],
    'the worker role may schedule retries'
);
select function_privs_are(
    'runlane', 'reap_stale', array['timestamp with time zone', 'integer'], 'runlane_worker', array['EXECUTE'],
    'the worker role may reap stale runs'
);

select function_privs_are(
    'runlane', 'heartbeat', array['bigint', 'bigint', 'interval'], 'runlane_api', array[]::text[],
    'the api role may not heartbeat'
);
select function_privs_are(
    'runlane', 'release_run', array['bigint', 'bigint', 'timestamp with time zone', 'text'], 'runlane_api',
    array[]::text[], 'the api role may not release runs'
);
select function_privs_are(
    'runlane', 'retry_run', array['bigint', 'bigint', 'text', 'interval'], 'runlane_api', array[]::text[],
    'the api role may not schedule retries'
);
select function_privs_are(
    'runlane', 'reap_stale', array['timestamp with time zone', 'integer'], 'runlane_api', array[]::text[],
    'the api role may not reap'
);
select function_privs_are(
    'runlane', 'finish_run', array['bigint', 'bigint', 'text', 'text', 'numeric'], 'public', array[]::text[],
    'public may not finish runs'
);
select function_privs_are(
    'runlane', '_close_run', array['runlane.runs', 'text', 'text', 'text'], 'runlane_worker', array[]::text[],
    'the worker role cannot call the terminal transition directly'
);
select function_privs_are(
    'runlane', '_notify_computer_waiter', array['text'], 'runlane_worker', array[]::text[],
    'the worker role cannot call the computer-waiter notification directly'
);

-- The worker role, through the functions only.
do $$
begin
    perform runlane_test.agent('agent-role', 'org-role', 'computer-role');
    perform runlane_test.queued_run('agent-role', 'background', 'manual');
    perform runlane_test.claimed_on_computer(runlane_test.last_run('agent-role'), 'worker-1');
    perform set_config('lifecycle_test.run_id', runlane_test.last_run('agent-role')::text, true);
end
$$;
set local role runlane_worker;
select is(
    runlane.heartbeat(current_setting('lifecycle_test.run_id')::bigint, 1),
    true,
    'the worker role heartbeats its run'
);
select lives_ok(
    $$select runlane.finish_run(current_setting('lifecycle_test.run_id')::bigint, 1, 'succeeded', null, 0.5)$$,
    'the worker role finishes its run'
);
select lives_ok(
    'select * from runlane.reap_stale()',
    'the worker role runs the reaper'
);
reset role;

select * from finish();
rollback;
