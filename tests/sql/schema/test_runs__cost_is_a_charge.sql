-- runs.cost is a real amount (migration 0006): no writer, not even one that bypasses
-- finish_run, can store NaN, an infinity or a negative cost.
begin;
select plan(4);

do $$ begin perform runlane_test.agent('agent-k', 'org-k'); end $$;
create temp table q on commit drop as
select runlane_test.queued_run('agent-k') as run_id;

select throws_ok(
    $$update runlane.runs set cost = 'NaN' where run_id = (select run_id from q)$$,
    '23514', null, 'a NaN cost is refused by the table itself'
);
select throws_ok(
    $$update runlane.runs set cost = 'Infinity' where run_id = (select run_id from q)$$,
    '23514', null, 'an infinite cost is refused'
);
select throws_ok(
    $$update runlane.runs set cost = -1 where run_id = (select run_id from q)$$,
    '23514', null, 'a negative cost is refused'
);
select lives_ok(
    $$update runlane.runs set cost = 12.5 where run_id = (select run_id from q)$$,
    'a real amount is stored'
);

select * from finish();
rollback;
