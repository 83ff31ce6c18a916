-- purge_finished deletes the runs that finished before now() - window, with their
-- messages, outputs, journal and charges (their quarter-hour buckets emptied), and
-- keeps every run that finished inside the window, with all its rows.
begin;
select plan(7);

do $$
begin
    perform runlane_test.agent('agent-ret', 'org-ret');
    perform runlane_test.aged_run('agent-ret', interval '40 days', 2, 'thread-1');
    perform runlane_test.aged_run('agent-ret', interval '31 days', 3, 'thread-2');
    perform runlane_test.aged_run('agent-ret', interval '29 days', 5, 'thread-3');
    perform runlane_test.aged_run('agent-ret', interval '1 hour', 7, 'thread-4');
end
$$;

create temporary table before_purge on commit drop as
select
    r.run_id,
    r.thread_id,
    runlane_test.rows_of_run(r.run_id) as row_count
from runlane.runs as r;

select is(runlane.purge_finished(interval '30 days'), 2, 'two runs finished over 30 days ago: 2 purged');
select is(
    (
        select sum(runlane_test.rows_of_run(b.run_id)) from before_purge as b
        where b.thread_id in ('thread-1', 'thread-2')
    ),
    0::numeric,
    'the purged runs are gone with their messages, outputs, events and charges'
);
select results_eq(
    $$select b.run_id, runlane_test.rows_of_run(b.run_id) from before_purge as b
      where b.thread_id in ('thread-3', 'thread-4') order by b.run_id$$,
    $$select b.run_id, b.row_count from before_purge as b
      where b.thread_id in ('thread-3', 'thread-4') order by b.run_id$$,
    'the runs that finished inside the window keep every row'
);
select is(
    (select b.row_count from before_purge as b where b.thread_id = 'thread-3'),
    5::bigint,
    'a kept run has its run, message, output, event and charge rows'
);
select is(
    (select sum(b.amount) from runlane.charge_buckets as b where b.owner_id = 'owner-of-org-ret'),
    12::numeric,
    'the purged charges are taken out of the buckets: 5 + 7 remain'
);
select is(
    (
        select count(*) from runlane.charge_buckets as b
        where b.owner_id = 'owner-of-org-ret' and b.bucket_start < now() - interval '30 days'
    ),
    0::bigint,
    'the emptied buckets are deleted'
);
select is(runlane.purge_finished(interval '30 days'), 0, 'a second call finds nothing more');

select * from finish();
rollback;
