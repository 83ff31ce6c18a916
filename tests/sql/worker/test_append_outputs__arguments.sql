-- append_outputs refuses a call whose arrays are null (22004) or differ in length (22023)
-- whole, writing nothing; empty arrays return no rows. Only runlane_worker may call it.
begin;
select plan(7);

do $$
begin
    perform runlane_test.agent('agent-a', 'org-a');
    perform runlane_test.claimed(runlane_test.queued_run('agent-a', 'interactive', 'interactive'));
end
$$;
create temp table k on commit drop as
select runlane_test.last_run('agent-a') as run_id;

select throws_ok(
    format(
        $$select * from runlane.append_outputs(array[%s]::bigint[], array[1]::bigint[], null, array['text'], array['x'])$$,
        (select run_id from k)
    ),
    '22004', null, 'a null array refuses the call'
);
select throws_ok(
    format(
        $$select * from runlane.append_outputs(array[%1$s, %1$s]::bigint[], array[1, 1]::bigint[],
            array[1, 2]::bigint[], array['text'], array['x', 'y'])$$,
        (select run_id from k)
    ),
    '22023', null, 'arrays of different lengths refuse the call'
);
select is(
    (select count(*)::int from runlane.run_outputs where run_id = (select run_id from k)),
    0,
    'nothing was written'
);
select is_empty(
    $$select * from runlane.append_outputs('{}', '{}', '{}', '{}', '{}')$$,
    'empty arrays return no rows'
);
select function_privs_are(
    'runlane', 'append_outputs', array['bigint[]', 'bigint[]', 'bigint[]', 'text[]', 'text[]'],
    'runlane_worker', array['EXECUTE'],
    'runlane_worker executes append_outputs'
);
select function_privs_are(
    'runlane', 'append_outputs', array['bigint[]', 'bigint[]', 'bigint[]', 'text[]', 'text[]'],
    'runlane_api', array[]::text[],
    'runlane_api does not'
);
select is_definer(
    'runlane', 'append_outputs', array['bigint[]', 'bigint[]', 'bigint[]', 'text[]', 'text[]'],
    'append_outputs is security definer'
);

select * from finish();
rollback;
