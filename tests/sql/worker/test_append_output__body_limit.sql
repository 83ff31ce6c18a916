-- An output body is at most 1 MB: append_output refuses a larger one with 22023, and
-- finish_runs refuses that run only (its outputs and finish roll back together).
begin;
select plan(6);

do $$ begin perform runlane_test.agent('agent-o', 'org-o'); end $$;
create temp table q on commit drop as
select runlane_test.queued_run('agent-o', 'interactive', 'interactive') as run_id;
do $$ begin perform runlane_test.claimed((select run_id from q)); end $$;

select throws_ok(
    $$select runlane.append_output((select run_id from q), 1, 'text', repeat('o', 1048577))$$,
    '22023', null, 'append_output refuses a body over 1 MB'
);
select is(runlane_test.row_count('run_outputs'), 0::bigint, 'nothing was written');
select lives_ok(
    $$select runlane.append_output((select run_id from q), 1, 'text', repeat('o', 1048576))$$,
    'a body of exactly 1 MB is accepted'
);
select results_eq(
    $$select ok, sqlstate from runlane.finish_runs(
        array[(select run_id from q)], array[1::bigint], array['succeeded'], array[null::text],
        array[0::numeric], array[2], array['text', 'text'], array['fine', repeat('o', 1048577)])$$,
    $$values (false, '22023'::text)$$,
    'finish_runs refuses the run with an output over 1 MB'
);
select is(runlane_test.row_count('run_outputs'), 1::bigint, 'none of that run''s batch outputs stayed');
select is(
    (select state from runlane.runs where run_id = (select run_id from q)), 'running',
    'and it was not finished'
);

select * from finish();
rollback;
