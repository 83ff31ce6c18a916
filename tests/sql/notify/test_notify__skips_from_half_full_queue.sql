-- runlane._notify queues a notification while the NOTIFY queue is under half full and
-- none from half full on (true/false says which); so does its array form, for all of
-- its payloads at once. The reading is replaced inside this
-- transaction (rolled back below): half the real queue is 4 GB.
begin;
select plan(7);

select is(runlane._notify('runlane_test', 'x'), true, 'an empty queue: queued');

create or replace function runlane.notify_queue_usage() returns double precision
language sql stable set search_path = pg_catalog, pg_temp as $$ select 0.4999::float8 $$;
select is(runlane._notify('runlane_test', 'x'), true, 'just under half full: queued');
select is(runlane._notify('runlane_test', array['x', 'y']), true, 'the array form: queued');

create or replace function runlane.notify_queue_usage() returns double precision
language sql stable set search_path = pg_catalog, pg_temp as $$ select 0.5::float8 $$;
select is(runlane._notify('runlane_test', 'x'), false, 'half full: skipped');
select is(runlane._notify('runlane_test', array['x', 'y']), false, 'the array form: skipped');
select lives_ok(
    $$select runlane._notify_stream_end(array[1, 2]::bigint[])$$,
    'a batch of stream ends from a half-full queue: nothing sent, no error'
);

create or replace function runlane.notify_queue_usage() returns double precision
language sql stable set search_path = pg_catalog, pg_temp as $$ select 1::float8 $$;
select lives_ok(
    $$select runlane.publish_run(runlane_test.queued_run('agent-n'))$$,
    'a full queue: publishing still succeeds'
) from (select runlane_test.agent('agent-n')) as a;

select * from finish();
rollback;
