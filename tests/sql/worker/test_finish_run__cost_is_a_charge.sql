-- A finish's cost (finish_run's p_cost, finish_runs' p_costs) is a charge made at the
-- finish: one ledger row when positive, none for 0, counted by weekly_spend; NaN and
-- infinite costs are refused with 22023 and write nothing.
begin;
select plan(10);

do $$
begin
    perform runlane_test.agent('agent-nan', 'org-fc');
    perform runlane_test.queued_run('agent-nan', 'background', 'manual');
    perform runlane_test.claimed(runlane_test.last_run('agent-nan'));
end
$$;

select throws_ok(
    format('select runlane.finish_run(%s, 1, ''succeeded'', null, ''NaN'')', runlane_test.last_run('agent-nan')),
    '22023', 'cost NaN is not a number', 'finish_run refuses a NaN cost'
);
select throws_ok(
    format('select runlane.finish_run(%s, 1, ''failed'', null, ''Infinity'')', runlane_test.last_run('agent-nan')),
    '22023', 'cost Infinity is not finite', 'finish_run refuses an infinite cost'
);
select is(
    (select r.state from runlane.runs as r where r.run_id = runlane_test.last_run('agent-nan')),
    'running',
    'a refused finish leaves the run running'
);
select lives_ok(
    format('select runlane.finish_run(%s, 1, ''failed'', ''boom'', 2.5)', runlane_test.last_run('agent-nan')),
    'a failed finish with a cost succeeds'
);
select results_eq(
    $$select c.amount, c.owner_id from runlane.charges as c where c.run_id = runlane_test.last_run('agent-nan')$$,
    $$values (2.5::numeric, 'owner-of-org-fc'::text)$$,
    'the finish''s cost is one ledger row'
);

-- finish_runs: a cost of 0 writes no ledger row, a positive one writes one, a NaN is
-- refused for its run alone.
do $$
begin
    perform runlane_test.agent('agent-z', 'org-fc');
    perform runlane_test.agent('agent-p', 'org-fc');
    perform runlane_test.agent('agent-n', 'org-fc');
    perform runlane_test.queued_run('agent-z', 'background', 'manual');
    perform runlane_test.queued_run('agent-p', 'background', 'manual');
    perform runlane_test.queued_run('agent-n', 'background', 'manual');
    perform runlane_test.claimed(runlane_test.last_run('agent-z'));
    perform runlane_test.claimed(runlane_test.last_run('agent-p'));
    perform runlane_test.claimed(runlane_test.last_run('agent-n'));
end
$$;
create temp table fr on commit drop as
select * from runlane.finish_runs(
    array[runlane_test.last_run('agent-z'), runlane_test.last_run('agent-p'), runlane_test.last_run('agent-n')],
    array[1, 1, 1]::bigint[], array['succeeded', 'failed', 'succeeded'], array[null, 'boom', null]::text[],
    array[0, 4, 'NaN']::numeric[], array[0, 0, 0], '{}'::text[], '{}'::text[]
);

select results_eq(
    $$select fr.ok, fr.sqlstate from fr order by fr.run_id$$,
    $$values (true, null::text), (true, null), (false, '22023')$$,
    'the NaN cost is refused (22023) for its run alone'
);
select is(
    (select count(*) from runlane.charges as c where c.run_id = runlane_test.last_run('agent-z')),
    0::bigint,
    'a finish with cost 0 writes no ledger row'
);
select is(
    (select sum(c.amount) from runlane.charges as c where c.run_id = runlane_test.last_run('agent-p')),
    4::numeric,
    'a batched finish with a cost writes its ledger row'
);
select is(
    (select r.state from runlane.runs as r where r.run_id = runlane_test.last_run('agent-n')),
    'running',
    'the run with the NaN cost is left running, nothing written'
);
select is(
    runlane.weekly_spend('owner-of-org-fc', now()),
    6.5::numeric,
    'the week counts both finishes'' costs'
);

select * from finish();
rollback;
