-- _timing_row is run_timing plus "event", and NULL instead of an error.
begin;
select plan(4);

do $$ begin perform runlane_test.agent('agent-a'); end $$;
create temp table r on commit drop as
select runlane_test.queued_run('agent-a') as run_id;

select is(
    runlane._timing_row((select run_id from r), 'run.finished') ->> 'event',
    'run.finished',
    'the timing row names its event'
);
select is(
    runlane._timing_row((select run_id from r), 'run.finished') - 'event',
    runlane.run_timing((select run_id from r)),
    'the timing row is run_timing plus the event'
);
select is(
    runlane._timing_row(-1, 'run.finished'),
    null,
    'an unknown run yields NULL instead of an error'
);
select is(
    runlane._timing_row(null, 'run.finished'),
    null,
    'a null run id yields NULL instead of an error'
);

select * from finish();
rollback;
