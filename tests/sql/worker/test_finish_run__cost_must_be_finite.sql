-- A cost is a real amount: NaN, the infinities and absurd amounts are refused with 22023
-- (one NaN in runs.cost made every later weekly_spend of its owner NaN, for good), by
-- finish_run and by finish_runs for that run only.
begin;
select plan(8);

do $$ begin perform runlane_test.agent('agent-c', 'org-c'); end $$;
create temp table q on commit drop as
select runlane_test.queued_run('agent-c') as run_id;
do $$ begin perform runlane_test.claimed((select run_id from q)); end $$;

select throws_ok(
    $$select runlane.finish_run((select run_id from q), 1, 'succeeded', null, 'NaN')$$,
    '22023', null, 'finish_run refuses a NaN cost'
);
select throws_ok(
    $$select runlane.finish_run((select run_id from q), 1, 'succeeded', null, 'Infinity')$$,
    '22023', null, 'finish_run refuses an infinite cost'
);
select throws_ok(
    $$select runlane.finish_run((select run_id from q), 1, 'succeeded', null, 1e13)$$,
    '22023', null, 'finish_run refuses a cost over 1e12'
);
select is(
    (select state from runlane.runs where run_id = (select run_id from q)), 'running',
    'a refused finish left the run running'
);
select results_eq(
    $$select ok, sqlstate from runlane.finish_runs(
        array[(select run_id from q)], array[1::bigint], array['succeeded'], array[null::text],
        array['NaN'::numeric], array[0], array[]::text[], array[]::text[])$$,
    $$values (false, '22023'::text)$$,
    'finish_runs refuses a NaN cost for that run with 22023'
);
select lives_ok(
    $$select runlane.finish_run((select run_id from q), 1, 'succeeded', null, 0.5)$$,
    'a finite cost is accepted'
);
select is(
    runlane.weekly_spend('owner-of-org-c'), 0.5,
    'weekly_spend stays a number'
);
select is(
    runlane.weekly_spend('owner-of-org-c') = 'NaN'::numeric, false,
    'weekly_spend is not NaN'
);

select * from finish();
rollback;
