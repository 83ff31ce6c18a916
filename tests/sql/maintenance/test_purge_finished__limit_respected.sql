-- purge_finished deletes at most p_limit runs per call, the longest finished first, and
-- returns p_limit while more may be waiting.
begin;
select plan(5);

do $$
begin
    perform runlane_test.agent('agent-many', 'org-many');
    for i in 1..5 loop
        perform runlane_test.aged_run('agent-many', make_interval(days => 10 + i), 1, 'thread-' || i);
    end loop;
end
$$;

select is(runlane.purge_finished(interval '8 days', 2), 2, 'the first call purges 2');
select results_eq(
    'select thread_id from runlane.runs order by thread_id',
    $$values ('thread-1'::text), ('thread-2'), ('thread-3')$$,
    'the two longest finished (thread-5, thread-4) went first'
);
select is(runlane.purge_finished(interval '8 days', 2), 2, 'the second call purges 2');
select is(runlane.purge_finished(interval '8 days', 2), 1, 'the third call purges the last one: fewer than the limit');
select is((select count(*) from runlane.messages), 0::bigint, 'no message is left');

select * from finish();
rollback;
