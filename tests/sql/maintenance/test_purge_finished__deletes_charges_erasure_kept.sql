-- purge_finished deletes the charges an erasure kept without their run once they are as
-- old as the runs it purges (taking them out of their buckets), and keeps the younger
-- ones: weekly_spend stays exact and every bucket stays the sum of its charges.
begin;
select plan(5);

do $$
begin
    perform runlane_test.agent('agent-pe', 'org-pe');
    perform runlane_test.aged_run('agent-pe', interval '9 days', 7, 'thread-pe');
    perform runlane_test.aged_run('agent-pe', interval '1 hour', 1, 'thread-pe');
    perform runlane.erase_thread('agent-pe', 'thread-pe');
end
$$;

create temporary table spend_before on commit drop as
select runlane.weekly_spend('owner-of-org-pe') as spend;

select is(
    (select count(*) from runlane.charges as c where c.run_id is null), 2::bigint,
    'the erasure kept both charges without their runs'
);
select is(runlane.purge_finished(interval '8 days'), 0, 'no run is left to purge');
select is(
    (select array_agg(c.amount) from runlane.charges as c where c.owner_id = 'owner-of-org-pe'), array[1::numeric],
    'the charge older than the window is deleted, the younger one kept'
);
select is(
    (select array_agg(b.amount) from runlane.charge_buckets as b where b.owner_id = 'owner-of-org-pe'),
    array[1::numeric], 'its bucket went with it: the buckets still sum to the ledger'
);
select is(runlane.weekly_spend('owner-of-org-pe'), (select s.spend from spend_before as s), 'the week''s spend is unchanged');

select * from finish();
rollback;
