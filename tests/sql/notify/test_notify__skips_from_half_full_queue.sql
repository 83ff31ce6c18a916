-- runlane._notify queues a notification while the NOTIFY queue is under half full and
-- none from half full on (true/false says which). The reading is replaced inside this
-- transaction (rolled back below): half the real queue is 4 GB.
begin;
select plan(4);

select is(runlane._notify('runlane_test', 'x'), true, 'an empty queue: queued');

create or replace function runlane.notify_queue_usage() returns double precision
language sql stable set search_path = pg_catalog, pg_temp as $$ select 0.4999::float8 $$;
select is(runlane._notify('runlane_test', 'x'), true, 'just under half full: queued');

create or replace function runlane.notify_queue_usage() returns double precision
language sql stable set search_path = pg_catalog, pg_temp as $$ select 0.5::float8 $$;
select is(runlane._notify('runlane_test', 'x'), false, 'half full: skipped');

create or replace function runlane.notify_queue_usage() returns double precision
language sql stable set search_path = pg_catalog, pg_temp as $$ select 1::float8 $$;
select lives_ok(
    $$select runlane.publish_run(runlane_test.queued_run('agent-n'))$$,
    'a full queue: publishing still succeeds'
) from (select runlane_test.agent('agent-n')) as a;

select * from finish();
rollback;
