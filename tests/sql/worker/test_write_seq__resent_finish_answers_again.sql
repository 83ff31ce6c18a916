-- A finish whose reply was lost, resent with its sequence number,
-- succeeds again with the same run.finished timing row instead of RL001, and changes
-- nothing; so do resends of finish_runs, release_run and retry_run. A new number (or no
-- number) after the finish is still refused.
begin;
select plan(13);

do $$
begin
    perform runlane_test.agent('agent-fin', 'org-fin', 'computer-fin');
    perform runlane_test.agent('agent-batch', 'org-fin');
    perform runlane_test.agent('agent-rel', 'org-fin');
    perform runlane_test.agent('agent-retry', 'org-fin');
    perform runlane_test.queued_run('agent-fin', 'background', 'manual');
    perform runlane_test.claimed(runlane_test.last_run('agent-fin'), 'worker-1');
    perform runlane_test.queued_run('agent-batch', 'background', 'manual');
    perform runlane_test.claimed(runlane_test.last_run('agent-batch'), 'worker-1');
    perform runlane_test.queued_run('agent-rel', 'interactive', 'interactive');
    perform runlane_test.claimed(runlane_test.last_run('agent-rel'), 'worker-1');
    perform runlane_test.queued_run('agent-retry', 'interactive', 'interactive');
    perform runlane_test.claimed(runlane_test.last_run('agent-retry'), 'worker-1');
end
$$;

create temp table first_finish on commit drop as
select runlane.finish_run(runlane_test.last_run('agent-fin'), 1, 'succeeded', null, 0.5, 1) as timing;
select is(
    runlane.finish_run(runlane_test.last_run('agent-fin'), 1, 'succeeded', null, 0.5, 1),
    (select timing from first_finish),
    'the resent finish answers the same run.finished timing row'
);
select results_eq(
    format('select state, cost from runlane.runs where run_id = %s', runlane_test.last_run('agent-fin')),
    $$values ('succeeded'::text, 0.5::numeric)$$,
    'charged once'
);
select is(
    (select count(*) from runlane.run_events where run_id = runlane_test.last_run('agent-fin') and event = 'run.finished'),
    1::bigint,
    'journaled once'
);
select throws_ok(
    format('select runlane.finish_run(%s, 1, ''succeeded'', null, 0, 2)', runlane_test.last_run('agent-fin')),
    'RL001', null, 'a new number after the finish is refused'
);
select throws_ok(
    format('select runlane.finish_run(%s, 1, ''succeeded'')', runlane_test.last_run('agent-fin')),
    'RL001', null, 'so is the contract form'
);
select throws_ok(
    format('select runlane.finish_run(%s, 2, ''succeeded'', null, 0, 1)', runlane_test.last_run('agent-fin')),
    'RL001', null, 'and the same number under another fence'
);

-- finish_runs: one number per run for its outputs and finish together.
create temp table batch_args on commit drop as
select array[runlane_test.last_run('agent-batch')] as ids;
select is(
    (
        select f.ok from runlane.finish_runs(
            (select ids from batch_args), array[1]::bigint[], array['succeeded'], array[null]::text[],
            array[0]::numeric[], array[2], array['text', 'text'], array['x', 'y'], array[1]::bigint[]
        ) as f
    ),
    true,
    'finish_runs finishes the run'
);
select results_eq(
    $$select f.ok, f.sqlstate, f.timing ->> 'run.outcome' from runlane.finish_runs(
        (select ids from batch_args), array[1]::bigint[], array['succeeded'], array[null]::text[],
        array[0]::numeric[], array[2], array['text', 'text'], array['x', 'y'], array[1]::bigint[]
    ) as f$$,
    $$values (true, null::text, 'succeeded'::text)$$,
    'its resend is ok again with the run.finished row'
);
select is(
    (select count(*) from runlane.run_outputs where run_id = runlane_test.last_run('agent-batch')),
    2::bigint,
    'the outputs were written once'
);

select is(runlane.release_run(runlane_test.last_run('agent-rel'), 1, null, 'shutdown', 1), true, 'release');
select is(runlane.release_run(runlane_test.last_run('agent-rel'), 1, null, 'shutdown', 1), true, 'its resend is true again');
select is(
    runlane.retry_run(runlane_test.last_run('agent-retry'), 1, 'boom', interval '1 minute', 1),
    'queued', 'retry'
);
select is(
    runlane.retry_run(runlane_test.last_run('agent-retry'), 1, 'boom', interval '1 minute', 1),
    'queued', 'its resend answers queued again'
);

select * from finish();
rollback;
