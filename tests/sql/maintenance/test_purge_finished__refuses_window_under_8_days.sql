-- purge_finished refuses a window under 8 days (22023, with a hint), so weekly budgets
-- stay exact; a null argument is 22004 and a batch outside 1..10000 is 22023. Nothing is
-- deleted by a refused call.
begin;
select plan(8);

do $$
begin
    perform runlane_test.agent('agent-win', 'org-win');
    perform runlane_test.aged_run('agent-win', interval '7 days 23 hours', 4);
end
$$;

select throws_ok(
    $$select runlane.purge_finished(interval '7 days 23 hours 59 minutes')$$,
    '22023', null, 'a window just under 8 days is refused'
);
select alike(
    runlane_test.error_hint($$select runlane.purge_finished(interval '1 day')$$),
    '%at least 8 days%',
    'the hint says how long the window must be'
);
select throws_ok(
    $$select runlane.purge_finished(interval '-30 days')$$,
    '22023', null, 'a negative window is refused'
);
select throws_ok(
    $$select runlane.purge_finished(null)$$, '22004', null, 'a null window is refused'
);
select throws_ok(
    $$select runlane.purge_finished(interval '30 days', null)$$, '22004', null, 'a null limit is refused'
);
select throws_ok(
    $$select runlane.purge_finished(interval '30 days', 0)$$, '22023', null, 'a limit of 0 is refused'
);
select throws_ok(
    $$select runlane.purge_finished(interval '30 days', 10001)$$, '22023', null,
    'a limit over 10000 is refused'
);
select is(
    (select count(*) from runlane.runs) + (select count(*) from runlane.charges),
    2::bigint,
    'the run finished 7 days 23 hours ago and its charge are still there'
);

select * from finish();
rollback;
