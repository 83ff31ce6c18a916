-- purge_finished never changes what weekly_spend reports for the current week: the
-- shortest window (8 days) purges only runs whose charges were made before the week
-- began, and the buckets keep the sum of the charges that remain.
begin;
select plan(4);

do $$
begin
    perform runlane_test.agent('agent-wk', 'org-wk');
    perform runlane_test.aged_run('agent-wk', interval '8 days 1 minute', 100, 'thread-old');
    perform runlane_test.aged_run('agent-wk', interval '7 days 23 hours', 10, 'thread-edge');
    perform runlane_test.aged_run('agent-wk', interval '2 hours', 1, 'thread-new');
end
$$;

create temporary table spend_before on commit drop as
select runlane.weekly_spend('owner-of-org-wk') as spend;

select is(runlane.purge_finished(interval '8 days'), 1, 'only the run finished over 8 days ago is purged');
select is(
    runlane.weekly_spend('owner-of-org-wk'), (select s.spend from spend_before as s),
    'the current week''s spend is unchanged'
);
select is(
    (select sum(c.amount) from runlane.charges as c where c.owner_id = 'owner-of-org-wk'),
    11::numeric,
    'the charges of the runs inside 8 days are kept'
);
select is(
    (select sum(b.amount) from runlane.charge_buckets as b where b.owner_id = 'owner-of-org-wk'),
    11::numeric,
    'the buckets still sum to the ledger'
);

select * from finish();
rollback;
