-- purge_finished compares the instant it would purge up to, now() - p_older_than, with 8
-- days ago, never the interval (whose months count 30 days and days 24 hours): a window
-- that compares as 8 days or more but reaches back less is refused (22023), and nothing
-- is deleted. runlane._retention_cutoff is checked at fixed instants (a March, a leap
-- year's March, a July), purge_finished itself with windows that reach back less than 8
-- days in any month.
begin;
select plan(14);

do $$
begin
    perform runlane_test.agent('agent-cut', 'org-cut');
    perform runlane_test.aged_run('agent-cut', interval '4 days', 3);
end
$$;

-- '-1 year 368 days' compares as 8 days (a year counts 360), but a year ahead is 365 or
-- 366 days, so it reaches back 2 or 3 days, in any month.
select ok(interval '-1 year 368 days' >= interval '8 days', 'the window compares as 8 days');
select throws_ok(
    $$select runlane.purge_finished(interval '-1 year 368 days')$$,
    '22023', null, 'a window reaching back 2 or 3 days is refused, whatever it compares as'
);
select throws_ok(
    $$select runlane.purge_finished(interval '-12 mons 369 days 23 hours')$$,
    '22023', null, 'also in months and hours'
);
select throws_ok(
    $$select runlane.purge_finished(interval '-1 day')$$, '22023', null, 'a negative window is refused'
);
select throws_ok(
    $$select runlane.purge_finished(interval '1 year -360 days')$$, '22023', null,
    'a year less 360 days (5 or 6 days) is refused'
);
select is(
    (select count(*) from runlane.runs) + (select count(*) from runlane.charges),
    2::bigint,
    'the run finished 4 days ago and its charge of this week are still there'
);

-- At fixed instants: in March a month back is 28 or 29 days.
select throws_ok(
    $$select runlane._retention_cutoff(interval '1 mon -22 days', '2027-03-10 12:00Z')$$,
    '22023', null, 'in March, a month less 22 days (6 days) is refused'
);
select throws_ok(
    $$select runlane._retention_cutoff(interval '1 mon -22 days', '2028-03-10 12:00Z')$$,
    '22023', null, 'in a leap year''s March (7 days) too'
);
select is(
    runlane._retention_cutoff(interval '1 mon -22 days', '2027-07-10 12:00Z'),
    '2027-07-02 12:00Z'::timestamptz,
    'in July the same window reaches back 8 days and is taken'
);
select is(
    runlane._retention_cutoff(interval '8 days', '2027-03-10 12:00Z'),
    '2027-03-02 12:00Z'::timestamptz,
    'exactly 8 days is taken'
);
select throws_like(
    $$select runlane._retention_cutoff(interval '1 mon -22 days', '2027-03-10 12:00Z')$$,
    '%2027-03-04%less than 8 days%',
    'the message names the instant the window reaches back to'
);
select throws_ok(
    $$select runlane._retention_cutoff(interval '-300000 years', '2027-03-10 12:00Z')$$,
    '22023', null, 'a window that leaves the timestamp range is 22023, not 22008'
);
select throws_ok(
    $$select runlane._retention_cutoff(interval '300000 years', '2027-03-10 12:00Z')$$,
    '22023', null, 'in either direction'
);
select throws_ok(
    $$select runlane._retention_cutoff(null, '2027-03-10 12:00Z')$$, '22004', null, 'a null window is 22004'
);

select * from finish();
rollback;
