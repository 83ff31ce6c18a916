-- A worker write resent with the sequence number of a write already
-- applied under the same fence (its reply was lost) changes nothing and answers as the
-- first time did; the next number is a new write; the contract forms never deduplicate.
begin;
select plan(12);

do $$
begin
    perform runlane_test.agent('agent-seq', 'org-seq');
    perform runlane_test.queued_run('agent-seq', 'interactive', 'interactive');
    perform runlane_test.claimed(runlane_test.last_run('agent-seq'), 'worker-1');
end
$$;

select isnt(
    runlane.append_output(runlane_test.last_run('agent-seq'), 1, 'text', 'A', 1),
    null,
    'the first visible output (seq 1) returns its first-response timing row'
);
select is(
    runlane.append_output(runlane_test.last_run('agent-seq'), 1, 'text', 'A', 1) ->> 'event',
    'run.first_response',
    'its resend returns the first-response row again (the lost reply carried it)'
);
select lives_ok(
    format('select runlane.append_output(%s, 1, ''text'', ''B'', 2)', runlane_test.last_run('agent-seq')),
    'seq 2 is a new write'
);
select lives_ok(
    format('select runlane.append_output(%s, 1, ''text'', ''A'', 1)', runlane_test.last_run('agent-seq')),
    'a resend of an older seq is still answered'
);
select results_eq(
    format('select body from runlane.run_outputs where run_id = %s order by output_id', runlane_test.last_run('agent-seq')),
    $$values ('A'::text), ('B')$$,
    'each output exactly once, in order'
);

select lives_ok(
    format('select runlane.save_checkpoint(%s, 1, ''{"n": 3}'', 3)', runlane_test.last_run('agent-seq')),
    'checkpoint seq 3'
);
select lives_ok(
    format('select runlane.save_checkpoint(%s, 1, ''{"n": 4}'', 4)', runlane_test.last_run('agent-seq')),
    'checkpoint seq 4'
);
select lives_ok(
    format('select runlane.save_checkpoint(%s, 1, ''{"n": 3}'', 3)', runlane_test.last_run('agent-seq')),
    'a late resend of checkpoint seq 3'
);
select is(
    (select r.checkpoint from runlane.runs as r where r.run_id = runlane_test.last_run('agent-seq')),
    '{"n": 4}'::jsonb,
    'never overwrites the newer checkpoint'
);

select lives_ok(
    format('select runlane.append_output(%s, 1, ''text'', ''C'')', runlane_test.last_run('agent-seq')),
    'the contract form (no seq) writes'
);
select is(
    (select count(*) from runlane.run_outputs where run_id = runlane_test.last_run('agent-seq')),
    3::bigint,
    'and is not deduplicated'
);
select throws_ok(
    format('select runlane.append_output(%s, 1, ''text'', ''D'', 0)', runlane_test.last_run('agent-seq')),
    '22023', null, 'a sequence number below 1 is refused'
);

select * from finish();
rollback;
