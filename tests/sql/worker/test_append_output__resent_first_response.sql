-- A write that stamped the first response and whose reply was lost is resent with its
-- number: the resend writes nothing and still answers the run.first_response row (the
-- one the lost reply carried), through append_output and through finish_runs. Only the
-- attempt that wrote the first visible output gets it back; a hidden output never does.
begin;
select plan(10);

do $$
begin
    perform runlane_test.agent('agent-fr', 'org-fr');
    perform runlane_test.queued_run('agent-fr', 'interactive', 'interactive');
    perform runlane_test.claimed(runlane_test.last_run('agent-fr'), 'worker-1');
    perform runlane_test.agent('agent-fb', 'org-fr');
    perform runlane_test.queued_run('agent-fb', 'background', 'manual');
    perform runlane_test.claimed(runlane_test.last_run('agent-fb'), 'worker-1');
end
$$;

select is(
    runlane.append_output(runlane_test.last_run('agent-fr'), 1, 'reasoning', 'thinking', 1),
    null,
    'a hidden output stamps nothing'
);
create temp table stamped on commit drop as
select runlane.append_output(runlane_test.last_run('agent-fr'), 1, 'text', 'Hello', 2) as timing;
select is(
    (select timing ->> 'event' from stamped), 'run.first_response',
    'the first visible output returns the run.first_response row'
);
select is(
    runlane.append_output(runlane_test.last_run('agent-fr'), 1, 'text', 'Hello', 2),
    (select timing from stamped),
    'its resend (the reply was lost) answers the same run.first_response row'
);
select is(
    runlane.append_output(runlane_test.last_run('agent-fr'), 1, 'reasoning', 'thinking', 1),
    null,
    'a resent hidden output still answers null'
);
select is(
    (select count(*)::int from runlane.run_outputs where run_id = runlane_test.last_run('agent-fr')),
    2,
    'the resends wrote nothing'
);

-- A later attempt: the first response is the earlier attempt's, never this one's.
select lives_ok(
    format(
        'select runlane.retry_run(%s, 1, %L, interval ''0 seconds'', 3)',
        runlane_test.last_run('agent-fr'), 'ValueError: again'
    ),
    'the attempt fails and is retried'
);
do $$ begin perform runlane_test.claimed(runlane_test.last_run('agent-fr'), 'worker-2'); end $$;
select is(
    runlane.append_output(runlane_test.last_run('agent-fr'), 2, 'text', 'Hello again', 1),
    null,
    'a visible output of a later attempt is no first response'
);
select is(
    runlane.append_output(runlane_test.last_run('agent-fr'), 2, 'text', 'Hello again', 1),
    null,
    'nor is its resend'
);

-- finish_runs: outputs and the finish under one number, the reply lost, resent.
create temp table batch_finish on commit drop as
select f.first_response
from runlane.finish_runs(
    array[runlane_test.last_run('agent-fb')], array[1::bigint], array['succeeded'],
    array[null::text], array[0::numeric], array[1], array['final'], array['Done'],
    array[1::bigint]
) as f;
select is(
    (select first_response ->> 'event' from batch_finish), 'run.first_response',
    'finish_runs returns the first response its output stamped'
);
select is(
    (
        select f.first_response -> 'run.first_response_ms'
        from runlane.finish_runs(
            array[runlane_test.last_run('agent-fb')], array[1::bigint], array['succeeded'],
            array[null::text], array[0::numeric], array[1], array['final'], array['Done'],
            array[1::bigint]
        ) as f
    ),
    (select first_response -> 'run.first_response_ms' from batch_finish),
    'its resend answers the run.first_response row again (the run finished since: with its outcome)'
);

select * from finish();
rollback;
