-- Wake times are bounded: within one year of now (past ones mean "at once"). A wake time
-- in year 294276 would park the agent's one unfinished background run for ever (every
-- later trigger skipped as already_running); create_run, publish_run and release_run
-- refuse it with 22023 and a hint, and write nothing.
begin;
select plan(11);

do $$ begin perform runlane_test.agent('agent-w', 'org-w'); end $$;

select throws_ok(
    $$select runlane.create_run('agent-w', 'manual', null, '294276-12-31 23:59:59+00')$$,
    '22023', null, 'create_run refuses a wake time in year 294276'
);
select throws_ok(
    $$select runlane.create_run('agent-w', 'manual', null, now() + interval '1 year 1 day')$$,
    '22023', null, 'create_run refuses a wake time more than a year ahead'
);
select throws_ok(
    $$select runlane.create_run('agent-w', 'manual', null, '4713-01-01 00:00:00+00 BC')$$,
    '22023', null, 'create_run refuses a wake time far in the past'
);
select is(
    runlane_test.error_hint($$select runlane.create_run('agent-w', 'manual', null, now() + interval '2 years')$$),
    'A wake time is within one year of now (past ones mean at once), or null for at once.',
    'the refusal says the bound'
);
select is(
    runlane_test.row_count('runs'), 0::bigint,
    'a refused wake time wrote no run'
);
select lives_ok(
    $$select runlane.create_run('agent-w', 'manual', null, now() + interval '360 days')$$,
    'a wake time within the year is accepted'
);

create temp table q on commit drop as
select runlane_test.queued_run('agent-w', 'interactive', 'interactive') as run_id;
select throws_ok(
    $$select runlane.publish_run((select run_id from q), '294276-12-31 23:59:59+00')$$,
    '22023', null, 'publish_run refuses a wake time in year 294276'
);
select is(
    (select wake_at from runlane.runs where run_id = (select run_id from q)), null,
    'the refused wake time was not recorded'
);
select lives_ok(
    $$select runlane.publish_run((select run_id from q), now() - interval '1 hour')$$,
    'a wake time in the recent past is accepted (it means at once)'
);

do $$ begin perform runlane_test.claimed((select run_id from q)); end $$;
select throws_ok(
    $$select runlane.release_run((select run_id from q), 1, now() + interval '10 years', 'shutdown')$$,
    '22023', null, 'release_run refuses a wake time years ahead'
);
select is(
    (select state from runlane.runs where run_id = (select run_id from q)), 'running',
    'the refused release left the run running with its owner'
);

select * from finish();
rollback;
