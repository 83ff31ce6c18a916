-- send_message commits the message and its run when the notification is skipped (a
-- half-full NOTIFY queue) and when the notification itself fails: publication never
-- fails the call. The readings are replaced inside this transaction (rolled back below).
begin;
select plan(6);

do $$ begin perform runlane_test.agent('agent-a'); end $$;

create or replace function runlane.notify_queue_usage() returns double precision
language sql stable set search_path = pg_catalog, pg_temp as $$ select 1::float8 $$;

create temp table skipped on commit drop as
select * from runlane.send_message('agent-a', 'thread-1', 'the queue is full');
select is((select disposition from skipped), 'created', 'a full NOTIFY queue: the message still creates its run');
select is(
    (select count(*)::int from runlane.runs where run_id = (select run_id from skipped) and state = 'queued'),
    1,
    'and the run is queued for the scan to find'
);

create or replace function runlane._notify_run(p_run_id bigint, p_lane text)
returns void
language plpgsql
set search_path = pg_catalog, pg_temp
as $$ begin raise exception 'notification broken' using errcode = '54000'; end $$;

create temp table failed on commit drop as
select * from runlane.send_message('agent-a', 'thread-2', 'the notification fails');
select is((select disposition from failed), 'created', 'a failing notification: the message still creates its run');
select results_eq(
    $$select m.run_id, r.source_message_id
      from runlane.messages as m join runlane.runs as r on r.org_id = m.org_id and r.run_id = m.run_id
      where m.message_id = (select message_id from failed)$$,
    $$select (select run_id from failed), (select message_id from failed)$$,
    'the message and its run are both kept'
);
select lives_ok(
    $$select * from runlane.send_message('agent-a', 'thread-3', 'keyed', 'key-1')$$,
    'the keyed form lives through a failing notification too'
);
select is(
    (select count(*)::int from runlane.idempotency_keys where idempotency_key = 'key-1' and run_id is not null),
    1,
    'and its key keeps the answer'
);

select * from finish();
rollback;
